package firstboot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
)

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func file(p string, content string) steps.WriteFile {
	return steps.WriteFile{Path: p, Mode: 0o640, Owner: "root:root", SHA256: sha([]byte(content)), Size: len(content), Content: []byte(content)}
}

// samples are one step of every kind, by the name of its type in package
// steps.
func samples(t *testing.T) map[string]steps.Step {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return map[string]steps.Step{
		"AptRepository": steps.AptRepository{Name: "r", URI: "https://apt.example/debian", Suite: "stable", KeyURL: "https://apt.example/key.asc",
			KeyringPath: "/etc/apt/keyrings/imagectl-r.gpg", SourcesPath: "/etc/apt/sources.list.d/imagectl-r.sources", Sources: "Types: deb\n"},
		"Packages":                steps.Packages{Packages: []string{"jq"}},
		"WriteFile":               file("/etc/x", "x\n"),
		"Run":                     steps.Run{Command: "true"},
		"Services":                steps.Services{Enable: []string{"a"}, Disable: []string{"b"}},
		"KernelArgs":              steps.KernelArgs{Args: []string{"iommu=pt"}},
		"StageBundle":             steps.StageBundle{Name: "b", SourcePath: dir, Destination: "/opt/b/", Entries: []steps.BundleEntry{{Path: "run.sh", Type: "file", Mode: 0o755, Size: 18, SHA256: sha([]byte("#!/bin/sh\necho hi\n"))}}},
		"InstallValidationScript": steps.InstallValidationScript{Path: "/usr/local/sbin/v.sh"},
		"WriteBuildMarker":        steps.WriteBuildMarker{Path: "/etc/imagectl/build.json"},
		"Cleanup":                 steps.Cleanup{Actions: steps.DefaultCleanup},
	}
}

// stepKinds are the types of package steps that have a Kind method: the
// closed set, read from its source.
func stepKinds(t *testing.T) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "../steps/steps.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != "Kind" {
			continue
		}
		typ := fn.Recv.List[0].Type
		if st, ok := typ.(*ast.StarExpr); ok {
			typ = st.X
		}
		kinds = append(kinds, typ.(*ast.Ident).Name)
	}
	if len(kinds) < 10 {
		t.Fatalf("found only %d step kinds in ../steps/steps.go: %v", len(kinds), kinds)
	}
	return kinds
}

func sampleManifest() *manifest.Manifest {
	return &manifest.Manifest{SchemaVersion: manifest.SchemaVersion, Image: manifest.Image{Name: "t", Title: "t", Version: "1.0.0", Architecture: "amd64/generic"},
		Validation: manifest.Validation{Script: "/usr/local/sbin/v.sh", Marker: "/etc/imagectl/build.json"}}
}

func layerOf(list ...steps.Step) []*compile.Layer {
	return []*compile.Layer{{Name: "l", Enabled: true, Steps: list}}
}

// TestEveryKindHasAFirstBootRendering: a kind of step added to package
// steps without an entry in executor fails here (and Script refuses it).
func TestEveryKindHasAFirstBootRendering(t *testing.T) {
	all := samples(t)
	for _, kind := range stepKinds(t) {
		s, ok := all[kind]
		if !ok {
			t.Errorf("steps.%s has no sample here: add one, and its first-boot rendering to executor", kind)
			continue
		}
		v, run := executor(s)
		if strings.Contains(v.Why, "no first-boot rendering") {
			t.Errorf("steps.%s: %s", kind, v.Why)
		}
		if (run == nil) != (v.Runs == No) {
			t.Errorf("steps.%s: verdict %s, but shell %v", kind, v, run != nil)
		}
		if v.Runs != Yes && v.Why == "" {
			t.Errorf("steps.%s: verdict %s without why", kind, v.Runs)
		}
		if _, err := Script(context.Background(), layerOf(s), sampleManifest(), Options{}); err != nil {
			t.Errorf("steps.%s: %v", kind, err)
		}
	}
}

// unknownStep is a kind executor does not know.
type unknownStep struct{}

func (unknownStep) Kind() string    { return "unknown" }
func (unknownStep) Summary() string { return "unknown" }

func TestScriptRefusesAnUnknownKind(t *testing.T) {
	_, err := Script(context.Background(), layerOf(unknownStep{}), sampleManifest(), Options{})
	if err == nil || !strings.Contains(err.Error(), "no first-boot rendering of unknown steps") {
		t.Fatalf("got %v", err)
	}
	if v := At(unknownStep{}); v.Runs != No {
		t.Errorf("At = %s", v)
	}
}

// TestVerdicts: what the plan shows for the steps that differ at first boot.
func TestVerdicts(t *testing.T) {
	for _, tc := range []struct {
		step   steps.Step
		runs   Runs
		why    string
		reboot bool
	}{
		{steps.KernelArgs{Args: []string{"a"}}, Yes, "after a reboot", true},
		{steps.Cleanup{Actions: steps.DefaultCleanup}, Partly, "machine-id: made at this boot", false},
		{steps.Cleanup{Actions: []string{steps.CleanSSHHostKeys}}, No, "ssh-host-keys", false},
		{steps.Cleanup{Actions: []string{steps.CleanAptCache}}, Yes, "", false},
		{steps.StageBundle{Name: "b", Unresolved: true, Reason: "needs var.x"}, No, "unresolved (needs var.x)", false},
		{steps.StageBundle{Name: "b", Entries: []steps.BundleEntry{{Path: "big", Type: "file", Size: MaxBundleBytes + 1}}}, No, "more than a first-boot script embeds", false},
		{steps.Packages{Packages: []string{"a"}, Optional: true}, Yes, "recorded as missing", false},
	} {
		v := At(tc.step)
		if v.Runs != tc.runs || !strings.Contains(v.Why, tc.why) || v.Reboot != tc.reboot {
			t.Errorf("%s: %+v, want %s with %q, reboot %v", tc.step.Summary(), v, tc.runs, tc.why, tc.reboot)
		}
	}
}

// hostile are values a recipe may hold that must stay data.
var hostile = []string{
	"it's", `a"b`, "line1\nline2", "$(touch pwned-subst)", "`touch pwned-tick`", "-rf", "--help", "a;touch pwned-semi", "*", "~root", `back\slash`, "$HOME",
}

// stubs replace the functions that change the host by ones that record
// each call's arguments, one per line, each percent-free value as it came.
const stubs = `
record() { for a in "$@"; do printf '%s\0' "$a"; done >>"$REC"; printf '\n\0' >>"$REC"; }
put_file() { record put_file "$@"; }
put_dir() { record put_dir "$@"; }
put_link() { record put_link "$@"; }
put_key() { record put_key "$@"; }
bundle_dest() { record bundle_dest "$@"; }
in_bundle() { record in_bundle "$@"; }
apply_now() { record apply_now "$@"; }
reboot_later() { record reboot_later "$@"; }
packages() { record packages "$@"; }
optional_packages() { record optional_packages "$@"; }
services() { record services "$@"; }
kernel_args() { record kernel_args "$@"; }
sh() { record sh "$@"; }
step() { record step "$1" "$3"; "$4"; }
not_here() { record not_here "$@"; }
partly() { record partly "$@"; }
begin() { :; }
end() { :; }
`

// calls runs a generated script with stubs in place of the functions that
// change the host, and returns the calls, each as its arguments.
func calls(t *testing.T, script []byte) [][]string {
	t.Helper()
	s := string(script)
	i := strings.Index(s, "\n# The steps, in the plan's order.\n")
	if i < 0 {
		t.Fatal("no steps section")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "s.sh")
	if err := os.WriteFile(p, []byte(s[:i]+stubs+s[i:]), 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "cwd")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "rec")
	cmd := exec.Command("/bin/sh", p)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "REC="+rec, StateDirEnv+"="+filepath.Join(dir, "state"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if entries, _ := os.ReadDir(work); len(entries) > 0 {
		t.Fatalf("the script created %s", entries[0].Name())
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	var cur []string
	for _, f := range strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00") {
		if f == "\n" {
			out = append(out, cur)
			cur = nil
			continue
		}
		cur = append(cur, f)
	}
	return out
}

// TestHostileValuesStayData: every value of every kind of step reaches the
// script's functions as exactly one argument, byte for byte, whatever it
// holds (quotes, newlines, $(...), backticks, leading dashes, globs), and
// the script passes shellcheck.
func TestHostileValuesStayData(t *testing.T) {
	dir := t.TempDir()
	for i, h := range hostile {
		p := filepath.Join(dir, "f"+string(rune('a'+i)))
		if err := os.WriteFile(p, []byte(h), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var list []steps.Step
	var want [][]string
	add := func(s steps.Step, w ...[]string) { list = append(list, s); want = append(want, w...) }
	for i, h := range hostile {
		n := string(rune('a' + i))
		add(steps.WriteFile{Path: "/etc/" + h, Mode: 0o600, Owner: h, SHA256: sha([]byte(h)), Size: len(h), Content: []byte(h)},
			[]string{"put_file", "/etc/" + h, "0600", h, sha([]byte(h)), "text", h})
		add(steps.Run{Command: h}, []string{"sh", "-c", h})
		add(steps.Services{Enable: []string{h}, Disable: []string{h, "x"}},
			[]string{"services", "enable", h}, []string{"services", "disable", h, "x"})
		add(steps.KernelArgs{Args: []string{h}}, []string{"kernel_args", h})
		add(steps.StageBundle{Name: "b", SourcePath: dir, Destination: "/opt/" + h, Entries: []steps.BundleEntry{
			{Path: "f" + n, Type: "file", Mode: 0o644, Size: int64(len(h)), SHA256: sha([]byte(h))},
			{Path: "d" + n + "/l" + n, Type: "symlink", Target: h},
		}},
			[]string{"bundle_dest", "/opt/" + h},
			[]string{"put_file", "/opt/" + h + "/f" + n, "0644", "root:root", sha([]byte(h)), "text", h},
			[]string{"in_bundle", "/opt/" + h, "d" + n + "/l" + n},
			[]string{"put_link", "/opt/" + h + "/d" + n + "/l" + n, h})
		if !strings.HasPrefix(h, "-") {
			add(steps.Packages{Packages: []string{h, "jq"}}, []string{"packages", "-", h, "jq"})
		}
		add(steps.AptRepository{Name: "r", KeyURL: "https://k.example/" + h, KeyringPath: "/k/" + h, SourcesPath: "/s/" + h, Sources: h},
			[]string{"put_key", "r", "https://k.example/" + h, "/k/" + h, ""},
			[]string{"put_file", "/s/" + h, "0644", "root:root", sha([]byte(h)), "text", h})
	}
	add(steps.Packages{Packages: []string{"a+b", "c.d:amd64"}, Optional: true, NoRecommends: true},
		[]string{"optional_packages", "--no-install-recommends", "a+b", "c.d:amd64"})
	binary := []byte{0xff, 0, 1, '\n', 0x1b, '\''}
	add(steps.WriteFile{Path: "/bin/x", Mode: fs.ModeSetuid | 0o755, Owner: "root:root", SHA256: sha(binary), Size: len(binary), Content: binary})
	script, err := scriptBytes(Script(context.Background(), layerOf(list...), sampleManifest(), Options{}))
	if err != nil {
		t.Fatal(err)
	}
	shellcheck(t, script)
	var got [][]string
	for _, c := range calls(t, script) {
		if c[0] != "step" {
			got = append(got, c)
		}
	}
	bin := got[len(got)-1]
	got = got[:len(got)-1]
	if len(bin) != 7 || bin[1] != "/bin/x" || bin[2] != "4755" || bin[5] != "base64" {
		t.Errorf("binary file: %q", bin)
	}
	if len(got) != len(want) {
		t.Fatalf("%d calls, want %d:\n%q", len(got), len(want), got)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("call %d: %q\nwant      %q", i, got[i], want[i])
		}
	}
}

func TestScriptRefuses(t *testing.T) {
	for name, s := range map[string]steps.Step{
		"NUL":              steps.Run{Command: "a\x00b"},
		"dash package":     steps.Packages{Packages: []string{"-o=x"}},
		"changed content":  steps.WriteFile{Path: "/x", Content: []byte("a"), SHA256: sha([]byte("b"))},
		"changed bundle":   steps.StageBundle{Name: "b", SourcePath: t.TempDir(), Destination: "/b", Entries: []steps.BundleEntry{{Path: "gone", Type: "file", Size: 1, SHA256: sha([]byte("x"))}}},
		"not a key":        steps.AptRepository{Name: "r", KeyFile: "k", KeyContent: []byte("hello"), KeyringPath: "/k", SourcesPath: "/s"},
		"unknown cleanups": steps.Cleanup{Actions: []string{"everything"}},
	} {
		_, err := Script(context.Background(), layerOf(s), sampleManifest(), Options{})
		if name == "unknown cleanups" {
			// Not refused: an unknown action does not run, and says so.
			if err != nil || At(s).Runs != No {
				t.Errorf("%s: %v, %s", name, err, At(s))
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

var shellchecked = map[[32]byte]bool{}

func shellcheck(t *testing.T, script []byte) {
	t.Helper()
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		testenv.Missing(t, "shellcheck is not installed (make deps installs it)")
		return
	}
	key := sha256.Sum256(script)
	if shellchecked[key] {
		return
	}
	shellchecked[key] = true
	cmd := exec.Command(sc, "-s", "sh", "-")
	cmd.Stdin = bytes.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %s", out)
	}
}

// TestKeyPinnedByABuild: with a build's options every apt key is checked
// against the digest the build recorded for its repository: a key fetched
// by URL on the host, a key file here; a repository the build recorded no
// digest for is refused, as is a key file of other bytes.
func TestKeyPinnedByABuild(t *testing.T) {
	arm, err := os.ReadFile("../../testdata/recipes/valid/keys/test-repo.asc")
	if err != nil {
		t.Fatal(err)
	}
	keyring, err := steps.Keyring(arm)
	if err != nil {
		t.Fatal(err)
	}
	m := sampleManifest()
	m.AptKeys = []manifest.AptKey{{Repository: "r", Source: "https://k.example/key", SHA256: strings.Repeat("ab", 32)},
		{Repository: "f", Source: "keys/test-repo.asc", SHA256: sha(keyring)}}
	opts, err := FromBuild(m, m)
	if err != nil {
		t.Fatal(err)
	}
	repo := func(name string) steps.AptRepository {
		return steps.AptRepository{Name: name, KeyURL: "https://k.example/key", KeyringPath: "/k/" + name, SourcesPath: "/s/" + name, Sources: "x"}
	}
	fileRepo := func(name string, key []byte) steps.AptRepository {
		return steps.AptRepository{Name: name, KeyFile: "keys/test-repo.asc", KeyContent: key, KeyringPath: "/k/" + name, SourcesPath: "/s/" + name, Sources: "x"}
	}
	script, err := scriptBytes(Script(context.Background(), layerOf(repo("r"), fileRepo("f", arm), steps.WriteBuildMarker{Path: "/etc/imagectl/build.json"}), m, opts))
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]string
	for _, c := range calls(t, script) {
		if c[0] == "put_key" {
			keys = append(keys, c)
		}
	}
	want := []string{"put_key", "r", "https://k.example/key", "/k/r", strings.Repeat("ab", 32)}
	if len(keys) != 1 || !slices.Equal(keys[0], want) {
		t.Errorf("put_key calls %q, want %q", keys, want)
	}
	if !bytes.Contains(script, []byte(strings.ReplaceAll(string(opts.Marker[:40]), "'", `'\''`))) {
		t.Error("the build's marker is not in the script")
	}
	for name, s := range map[string]steps.Step{
		"a URL key without a pin":   repo("other"),
		"a key file without a pin":  fileRepo("other", arm),
		"a key file of other bytes": fileRepo("f", []byte{0x99, 1, 2, 3}),
	} {
		if _, err := Script(context.Background(), layerOf(s), m, opts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Without a build's options a URL key goes unpinned, its digest logged.
	if _, err := Script(context.Background(), layerOf(repo("other")), m, Options{}); err != nil {
		t.Error(err)
	}
}

// TestFromBuildIsTheSameImage: a build's options come only from a build of
// the planned image, version and layers.
func TestFromBuildIsTheSameImage(t *testing.T) {
	planned := sampleManifest()
	planned.Layers = []manifest.Layer{{Name: "a", Enabled: true, Digest: "sha256:1"}, {Name: "off"}, {Name: "b", Enabled: true, Digest: "sha256:2"}}
	for name, tc := range map[string]struct {
		edit func(m *manifest.Manifest)
		want string
	}{
		"the same":        {func(m *manifest.Manifest) { m.Layers[1].Digest = "sha256:other" }, ""},
		"another image":   {func(m *manifest.Manifest) { m.Image.Name = "u" }, "a build of u, not of t"},
		"another version": {func(m *manifest.Manifest) { m.Image.Version = "2.0.0" }, "the plan's version is 1.0.0"},
		"another digest":  {func(m *manifest.Manifest) { m.Layers[2].Digest = "sha256:3" }, "layer b of the build of t 1.0.0 has digest sha256:3"},
		"a layer more":    {func(m *manifest.Manifest) { m.Layers[1].Enabled = true }, "has the layers a, off, b, the plan a, b"},
	} {
		m := *planned
		m.Layers = slices.Clone(planned.Layers)
		tc.edit(&m)
		_, err := FromBuild(&m, planned)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

func scriptBytes(r Result, err error) ([]byte, error) { return r.Script, err }

// TestScriptRefusesBundleThroughALink: a bundle whose entries go through
// an earlier symlink entry, or whose names are not clean and relative, is
// refused (as the recipe loader refuses it) before any shell is written.
func TestScriptRefusesBundleThroughALink(t *testing.T) {
	for name, entries := range map[string][]steps.BundleEntry{
		"a file under a link": {{Path: "a", Type: "symlink", Target: "/tmp/x/victim"}, {Path: "a/pwned", Type: "file", Size: 1, SHA256: sha([]byte("p"))}},
		"a link under a link": {{Path: "a", Type: "symlink", Target: "/etc"}, {Path: "a/keep", Type: "symlink", Target: "x"}},
		"a dir at a link":     {{Path: "a", Type: "symlink", Target: "/etc"}, {Path: "a", Type: "dir", Mode: 0o777}},
		"a link over a dir":   {{Path: "a", Type: "dir", Mode: 0o755}, {Path: "a", Type: "symlink", Target: "/etc"}},
		"dot-dot":             {{Path: "../x", Type: "symlink", Target: "y"}},
		"absolute":            {{Path: "/x", Type: "symlink", Target: "y"}},
		"not clean":           {{Path: "a//b", Type: "symlink", Target: "y"}},
	} {
		s := steps.StageBundle{Name: "b", SourcePath: t.TempDir(), Destination: "/opt/b", Entries: entries}
		_, err := Script(context.Background(), layerOf(s), sampleManifest(), Options{})
		if err == nil || !strings.Contains(err.Error(), "staging bundle b: entry") && !strings.Contains(err.Error(), "staging bundle b: symlink entry") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSensitiveFoundOnRawValues: a script carries a sensitive value
// whatever form the script gives it (quoted with '\” in a run command,
// base64 in a file that is not text, in a key URL or a sources file), and
// only then; the mode of its file follows.
func TestSensitiveFoundOnRawValues(t *testing.T) {
	const secret = "s3cr'et-value"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "(sensitive)") }
	crlf := "token=" + secret + "\r\n"
	for name, tc := range map[string]struct {
		step steps.Step
		want bool
	}{
		"run with a quote": {steps.Run{Command: "register --token " + secret}, true},
		"a binary file":    {file("/etc/token", crlf), true},
		"a key URL":        {steps.AptRepository{Name: "r", KeyURL: "https://k.example/key?t=" + secret, KeyringPath: "/k", SourcesPath: "/s", Sources: "x"}, true},
		"a sources file":   {steps.AptRepository{Name: "r", KeyURL: "https://k.example/key", KeyringPath: "/k", SourcesPath: "/s", Sources: "URIs: https://u:" + secret + "@apt.example\n"}, true},
		"nothing":          {steps.Run{Command: "register"}, false},
	} {
		res, err := Script(context.Background(), layerOf(tc.step), sampleManifest(), Options{Redact: redact})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Sensitive != tc.want {
			t.Errorf("%s: Sensitive %v, want %v", name, res.Sensitive, tc.want)
		}
		want := map[bool][2]os.FileMode{true: {0o700, 0o600}, false: {0o755, 0o644}}[tc.want]
		if res.Mode(false) != want[0] || res.Mode(true) != want[1] {
			t.Errorf("%s: modes %v %v", name, res.Mode(false), res.Mode(true))
		}
		if bytes.Contains(res.Script, []byte(secret)) {
			t.Errorf("%s: the raw value is in the script as it is, and was to be encoded", name)
		}
	}
}

// TestBootFilesApplied: a file the host reads at boot is applied to this
// boot where a command can (its verdict says how) or marked for a reboot.
func TestBootFilesApplied(t *testing.T) {
	for _, tc := range []struct {
		path, apply string
		reboot      bool
	}{
		{"/etc/modules-load.d/vfio.conf", "systemctl restart systemd-modules-load.service", false},
		{"/etc/sysctl.d/90-net.conf", "sysctl --system", false},
		{"/etc/udev/rules.d/70-ib.rules", "udevadm control --reload && udevadm trigger", false},
		{"/etc/systemd/system/nvidia-persistenced.service.d/override.conf", "systemctl daemon-reload", false},
		{"/etc/modprobe.d/vfio.conf", "", true},
		{"/etc/default/grub.d/90-imagectl.cfg", "", true},
		{"/etc/motd", "", false},
	} {
		s := file(tc.path, "x\n")
		v := At(s)
		if v.Reboot != tc.reboot || (tc.apply != "" || tc.reboot) == (v.Why == "content embedded") {
			t.Errorf("%s: %+v", tc.path, v)
		}
		script, err := scriptBytes(Script(context.Background(), layerOf(s), sampleManifest(), Options{}))
		if err != nil {
			t.Fatal(err)
		}
		var applied []string
		later := false
		for _, c := range calls(t, script) {
			switch c[0] {
			case "apply_now":
				applied = append(applied, c[2])
			case "reboot_later":
				later = true
			}
		}
		if later != tc.reboot {
			t.Errorf("%s: reboot_later %v", tc.path, later)
		}
		if tc.apply == "" && len(applied) > 0 || tc.apply != "" && (len(applied) != 1 || applied[0] != tc.apply) {
			t.Errorf("%s: applied %q, want %q", tc.path, applied, tc.apply)
		}
	}
}

// TestEveryCleanupActionAtFirstBoot: every clean-up action a build knows
// says whether it runs at first boot, and what runs when it does, so a new
// action cannot reach a plan as "an action imagectl does not know".
func TestEveryCleanupActionAtFirstBoot(t *testing.T) {
	for _, action := range steps.DefaultCleanup {
		why, ok := cleanupAtFirstBoot[action]
		if !ok {
			t.Errorf("clean-up action %q: no first-boot verdict in cleanupAtFirstBoot", action)
			continue
		}
		if _, runs := cleanupShell[action]; runs != (why == "") {
			t.Errorf("clean-up action %q: runs at first boot %v, but its shell is given %v", action, why == "", runs)
		}
	}
}
