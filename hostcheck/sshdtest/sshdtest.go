// Package sshdtest runs a real OpenSSH server on loopback for the tests of
// what checks hosts over ssh: its own host and user keys in a temporary
// directory, listening on 127.0.0.1 and 127.0.0.2 (two "hosts"), and the
// ssh -o options a client needs to log in to it with the real OpenSSH
// client, the host key checked; and the scripts the hosts run (one that
// prints a result, one held running until the test interrupts it, and
// the interruption). Only tests import it.
package sshdtest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// Hosts are the addresses the server listens on; Unreachable is a
// loopback address nothing listens on (connections are refused).
var (
	Hosts       = []string{"127.0.0.1", "127.0.0.2"}
	Unreachable = "127.0.0.3"
)

// Server is a running sshd.
type Server struct {
	Port int
	// User is the login the server accepts: root (the tests run as root,
	// so that the script runs without sudo).
	User string
	// Options are the ssh -o options (KEY=VALUE) that reach it: the port,
	// the user key, a known_hosts file with its host key for every
	// address of Hosts and Unreachable, strict host key checking.
	Options []string
	Dir     string
}

// Start runs sshd until the test ends. It accepts IMAGECTL_VALIDATE_ROOT
// from the client (ssh -o SetEnv=...), so that the real validation script
// runs live with its build marker and state directory under a test's
// directory. It stops the test through
// testenv.Missing where sshd cannot run the tests: no sshd or ssh-keygen
// (apt-get install openssh-server openssh-client), or not root (sshd logs
// in only as the user it runs as, and the tests log in as root: a
// non-root user runs the script under sudo -n, which strips the
// connection's environment the tests' script tells the hosts apart by).
func Start(t testing.TB) *Server {
	t.Helper()
	const install = "apt-get install openssh-server openssh-client"
	sshd := lookSbin(t, "sshd", install)
	keygen := testenv.Tool(t, "ssh-keygen", install)
	testenv.Tool(t, "ssh", install)
	testenv.Root(t, "run sshd for the tests, which log in as root")
	// sshd wants its privilege separation directory, as the package's
	// service makes it.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, k := range []string{"host", "user"} {
		out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "imagectl-test-"+k, "-f", filepath.Join(dir, k)).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub := func(k string) string {
		b, err := os.ReadFile(filepath.Join(dir, k+".pub"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("authorized_keys", pub("user")+"\n")
	port := testenv.FreePort(t)
	var listen, known []string
	for _, h := range Hosts {
		listen = append(listen, "ListenAddress "+h)
	}
	for _, h := range append(append([]string{}, Hosts...), Unreachable) {
		known = append(known, fmt.Sprintf("[%s]:%d", h, port))
	}
	hostPub := strings.Fields(pub("host"))
	knownHosts := write("known_hosts", strings.Join(known, ",")+" "+hostPub[0]+" "+hostPub[1]+"\n")
	config := write("sshd_config", fmt.Sprintf(`Port %d
%s
HostKey %s
AuthorizedKeysFile %s
StrictModes no
PidFile none
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AcceptEnv IMAGECTL_VALIDATE_ROOT
LogLevel ERROR
`, port, strings.Join(listen, "\n"), filepath.Join(dir, "host"), filepath.Join(dir, "authorized_keys")))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, sshd, "-D", "-e", "-f", config)
	log, err := os.Create(filepath.Join(dir, "sshd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sshd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
		log.Close()
	})
	waitListening(t, port, exited, log.Name())
	return &Server{Port: port, User: "root", Dir: dir, Options: []string{
		"Port=" + strconv.Itoa(port), "IdentityFile=" + filepath.Join(dir, "user"), "IdentitiesOnly=yes",
		"UserKnownHostsFile=" + knownHosts, "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=yes",
	}}
}

// lookSbin finds a daemon on PATH or in the sbin directories a non-login
// PATH may lack.
func lookSbin(t testing.TB, name, install string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return testenv.Tool(t, name, install)
}

// waitListening waits until sshd accepts connections on every address of
// Hosts, or fails the test with its log when it exits first.
func waitListening(t testing.TB, port int, exited chan error, logPath string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, h := range Hosts {
		for {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(h, strconv.Itoa(port)), time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-exited:
				t.Fatalf("sshd exited: %v: %s", err, readLog(logPath))
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("sshd does not listen on %s:%d: %v: %s", h, port, err, readLog(logPath))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func readLog(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() && len(lines) < 50 {
		lines = append(lines, s.Text())
	}
	return strings.Join(lines, "\n")
}

// ResultScript is a stand-in validation script: it takes the real
// script's arguments (--json, --profile, --stage), and prints a
// validation result for image and version with its own sha256 as
// script_sha256, the host named after the address the connection reached
// (SSH_CONNECTION), one check that passes, and one more that fails on the
// address failOn; it exits 1 when a check failed, as the real one does.
func ResultScript(image, version, failOn string) string {
	return `#!/bin/sh
# imagectl test stand-in for the validation script (sshdtest.ResultScript).
set -eu
profile=bare-metal stage=image json=0
while [ $# -gt 0 ]; do
	case $1 in
	--json) json=1; shift ;;
	--profile) profile=$2; shift 2 ;;
	--stage) stage=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
[ "$json" = 1 ] || { echo "IMAGECTL_VALIDATE summary"; exit 0; }
sha=$(sha256sum "$0" | cut -d' ' -f1)
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
server=$(echo "${SSH_CONNECTION:-}" | cut -d' ' -f3)
machine_id=$(printf '%s' "$server" | sha256sum | cut -c1-32)
checks='{"status":"PASS","check":"build-marker","detail":"present"}'
failures=0
if [ "$server" = ` + failOn + ` ]; then
	checks="$checks"',{"status":"FAIL","check":"service:netdata","detail":"inactive","remediation":"systemctl enable --now netdata"}'
	failures=1
fi
n=$((failures + 1))
printf '{"schema":"imagectl.validate.result/v1","image":"%s","version":"%s","profile":"%s","stage":"%s","host":"host-%s","machine_id":"%s","live":true,"started":"%s","finished":"%s","script_sha256":"%s","checks":[%s],"counts":{"checks":%d,"failures":%d,"warnings":0}}\n' \
	` + image + ` ` + version + ` "$profile" "$stage" "$server" "$machine_id" "$now" "$now" "$sha" "$checks" "$n" "$failures"
[ "$failures" = 0 ]
`
}

// Hold is what keeps a script running until a test interrupts it: the
// script creates the file Started when it starts, and waits while the
// file Hold exists.
type Hold struct{ Started, Hold string }

// NewHold makes a Hold in a temporary directory: Hold exists until the
// test ends, so that no script outlives it; Started does not yet.
func NewHold(t testing.TB) Hold {
	t.Helper()
	dir := t.TempDir()
	h := Hold{Started: filepath.Join(dir, "started"), Hold: filepath.Join(dir, "hold")}
	if err := os.WriteFile(h.Hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(h.Hold) })
	return h
}

// WaitStarted returns once a script has created Started. When returned
// (which may be nil) yields first, the call that runs the script ended
// before the script started, and the test fails.
func (h Hold) WaitStarted(t testing.TB, returned <-chan error) {
	t.Helper()
	for {
		if _, err := os.Stat(h.Started); err == nil {
			return
		}
		select {
		case err := <-returned:
			t.Fatalf("returned before the script started: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Interrupt runs check on Hosts, where Hosts[1] runs a HoldingScript of h:
// once Hosts[0] has finished (check calls done with each host that
// finishes) and Hosts[1]'s script has started, it cancels check's context,
// and returns what check returned.
func Interrupt[T any](t testing.TB, h Hold, check func(ctx context.Context, done func(host string)) (T, error)) (T, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finished := make(chan string, len(Hosts))
	type ret struct {
		res T
		err error
	}
	retc := make(chan ret, 1)
	go func() {
		res, err := check(ctx, func(host string) { finished <- host })
		retc <- ret{res, err}
	}()
	select {
	case host := <-finished:
		if host != Hosts[0] {
			t.Fatalf("%s finished first", host)
		}
	case r := <-retc:
		t.Fatalf("returned before any host finished: %v", r.err)
	}
	for {
		if _, err := os.Stat(h.Started); err == nil {
			break
		}
		select {
		case r := <-retc:
			t.Fatalf("returned before the held script started: %v", r.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	r := <-retc
	return r.res, r.err
}

// HoldingScript is ResultScript (nothing fails) that, on the address
// holdOn, creates h.Started and waits while h.Hold exists, then exits 1
// without a result: a host still running when a check is interrupted.
func HoldingScript(image, version, holdOn string, h Hold) string {
	s := ResultScript(image, version, "none")
	block := `if [ "$(echo "${SSH_CONNECTION:-}" | cut -d' ' -f3)" = '` + holdOn + `' ]; then
	touch '` + h.Started + `'
	while [ -e '` + h.Hold + `' ]; do sleep 0.05; done
	exit 1
fi
`
	i := strings.Index(s, "\n") + 1
	return s[:i] + block + s[i:]
}
