package validate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuaas/imagectl/manifest"
)

// The validation script's --json document and the copy a live run keeps,
// read back with ParseResult as imagectl reads them.

// shells are the POSIX shells the script must run under: dash (Debian's and
// Ubuntu's sh) and, when installed, busybox sh.
func shells() [][]string {
	out := [][]string{{"dash"}}
	if _, err := exec.LookPath("dash"); err != nil {
		out = [][]string{{"sh"}}
	}
	if p, err := exec.LookPath("busybox"); err == nil {
		out = append(out, []string{p, "sh"})
	}
	return out
}

// runOn is one run of the script for m under the shell sh on the host.
type runOn struct {
	script         []byte
	stdout, stderr string
	code           int
	// elapsed is how long the shell ran.
	elapsed time.Duration
}

// runWith generates the script for m and runs it under the shell sh (a
// command line) on the host with args.
func (h *host) runWith(sh []string, m *manifest.Manifest, args ...string) *runOn {
	h.t.Helper()
	script, err := Script(m)
	if err != nil {
		h.t.Fatal(err)
	}
	p := filepath.Join(h.t.TempDir(), "validate.sh")
	if err := os.WriteFile(p, script, 0o755); err != nil {
		h.t.Fatal(err)
	}
	shellcheck(h.t, p, script)
	cmd := exec.Command(sh[0], append(append(sh[1:len(sh):len(sh)], p), args...)...)
	cmd.Env = []string{"PATH=" + h.bin, "IMAGECTL_VALIDATE_ROOT=" + h.root, "LC_ALL=C"}
	for k, v := range h.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	r := &runOn{script: script, stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// result decodes the run's standard output as a result document.
func (r *runOn) result(t *testing.T) *Result {
	t.Helper()
	res, err := ParseResult([]byte(r.stdout))
	if err != nil {
		t.Fatalf("%v (exit %d):\n%s%s", err, r.code, r.stdout, r.stderr)
	}
	if !utf8.ValidString(r.stdout) {
		t.Errorf("the document is not UTF-8:\n%q", r.stdout)
	}
	if sum := sha256.Sum256(r.script); res.ScriptSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("script_sha256 %s, the script's is %x", res.ScriptSHA256, sum)
	}
	if res.Started.After(res.Finished) || time.Since(res.Started) > time.Hour || res.Started.Location() != time.UTC {
		t.Errorf("started %s, finished %s", res.Started, res.Finished)
	}
	return res
}

// sameChecks: the document's checks are the text lines' checks, in their
// order, each value as a consumer decodes the line (invalid UTF-8 as
// U+FFFD), and its counts the summary's.
func sameChecks(t *testing.T, o *outcome, res *Result) {
	t.Helper()
	if len(o.lines) != len(res.Checks) {
		t.Fatalf("%d lines, %d checks:\n%s", len(o.lines), len(res.Checks), o.out)
	}
	for i, l := range o.lines {
		want := Check{Status: l.status, Name: utf8Decoded(l.check), Detail: utf8Decoded(l.detail), Remediation: utf8Decoded(l.remediation)}
		if res.Checks[i] != want {
			t.Errorf("check %d: %+q, the line says %+q", i+1, res.Checks[i], want)
		}
	}
	for k, v := range map[string]int{"checks": res.Counts.Checks, "failures": res.Counts.Failures, "warnings": res.Counts.Warnings} {
		if o.summary[k] != strconv.Itoa(v) {
			t.Errorf("counts %s=%d, the summary says %s", k, v, o.summary[k])
		}
	}
	if res.Profile != o.summary["profile"] || res.Stage != o.summary["stage"] {
		t.Errorf("profile %s stage %s, the summary says %s %s", res.Profile, res.Stage, o.summary["profile"], o.summary["stage"])
	}
}

// utf8Decoded is s as a JSON reader decodes its bytes: each byte of an
// invalid sequence is U+FFFD.
func utf8Decoded(s string) string { return string([]rune(s)) }

// textOutcome reads a text run's lines.
func textOutcome(t *testing.T, r *runOn) *outcome {
	t.Helper()
	o := &outcome{out: r.stdout, stderr: r.stderr, code: r.code}
	o.parse(t)
	return o
}

// TestResultOfARoot: over an unpacked root (demo), --json is the text
// lines as one document, for the script's image and version (the root's
// marker names neither), not live, and nothing is kept under the root.
func TestResultOfARoot(t *testing.T) {
	t.Parallel()
	for _, sh := range shells() {
		t.Run(filepath.Base(sh[0]), func(t *testing.T) {
			t.Parallel()
			h := newHost(t, "awk")
			root := fakeRoot(t)
			text := textOutcome(t, h.runWith(sh, sampleManifest(), "--root", root))
			r := h.runWith(sh, sampleManifest(), "--root", root, "--json")
			res := r.result(t)
			if r.code != 0 || text.code != 0 || !res.Passed() {
				t.Fatalf("exit %d (text %d):\n%s%s", r.code, text.code, r.stdout, r.stderr)
			}
			sameChecks(t, text, res)
			if res.Image != "demo" || res.Version != "1.0.0" || res.Live || res.Profile != "bare-metal" || res.Stage != "image" {
				t.Errorf("image %s %s, live %v, profile %s stage %s", res.Image, res.Version, res.Live, res.Profile, res.Stage)
			}
			if host, _ := os.Hostname(); res.Host != host {
				t.Errorf("host %q, this host is %q", res.Host, host)
			}
			for _, dir := range []string{root, h.root} {
				if _, err := os.Stat(filepath.Join(dir, "var/lib/imagectl")); !os.IsNotExist(err) {
					t.Errorf("a run over a root kept its result under %s: %v", dir, err)
				}
			}
		})
	}
}

const machineID = "5c1f0e2d9a8b4c7d8e9f0a1b2c3d4e5f"

// TestResultOfAHost: on a converged slice host (the H200 stand-in), the
// document is printed with --json and kept, whole, in the state directory
// under the host's root, with or without --json.
func TestResultOfAHost(t *testing.T) {
	t.Parallel()
	for _, sh := range shells() {
		for _, awk := range awks() {
			t.Run(filepath.Base(sh[0])+"/"+awk, func(t *testing.T) {
				t.Parallel()
				h := convergedHost(t, awk)
				h.file("etc/machine-id", machineID+"\n")
				m := profilesManifest()
				marker, err := m.Marker()
				if err != nil {
					t.Fatal(err)
				}
				h.file(m.Validation.Marker, string(marker))
				args := []string{"--profile", "slice", "--stage", "converged"}
				r := h.runWith(sh, m, append(args, "--json")...)
				res := r.result(t)
				if r.code != 0 || !res.Passed() || res.Counts.Warnings != 0 || r.stderr != "" {
					t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
				}
				if res.Image != "h200" || res.Version != "2.0.0" || !res.Live || res.MachineID != machineID ||
					res.Profile != "slice" || res.Stage != "converged" {
					t.Errorf("image %s %s, live %v, machine %q, profile %s stage %s", res.Image, res.Version, res.Live, res.MachineID, res.Profile, res.Stage)
				}
				dir := filepath.Join(h.root, StateDir)
				kept := func(name string) []byte {
					t.Helper()
					p := filepath.Join(dir, name)
					b, err := os.ReadFile(p)
					if err != nil {
						t.Fatal(err)
					}
					if fi, _ := os.Lstat(p); !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
						t.Errorf("%s: mode %s, want a regular file 0644", name, fi.Mode())
					}
					return b
				}
				for _, name := range []string{"result.json", "result-slice-converged.json"} {
					if got := kept(name); string(got) != r.stdout {
						t.Errorf("%s is not the document printed:\n%s", name, got)
					}
				}
				if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("%s: %v %v, want a directory 0755", dir, fi, err)
				}

				// Without --json: the lines, and the same document kept.
				h.remove(ibDone)
				text := textOutcome(t, h.runWith(sh, m, args...))
				if text.code != 1 || len(text.failed()) != 1 {
					t.Fatalf("exit %d:\n%s%s", text.code, text.out, text.stderr)
				}
				res, err = ParseResult(kept("result-slice-converged.json"))
				if err != nil {
					t.Fatal(err)
				}
				sameChecks(t, text, res)
				if string(kept("result.json")) != string(kept("result-slice-converged.json")) {
					t.Error("result.json is not the last run's document")
				}
				f := res.Failing()
				if len(f) != 1 || f[0].Name != "done-marker:h200-ib.done" || !strings.Contains(f[0].Remediation, "run the site bootstrap h200-ib") {
					t.Errorf("failing: %+v", f)
				}
				entries, _ := os.ReadDir(dir)
				if len(entries) != 2 {
					t.Errorf("the state directory holds %d entries, want the two documents: %v", len(entries), entries)
				}
			})
		}
	}
}

// TestResultImageFromTheMarker: the document names the image and version
// the host's build marker names: a host running another version says so
// (and fails the marker check), whatever script ran.
func TestResultImageFromTheMarker(t *testing.T) {
	t.Parallel()
	h := convergedHost(t, "awk")
	other := profilesManifest()
	other.Image.Version = "1.9.0"
	marker, err := other.Marker()
	if err != nil {
		t.Fatal(err)
	}
	h.file(other.Validation.Marker, string(marker))
	r := h.runWith([]string{"sh"}, profilesManifest(), "--json")
	res := r.result(t)
	if r.code != 1 || res.Image != "h200" || res.Version != "1.9.0" {
		t.Fatalf("exit %d, image %s %s:\n%s", r.code, res.Image, res.Version, r.stdout)
	}
	if f := res.Failing(); len(f) != 1 || f[0].Name != "build-marker" || !strings.Contains(f[0].Remediation, "redeploy it with version 2.0.0") {
		t.Errorf("failing: %+v", f)
	}
}

// hostileCommand prints, and fails with, what a check's detail may carry:
// quotes, a backslash, tab, newline, control bytes, DEL, bytes that are not
// UTF-8 (a lone \377, a cut sequence, an overlong and a surrogate), valid
// multibyte characters, and the bytes \036 and \037 (which once separated
// the script's values).
const hostileCommand = `printf '%s\n' 'q"b\s	t' "$(printf 'n\001c\177d\377e\342\202f\300\257g\355\240\200h\303\251 \360\237\230\200r\036u\037v')"; exit 3`

// TestResultEscapesWhatADetailCarries: every byte a check's output can
// carry round-trips as the text line shows it, in a document that is
// UTF-8 and one JSON value, under each shell and awk (busybox's too: the
// escaping is the awk most likely to differ).
func TestResultEscapesWhatADetailCarries(t *testing.T) {
	t.Parallel()
	awkList := awks()
	if _, err := exec.LookPath("busybox"); err == nil {
		awkList = append(awkList, "busybox")
	}
	for _, sh := range shells() {
		for _, awk := range awkList {
			t.Run(filepath.Base(sh[0])+"/"+awk, func(t *testing.T) {
				t.Parallel()
				m := profilesManifest()
				m.Validation.Checks = []manifest.Check{{Name: "hostile \"\\\x01\xff", Command: hostileCommand}}
				h := convergedHost(t, awk)
				text := textOutcome(t, h.runWith(sh, m))
				l := text.get(t, "command:hostile \"\\\x01\xff")
				if b := `q"b\s` + "\tt\nn\x01c\x7fd\xffe\xe2\x82f\xc0\xafg\xed\xa0\x80h\u00e9 \U0001F600r\x1eu\x1fv"; !strings.HasSuffix(l.detail, b) {
					t.Fatalf("the line's detail %q does not end in %q", l.detail, b)
				}
				r := h.runWith(sh, m, "--json")
				res := r.result(t)
				sameChecks(t, text, res)
				if r.code != 1 || text.code != 1 {
					t.Errorf("exit %d, text %d", r.code, text.code)
				}
				for _, b := range []byte{0x01, 0x7f, 0xff, '\t', 0x1e, 0x1f} {
					if strings.IndexByte(r.stdout, b) >= 0 {
						t.Errorf("byte %#x is in the document as it is:\n%q", b, r.stdout)
					}
				}
			})
		}
	}
}

// TestResultWhenTheHostCannotKeepIt: a state directory that cannot be
// written is a WARN in the lines and the document, never a failure.
func TestResultWhenTheHostCannotKeepIt(t *testing.T) {
	t.Parallel()
	h := convergedHost(t, "awk")
	h.file("var/lib/imagectl", "a file where the directory goes\n")
	args := []string{"--profile", "slice", "--stage", "converged"}
	o := textOutcome(t, h.runWith([]string{"sh"}, profilesManifest(), args...))
	if o.code != 0 || len(o.failed()) != 0 {
		t.Fatalf("exit %d:\n%s%s", o.code, o.out, o.stderr)
	}
	o.expect(t, "state-dir", "WARN", "the result is not kept in "+StateDir)
	r := h.runWith([]string{"sh"}, profilesManifest(), append(args, "--json")...)
	res := r.result(t)
	if r.code != 0 || res.Counts.Warnings != 1 || res.Checks[len(res.Checks)-1].Name != "state-dir" {
		t.Errorf("exit %d:\n%s", r.code, r.stdout)
	}
}

// TestResultWithoutSHA256: with neither sha256sum nor openssl the document
// says so (a WARN, an empty script_sha256 that imagectl refuses); openssl
// alone serves.
func TestResultWithoutSHA256(t *testing.T) {
	t.Parallel()
	h := convergedHost(t, "awk")
	h.unstub("sha256sum")
	r := h.runWith([]string{"sh"}, profilesManifest(), "--json")
	var res Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if res.ScriptSHA256 != "" || res.Checks[len(res.Checks)-1].Name != "script-sha256" || res.Checks[len(res.Checks)-1].Status != StatusWarn {
		t.Errorf("without a sha256 tool:\n%s", r.stdout)
	}
	if _, err := ParseResult([]byte(r.stdout)); err == nil || !strings.Contains(err.Error(), "script_sha256") {
		t.Errorf("ParseResult: %v, want a refusal naming script_sha256", err)
	}
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("no openssl")
	}
	if err := os.Symlink(openssl, filepath.Join(h.bin, "openssl")); err != nil {
		t.Fatal(err)
	}
	h.runWith([]string{"sh"}, profilesManifest(), "--json").result(t)
}

// bootEpoch is the fake host's boot: btime in its /proc/stat.
const bootEpoch = 1_700_000_000

// firstBoot lays out what a host tells of its first boot: the kernel's
// start (btime) and uptime, systemd's monotonic timestamps (no
// cloud-final: its end comes from cloud-init's status.json), cloud-init's
// analyze dump (a start of config-scripts_user in an earlier boot, then
// this boot's), the done-markers' times and cloud-init's once-per-instance
// semaphore, written at sem seconds after the boot.
func firstBoot(h *host, sem int64) {
	h.t.Helper()
	h.file("proc/stat", "cpu  1 2 3 4\nbtime "+strconv.Itoa(bootEpoch)+"\nprocesses 1\n")
	h.file("proc/uptime", "250.50 1000.00\n")
	h.file("fake-systemd/manager", "LoaderTimestampMonotonic=0\nUserspaceTimestampMonotonic=4200000\nFinishTimestampMonotonic=125000000\n")
	h.file("fake-systemd/cloud-init-local.service", "InactiveExitTimestampMonotonic=6100000\n")
	h.file("fake-systemd/multi-user.target", "ActiveEnterTimestampMonotonic=30000000\n")
	h.env["FAKE_SYSTEMD"] = h.root + "/fake-systemd"
	h.file("var/lib/cloud/data/status.json", `{
 "v1": {
  "datasource": "DataSourceMAAS",
  "init-local": {
   "errors": [],
   "finished": 1700000007.5,
   "start": 1700000006.25
  },
  "modules-final": {
   "errors": [],
   "finished": 1700000120.25,
   "start": 1700000099.0
  },
  "stage": null
 }
}
`)
	event := func(typ string, ts string) string {
		return " {\n  \"description\": \"running config-scripts_user with frequency once-per-instance\",\n  \"event_type\": \"" + typ +
			"\",\n  \"name\": \"modules-final/config-scripts_user\",\n  \"origin\": \"cloudinit\",\n  \"timestamp\": " + ts + "\n }"
	}
	h.file("fake-cloud-init-dump", "[\n"+event("start", "1690000000.0")+",\n"+event("finish", "1690000010.0")+",\n"+
		event("start", "1700000100.5")+",\n"+event("finish", "1700000116.0")+"\n]\n")
	h.stub("cloud-init", `[ "$1 $2" = "analyze dump" ] && exec cat "$FAKE_DUMP"; exit 2`)
	h.env["FAKE_DUMP"] = h.root + "/fake-cloud-init-dump"
	for f, at := range map[string]int64{ibDone: 110, sliceDone: 115, "var/lib/cloud/instance/sem/config_scripts_user": sem} {
		h.file(f, "")
		if err := os.Chtimes(filepath.Join(h.root, f), time.Time{}, time.Unix(bootEpoch+at, 0)); err != nil {
			h.t.Fatal(err)
		}
	}
}

// TestResultTimeline: a live run's document carries the first boot in
// smoke's milestone names, seconds since the kernel started, each from
// where the host tells it, in time order; a later boot tells nothing of
// the first, and a host that tells nothing has only the script's own.
func TestResultTimeline(t *testing.T) {
	t.Parallel()
	args := []string{"--profile", "slice", "--stage", "converged", "--json"}
	for _, sh := range shells() {
		t.Run(filepath.Base(sh[0]), func(t *testing.T) {
			t.Parallel()
			h := convergedHost(t, "awk")
			firstBoot(h, 101)
			r := h.runWith(sh, profilesManifest(), args...)
			res := r.result(t)
			if r.code != 0 {
				t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
			}
			want := []Milestone{
				{MilestoneKernel, 0, SourceSystemd},
				{MilestoneUserspace, 4.2, SourceSystemd},
				{MilestoneCloudInitStart, 6.1, SourceSystemd},
				{MilestoneMultiUser, 30, SourceSystemd},
				{MilestoneBootstrapStart, 100.5, SourceCloudInit},
				{MilestoneBootstrapDone, 115, SourceMarker},
				{MilestoneCloudInitDone, 120.25, SourceCloudInit},
				{MilestoneBootFinished, 125, SourceSystemd},
				{MilestoneValidationStart, 250.5, SourceScript},
				{MilestoneValidationDone, 250.5, SourceScript},
			}
			if !slices.Equal(res.Timeline, want) {
				t.Errorf("timeline:\n%+v\nwant\n%+v", res.Timeline, want)
			}
			for _, m := range res.Timeline {
				if !slices.Contains(Milestones, m.Name) {
					t.Errorf("milestone %q is not one of smoke's", m.Name)
				}
			}
		})
	}
	t.Run("a later boot", func(t *testing.T) {
		t.Parallel()
		h := convergedHost(t, "awk")
		firstBoot(h, -3600)
		if res := h.runWith([]string{"sh"}, profilesManifest(), args...).result(t); len(res.Timeline) != 0 {
			t.Errorf("a later boot's timeline: %+v", res.Timeline)
		}
	})
	t.Run("nothing else to tell", func(t *testing.T) {
		t.Parallel()
		h := convergedHost(t, "awk")
		h.file("proc/stat", "btime "+strconv.Itoa(bootEpoch)+"\n")
		h.file("proc/uptime", "61.07 100.00\n")
		for _, f := range []string{ibDone, sliceDone} { // written before this boot: not its bootstrap
			if err := os.Chtimes(filepath.Join(h.root, f), time.Time{}, time.Unix(bootEpoch-100, 0)); err != nil {
				t.Fatal(err)
			}
		}
		res := h.runWith([]string{"sh"}, profilesManifest(), args...).result(t)
		want := []Milestone{{MilestoneValidationStart, 61.07, SourceScript}, {MilestoneValidationDone, 61.07, SourceScript}}
		if !slices.Equal(res.Timeline, want) || res.Counts.Warnings != 0 || !res.Passed() {
			t.Errorf("timeline %+v, %+v", res.Timeline, res.Counts)
		}
	})
	t.Run("offline", func(t *testing.T) {
		t.Parallel()
		h := convergedHost(t, "awk")
		firstBoot(h, 101)
		if res := h.runWith([]string{"sh"}, profilesManifest(), "--root", h.root, "--json").result(t); len(res.Timeline) != 0 {
			t.Errorf("a run over a root has a timeline: %+v", res.Timeline)
		}
	})
}

// TestTimelineNamesAreSmokes: every milestone the script names is one of
// Milestones, the names smoke's timeline uses.
func TestTimelineNamesAreSmokes(t *testing.T) {
	re := regexp.MustCompile(`(?m)\b(?:milestone|systemd_time|cloud_init_status) ([a-z][a-z-]*) `)
	found := re.FindAllStringSubmatch(shTimeline, -1)
	if len(found) < 10 {
		t.Fatalf("%d milestones named in timeline.sh", len(found))
	}
	for _, m := range found {
		if !slices.Contains(Milestones, m[1]) {
			t.Errorf("timeline.sh names milestone %q, not one of %v", m[1], Milestones)
		}
	}
}

// TestResultOfAGPUHost: an H200 host (nvidia-smi replaying a fixture) with
// a planted ECC error: the document names the failing check with its
// remediation, and agrees with the lines.
func TestResultOfAGPUHost(t *testing.T) {
	t.Parallel()
	var fixture string
	for _, f := range gpuFixtures(t) {
		if fixtureModel(f) == "H200" {
			fixture = f
		}
	}
	if fixture == "" {
		t.Fatal("no H200 fixture under testdata/nvidia-smi")
	}
	h := gpuHost(t, "awk", fixture, 8, "2 ecc.errors.uncorrected.volatile.total 4")
	m := gpuManifest(fixture, 8)
	text := textOutcome(t, h.runWith([]string{"sh"}, m))
	r := h.runWith([]string{"sh"}, m, "--json")
	res := r.result(t)
	sameChecks(t, text, res)
	f := res.Failing()
	if r.code != 1 || res.Passed() || len(f) != 1 || f[0].Name != "gpu:ecc-errors" || !strings.Contains(f[0].Detail, "GPU 2: 4 uncorrected") ||
		f[0].Remediation == "" || f[0].Remediation != text.get(t, "gpu:ecc-errors").remediation {
		t.Errorf("exit %d, failing %+v:\n%s", r.code, f, r.stdout)
	}
}

// TestResultStateDirNotRedirected: a directory of the state directory's
// path that is a symbolic link, or owned by another user, is a WARN and
// nothing is written through it.
func TestResultStateDirNotRedirected(t *testing.T) {
	t.Parallel()
	args := []string{"--profile", "slice", "--stage", "converged"}
	for _, c := range []struct {
		name  string
		setup func(h *host) string // where a redirected write would land
	}{
		{"symlinked parent", func(h *host) string {
			elsewhere := t.TempDir()
			if err := os.MkdirAll(filepath.Join(h.root, "var/lib"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(h.root, "var/lib/imagectl")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(elsewhere, "validate")
		}},
		{"symlinked state dir", func(h *host) string {
			elsewhere := t.TempDir()
			if err := os.MkdirAll(filepath.Join(h.root, "var/lib/imagectl"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(h.root, StateDir)); err != nil {
				t.Fatal(err)
			}
			return elsewhere
		}},
		{"owned by another user", func(h *host) string {
			if os.Geteuid() != 0 {
				t.Skip("changing a directory's owner needs root")
			}
			dir := filepath.Join(h.root, StateDir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(filepath.Join(h.root, "var/lib/imagectl"), 4242, 4242); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := convergedHost(t, "awk")
			target := c.setup(h)
			o := textOutcome(t, h.runWith([]string{"sh"}, profilesManifest(), args...))
			if o.code != 0 || len(o.failed()) != 0 {
				t.Fatalf("exit %d:\n%s%s", o.code, o.out, o.stderr)
			}
			o.expect(t, "state-dir", "WARN", "the result is not kept in "+StateDir)
			if entries, _ := os.ReadDir(target); len(entries) != 0 {
				t.Errorf("%s holds %v: the result was written through the redirection", target, entries)
			}
		})
	}
}

// TestResultHostAndMachineID: a result's host is a host name and its
// machine id 32 hex digits (or none): what a host supplies goes into
// commit messages and keys, and a newline there could forge a trailer.
func TestResultHostAndMachineID(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	whole := Result{Schema: ResultSchema, Image: "h200", Version: "2.0.0", Profile: "slice", Stage: "converged",
		Host: "gpu-01.rack_3", MachineID: machineID, Live: true, Started: now, Finished: now,
		ScriptSHA256: strings.Repeat("ab", 32), Checks: []Check{{Status: StatusPass, Name: "x"}}, Counts: Counts{Checks: 1}}
	if err := whole.Check(); err != nil {
		t.Fatal(err)
	}
	noID := whole
	noID.MachineID = ""
	if err := noID.Check(); err != nil {
		t.Errorf("no machine id: %v", err)
	}
	for _, c := range []struct{ host, id, want string }{
		{"gpu-01\nPolicy: overridden", machineID, "host"},
		{"gpu 01", machineID, "host"},
		{"gpu-01;rm", machineID, "host"},
		{strings.Repeat("a", 254), machineID, "host"},
		{"gpu-01", "0123", "machine_id"},
		{"gpu-01", "uninitialized", "machine_id"},
		{"gpu-01", machineID + "\n", "machine_id"},
		{"gpu-01", strings.Repeat("g", 32), "machine_id"},
	} {
		r := whole
		r.Host, r.MachineID = c.host, c.id
		if err := r.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("host %q machine id %q: %v, want a refusal naming %s", c.host, c.id, err, c.want)
		}
	}
	long := whole
	long.Host = strings.Repeat("a", 253)
	if err := long.Check(); err != nil {
		t.Errorf("a 253-byte host name: %v", err)
	}
}
