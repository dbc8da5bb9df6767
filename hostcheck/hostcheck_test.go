package hostcheck_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpuaas/imagectl/hostcheck"
	"github.com/gpuaas/imagectl/hostcheck/sshdtest"
)

func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A passing host, a failing one and an unreachable one, through the real
// OpenSSH client and server; the script's path holds a space and a quote,
// which must reach the host's shell as one word.
func TestCheckHosts(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := filepath.Join(t.TempDir(), "it's here")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := writeScript(t, dir, "validate.sh", sshdtest.ResultScript("img", "20261126.1", sshdtest.Hosts[1]))
	hosts := []string{sshdtest.Hosts[0], sshdtest.Hosts[1], sshdtest.Unreachable}
	var mu sync.Mutex
	var done []string
	res, err := hostcheck.Check(context.Background(), hosts, hostcheck.Options{
		Script: script, Profile: "slice", Stage: "converged", User: srv.User, SSHOptions: srv.Options, Parallel: 2,
		Done: func(r hostcheck.HostResult) { mu.Lock(); done = append(done, r.Host); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || len(done) != 3 {
		t.Fatalf("got %d results, %d reported done, want 3: %+v", len(res), len(done), res)
	}
	for i, h := range hosts {
		if res[i].Host != h {
			t.Errorf("result %d is of %s, want %s", i, res[i].Host, h)
		}
	}
	ok, bad, down := res[0], res[1], res[2]
	if ok.Result == nil || !ok.Result.Passed() || ok.Result.Profile != "slice" || ok.Result.Stage != "converged" || ok.Result.Host != "host-"+hosts[0] {
		t.Errorf("the passing host: %+v %+v", ok, ok.Result)
	}
	if bad.Result == nil || bad.Result.Passed() || len(bad.Result.Failing()) != 1 || bad.Result.Failing()[0].Remediation == "" {
		t.Errorf("the failing host: %+v %+v", bad, bad.Result)
	}
	if down.Result != nil || !strings.Contains(down.Error, "ssh could not run the script") || !strings.Contains(down.Error, "refused") {
		t.Errorf("the unreachable host: %+v", down)
	}
}

// Output that is not a result, or larger than a result may be, is an
// error of the host, with its exit status; a host key that does not match
// is ssh's error, not a result.
func TestCheckBadOutput(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"garbage", "#!/bin/sh\necho 'IMAGECTL_VALIDATE PASS x'\nexit 1\n", "exit status 1, 25 bytes) is not a validation result"},
		{"huge", "#!/bin/sh\nhead -c 5000000 /dev/zero\n", "larger than a validation result may be"},
		{"half", "#!/bin/sh\necho '{\"schema\":\"imagectl.validate.result/v1\"}'\n", "not a whole validation result"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := writeScript(t, dir, tc.name+".sh", tc.body)
			res, err := hostcheck.Check(context.Background(), []string{sshdtest.Hosts[0]}, hostcheck.Options{Script: script, User: srv.User, SSHOptions: srv.Options})
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Result != nil || !strings.Contains(res[0].Error, tc.want) {
				t.Errorf("got %+v, want an error saying %q", res[0], tc.want)
			}
		})
	}
	t.Run("host key", func(t *testing.T) {
		script := writeScript(t, dir, "ok.sh", sshdtest.ResultScript("img", "1", "none"))
		empty := writeScript(t, dir, "known_hosts", "")
		opts := append([]string{"UserKnownHostsFile=" + empty}, srv.Options...)
		res, err := hostcheck.Check(context.Background(), []string{sshdtest.Hosts[0]}, hostcheck.Options{Script: script, User: srv.User, SSHOptions: opts})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Result != nil || !strings.Contains(res[0].Error, "Host key verification failed") {
			t.Errorf("got %+v, want ssh's host key error", res[0])
		}
	})
}

// Cancelling the context stops the running ssh and checks no more hosts.
func TestCheckCancel(t *testing.T) {
	srv := sshdtest.Start(t)
	// The script runs until the test ends (hold removed), so that only
	// cancelling ends Check, and no process outlives the test.
	hold := sshdtest.NewHold(t)
	script := writeScript(t, t.TempDir(), "slow.sh", "#!/bin/sh\ntouch '"+hold.Started+"'\nwhile [ -e '"+hold.Hold+"' ]; do sleep 0.05; done\n")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := hostcheck.Check(ctx, []string{sshdtest.Hosts[0], sshdtest.Hosts[1]}, hostcheck.Options{Script: script, User: srv.User, SSHOptions: srv.Options, Parallel: 1})
		errc <- err
	}()
	hold.WaitStarted(t, errc)
	cancel()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("got %v, want the cancellation", err)
	}
}

// An interrupted check still returns what it has: the result of a host
// that finished, and for the one stopped, why it has none.
func TestCheckCancelKeepsFinished(t *testing.T) {
	srv := sshdtest.Start(t)
	hold := sshdtest.NewHold(t)
	script := writeScript(t, t.TempDir(), "validate.sh", sshdtest.HoldingScript("img", "1", sshdtest.Hosts[1], hold))
	res, err := sshdtest.Interrupt(t, hold, func(ctx context.Context, done func(string)) ([]hostcheck.HostResult, error) {
		return hostcheck.Check(ctx, []string{sshdtest.Hosts[0], sshdtest.Hosts[1]}, hostcheck.Options{
			Script: script, User: srv.User, SSHOptions: srv.Options, Parallel: 2,
			Done: func(r hostcheck.HostResult) { done(r.Host) },
		})
	})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("got %v, want the cancellation", err)
	}
	if len(res) != 2 || res[0].Result == nil || !res[0].Result.Passed() || res[1].Result != nil || res[1].Error == "" {
		t.Fatalf("results: %+v", res)
	}
}

func TestCheckOptionsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []string
		o     hostcheck.Options
		want  string
	}{
		{"option as host", []string{"-oProxyCommand=touch /tmp/x"}, hostcheck.Options{Script: "/s"}, "starts with '-'"},
		{"no hosts", nil, hostcheck.Options{Script: "/s"}, "no host"},
		{"empty host", []string{""}, hostcheck.Options{Script: "/s"}, "empty host"},
		{"space", []string{"a b"}, hostcheck.Options{Script: "/s"}, "spaces"},
		{"relative script", []string{"h"}, hostcheck.Options{Script: "s.sh"}, "not an absolute path"},
		{"bad option", []string{"h"}, hostcheck.Options{Script: "/s", SSHOptions: []string{"-F/tmp/x"}}, "want KEY=VALUE"},
		{"user", []string{"h"}, hostcheck.Options{Script: "/s", User: "-oX"}, "user"},
		{"profile", []string{"h"}, hostcheck.Options{Script: "/s", Profile: "a;b c"}, "--profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hostcheck.Check(context.Background(), tc.hosts, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	argv := hostcheck.Command("h1", hostcheck.Options{Script: "/usr/local/sbin/it's", Profile: "slice", SSHOptions: []string{"Port=2222"}})
	got := strings.Join(argv, "|")
	want := `ssh|-T|-o|BatchMode=yes|-o|Port=2222|-o|ConnectTimeout=10|-l|ubuntu|--|h1|sudo -n 'sh' '/usr/local/sbin/it'\''s' '--json' '--profile' 'slice'`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if c := hostcheck.RemoteCommand(hostcheck.Options{Script: "/s", User: "root", Stage: "image"}); c != `'sh' '/s' '--json' '--stage' 'image'` {
		t.Errorf("root's command: %s", c)
	}
}

// The ConnectTimeout as the documentation says, asked of the real ssh
// (ssh -G prints the configuration it would use): imagectl's wins over
// the user's ssh config, an --ssh-option wins over both.
func TestConnectTimeoutPrecedence(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	config := writeScript(t, t.TempDir(), "config", "Host *\n  ConnectTimeout 99\n")
	effective := func(o hostcheck.Options) string {
		t.Helper()
		argv := hostcheck.Command("h1", o)
		// ssh -G -F CONFIG, then imagectl's options and the host.
		argv = append([]string{argv[0], "-G", "-F", config}, argv[1:len(argv)-1]...)
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			t.Fatalf("%v: %v", argv, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "connecttimeout "); ok {
				return v
			}
		}
		t.Fatalf("ssh -G printed no connecttimeout:\n%s", out)
		return ""
	}
	if got := effective(hostcheck.Options{Script: "/s"}); got != "10" {
		t.Errorf("with ConnectTimeout 99 in the config: %s, want imagectl's 10", got)
	}
	if got := effective(hostcheck.Options{Script: "/s", SSHOptions: []string{"ConnectTimeout=3"}}); got != "3" {
		t.Errorf("with --ssh-option ConnectTimeout=3: %s, want 3", got)
	}
}
