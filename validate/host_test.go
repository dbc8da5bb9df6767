package validate

import (
	"crypto/sha256"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
)

// A fake host for the validation script: a root directory for its files and
// its /proc, /sys and /dev (IMAGECTL_VALIDATE_ROOT), and a bin directory that
// is the script's whole PATH: the real tools it needs, linked, and
// stand-ins (nvidia-smi, systemctl, ip, curl, ...) written by the test. No
// root, no network, nothing of the machine's own state leaks in.
type host struct {
	t    *testing.T
	root string
	bin  string
	env  map[string]string
}

// realTools are the tools the script and the stand-ins may run.
var realTools = []string{"sh", "sed", "grep", "tr", "cut", "head", "tail", "cat", "date", "sleep", "wc",
	"ls", "stat", "sha256sum", "dpkg-query", "uname", "sort", "mkdir", "chmod", "mv", "rm", "id", "mktemp"}

// awks are the awk implementations the tests run the script with: the
// default one and, unless -short, mawk (Ubuntu's default) when installed.
func awks() []string {
	out := []string{"awk"}
	if testing.Short() {
		return out
	}
	if p, err := exec.LookPath("mawk"); err == nil {
		if def, err := exec.LookPath("awk"); err != nil || resolve(def) != resolve(p) {
			out = append(out, "mawk")
		}
	}
	return out
}

func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func newHost(t *testing.T, awk string) *host {
	t.Helper()
	h := &host{t: t, root: t.TempDir(), bin: t.TempDir(), env: map[string]string{}}
	for _, tool := range append(realTools, awk) {
		p, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		name := tool
		if tool == awk {
			name = "awk"
		}
		if err := os.Symlink(p, filepath.Join(h.bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	h.stub("systemctl", fakeSystemctl)
	return h
}

// file writes a file under the host's root.
func (h *host) file(p, content string) {
	h.t.Helper()
	full := filepath.Join(h.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// dir makes a directory under the host's root.
func (h *host) dir(p string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Join(h.root, p), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func (h *host) remove(p string) {
	h.t.Helper()
	if err := os.RemoveAll(filepath.Join(h.root, p)); err != nil {
		h.t.Fatal(err)
	}
}

// stub writes a stand-in command (a sh script) on the host's PATH.
func (h *host) stub(name, script string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.bin, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func (h *host) unstub(name string) { os.Remove(filepath.Join(h.bin, name)) }

// active makes systemctl report the units active (and enabled).
func (h *host) active(units ...string) { h.env["FAKE_ACTIVE"] = strings.Join(units, " ") }

// failed makes systemctl report the units failed.
func (h *host) failed(units ...string) { h.env["FAKE_FAILED"] = strings.Join(units, " ") }

// triggers makes systemctl show the sockets as the unit's TriggeredBy.
func (h *host) triggers(unit string, sockets ...string) {
	h.env["FAKE_TRIGGERS"] = strings.TrimSpace(h.env["FAKE_TRIGGERS"] + " " + unit + "=" + strings.Join(sockets, ","))
}

// fakeSystemctl answers is-active and is-enabled from $FAKE_ACTIVE and
// $FAKE_FAILED, show --property=TriggeredBy --value from $FAKE_TRIGGERS
// (unit=socket,socket ...), and show -p PROPERTY --value [UNIT] from the
// PROPERTY=VALUE lines of $FAKE_SYSTEMD/UNIT (manager without a unit), as
// systemd 252 prints them. It refuses a unit
// not preceded by "--", which a unit named like an option would need.
const fakeSystemctl = `case " $* " in
*" -- "*) ;;
*)
	echo "systemctl stand-in: no -- before the unit: $*" >&2
	exit 1
	;;
esac
for a do
	shift
	[ "$a" = -- ] || set -- "$@" "$a"
done
case $1 in
is-active | is-enabled)
	for u in ${FAKE_ACTIVE:-}; do
		if [ "$u" = "$2" ]; then
			[ "$1" = is-active ] && echo active || echo enabled
			exit 0
		fi
	done
	for u in ${FAKE_FAILED:-}; do
		if [ "$1" = is-active ] && [ "$u" = "$2" ]; then
			echo failed
			exit 3
		fi
	done
	[ "$1" = is-active ] && echo inactive || echo disabled
	exit 3
	;;
show)
	if [ "$2" = --property=TriggeredBy ] && [ "$3" = --value ]; then
		for t in ${FAKE_TRIGGERS:-}; do
			if [ "${t%%=*}" = "$4" ]; then
				echo "${t#*=}" | tr , ' '
				exit 0
			fi
		done
		echo
		exit 0
	fi
	if [ "$2" = -p ] && [ "$4" = --value ] && [ -n "${FAKE_SYSTEMD:-}" ]; then
		grep "^$3=" "$FAKE_SYSTEMD/${5:-manager}" 2>/dev/null | cut -d= -f2-
		exit 0
	fi
	;;
esac
echo "systemctl stand-in: $*" >&2
exit 1
`

// outcome is what one run of the script printed.
type outcome struct {
	code    int
	out     string
	stderr  string
	lines   []line
	summary map[string]string
	elapsed time.Duration
}

type line struct{ status, check, detail, remediation string }

// run generates the script for m and runs it on the host with args, live
// unless args say --root.
func (h *host) run(m *manifest.Manifest, args ...string) *outcome {
	h.t.Helper()
	r := h.runWith([]string{"sh"}, m, args...)
	o := &outcome{out: r.stdout, stderr: r.stderr, code: r.code, elapsed: r.elapsed}
	if !slices.Contains(args, "-h") {
		o.parse(h.t)
	}
	return o
}

// parse reads the result lines back as a consumer would: key=value fields,
// percent-decoded. Every FAIL line must carry a remediation, no other line
// one.
func (o *outcome) parse(t *testing.T) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(o.out), "\n") {
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		if f[0] != Prefix {
			t.Errorf("not a result line: %q", l)
			continue
		}
		kv := map[string]string{}
		for _, field := range f[1:] {
			k, v, ok := strings.Cut(field, "=")
			if !ok {
				if field != "summary" {
					t.Errorf("field %q of %q has no value", field, l)
				}
				continue
			}
			dv, err := url.PathUnescape(v)
			if err != nil {
				t.Errorf("%q: %v", l, err)
			}
			kv[k] = dv
		}
		if f[1] == "summary" {
			o.summary = kv
			continue
		}
		r := line{status: kv["status"], check: kv["check"], detail: kv["detail"], remediation: kv["remediation"]}
		want := 4
		if r.status == "FAIL" {
			want = 5
			if r.remediation == "" || strings.Contains(r.remediation, "read the detail and fix") {
				t.Errorf("FAIL without a remediation of its own: %q", l)
			}
		}
		if len(f) != want {
			t.Errorf("%d fields, not %d: %q", len(f), want, l)
		}
		o.lines = append(o.lines, r)
	}
	if o.summary == nil && o.code != 2 {
		t.Errorf("no summary line (exit %d):\n%s%s", o.code, o.out, o.stderr)
	}
}

// get is the line of a check; it fails the test when there is not exactly one.
func (o *outcome) get(t *testing.T, check string) line {
	t.Helper()
	var found []line
	for _, l := range o.lines {
		if l.check == check {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d lines for %s:\n%s", len(found), check, o.out)
		return line{}
	}
	return found[0]
}

// expect checks a check's status and that its detail has every substring.
func (o *outcome) expect(t *testing.T, check, status string, details ...string) line {
	t.Helper()
	l := o.get(t, check)
	if l.status != status {
		t.Errorf("%s is %s (%s), not %s:\n%s", check, l.status, l.detail, status, o.out)
	}
	for _, d := range details {
		if !strings.Contains(l.detail, d) {
			t.Errorf("%s detail %q lacks %q", check, l.detail, d)
		}
	}
	return l
}

// with are the lines whose check starts with prefix.
func (o *outcome) with(prefix string) []line {
	var out []line
	for _, l := range o.lines {
		if strings.HasPrefix(l.check, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// failed are the checks that failed.
func (o *outcome) failed() []string {
	var out []string
	for _, l := range o.lines {
		if l.status == "FAIL" {
			out = append(out, l.check)
		}
	}
	return out
}

var (
	shellchecked   sync.Map
	shellcheckPath = sync.OnceValue(func() string { p, _ := exec.LookPath("shellcheck"); return p })
)

// quoted are the script's single-quoted strings.
var quoted = regexp.MustCompile(`'[^']*'`)

// shellcheck checks each generated script of a distinct shape once: scripts
// that differ only in quoted values (a GPU count, a model, a unit) are of
// one shape.
func shellcheck(t *testing.T, p string, script []byte) {
	t.Helper()
	sc := shellcheckPath()
	if sc == "" {
		// Outside CI the script's own tests still run, unlinted.
		if testenv.CI() {
			t.Error("shellcheck is not installed (make deps installs it; CI must lint the generated script)")
		}
		return
	}
	key := sha256.Sum256(quoted.ReplaceAll(script, []byte("''")))
	if _, done := shellchecked.LoadOrStore(key, true); done {
		return
	}
	if out, err := exec.Command(sc, "-s", "sh", p).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %s", out)
	}
}
