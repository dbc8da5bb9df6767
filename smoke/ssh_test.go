package smoke

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/validate"
	"gopkg.in/yaml.v3"
)

// publicKey makes a key pair with the real ssh-keygen and returns the
// public key's line, its comment set to comment.
func publicKey(t *testing.T, keyType, comment string) string {
	t.Helper()
	keygen := testenv.Tool(t, "ssh-keygen", "install openssh-client")
	key := filepath.Join(t.TempDir(), "id")
	if out, err := exec.Command(keygen, "-q", "-t", keyType, "-N", "", "-C", comment, "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	b, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The seed's user-data creates the login with the keys authorized and
// sudo without a password, every value read back by a YAML parser as it
// was given (a comment that looks like YAML stays data), beside the
// bootstrap's runcmd.
func TestUserDataLogin(t *testing.T) {
	keys := []string{publicKey(t, "ed25519", `ops: "x" #y - [z]`), publicKey(t, "ecdsa", "it's {a: b}")}
	b := testBootstrap("/opt/b")
	ud := seedUserData(b, &guestLogin{user: "ubuntu", keys: keys})
	if rc := runcmdOf(t, ud); len(rc) != 1 {
		t.Fatalf("runcmd %v", rc)
	}
	var doc struct {
		Users []struct {
			Name       string   `yaml:"name"`
			Shell      string   `yaml:"shell"`
			LockPasswd bool     `yaml:"lock_passwd"`
			Sudo       string   `yaml:"sudo"`
			Keys       []string `yaml:"ssh_authorized_keys"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal([]byte(ud), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Users) != 1 {
		t.Fatalf("users %+v\n%s", doc.Users, ud)
	}
	u := doc.Users[0]
	if u.Name != "ubuntu" || u.Sudo != "ALL=(ALL) NOPASSWD:ALL" || !u.LockPasswd || u.Shell != "/bin/bash" || !slices.Equal(u.Keys, keys) {
		t.Errorf("user %+v\n%s", u, ud)
	}
	// Without a bootstrap: the login alone.
	if rc := runcmdOf(t, seedUserData(nil, &guestLogin{user: "ops", keys: keys[:1]})); rc != nil {
		t.Errorf("runcmd %v", rc)
	}
}

func TestCheckLogin(t *testing.T) {
	good := publicKey(t, "ed25519", "ops@example")
	rsa := publicKey(t, "rsa", "")
	if err := checkLogin("ubuntu", []string{good, rsa}); err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(good)
	for _, tc := range []struct {
		user string
		key  string
		want string
	}{
		{"root;rm", good, "not a user name"},
		{"Ubuntu", good, "not a user name"},
		{"-x", good, "not a user name"},
		{"ubuntu", good + "\nssh-ed25519 " + f[1] + " second", "not one line"},
		{"ubuntu", good + "\r", "not one line"},
		{"ubuntu", f[0], "want TYPE BASE64"},
		{"ubuntu", f[0] + " !!!!", "not base64"},
		{"ubuntu", "ssh-rsa " + f[1], "not a ssh-rsa key"},
		{"ubuntu", "", "want TYPE BASE64"},
	} {
		err := checkLogin(tc.user, []string{tc.key})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: %v, want %q", tc.user, tc.key, err, tc.want)
		}
	}
}

// The ssh port is forwarded on the loopback only, to the guest's 22; the
// monitor listens only when asked.
func TestQEMUArgsSSHAndMonitor(t *testing.T) {
	c := bootConfig{disk: "/w/disk.raw", firmware: firmware{code: "/c.fd"}, accel: "tcg", memoryMB: 2048}
	plain := strings.Join(qemuArgs(c, "/w/vars.fd"), " ")
	if !strings.Contains(plain, "-nic user,model=virtio-net-pci ") || strings.Contains(plain, "hostfwd") || strings.Contains(plain, "-qmp") {
		t.Errorf("without ssh: %s", plain)
	}
	c.sshPort, c.monitor = 40022, "/w/qmp.sock"
	args := qemuArgs(c, "/w/vars.fd")
	if i := slices.Index(args, "-nic"); i < 0 || args[i+1] != "user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:40022-:22" {
		t.Errorf("nic: %q", args)
	}
	if i := slices.Index(args, "-qmp"); i < 0 || args[i+1] != "unix:/w/qmp.sock,server=on,wait=off" {
		t.Errorf("qmp: %q", args)
	}
}

// A VM kept up is not powered off by the smoke script.
func TestSmokeScriptKeepsTheVMUp(t *testing.T) {
	p := guestPlan{validation: "/usr/local/sbin/v.sh", profile: "slice", stage: "converged"}
	if s := smokeScriptFor(p, defaultGuestPaths); !strings.HasSuffix(s, "done\"\nsystemctl poweroff\n") {
		t.Errorf("the smoke script does not power off at its end:\n%s", s)
	}
	p.keepUp = true
	if s := smokeScriptFor(p, defaultGuestPaths); strings.Contains(s, "systemctl poweroff") || !strings.HasSuffix(s, "done\"\n# The VM stays up: imagectl smoke presses its power button once the caller is done.\n") {
		t.Errorf("a VM kept up is powered off:\n%s", s)
	}
}

// Once the smoke script is done, the console of a VM kept up is no part
// of the run: validation lines there are not counted.
func TestWatcherAfterDone(t *testing.T) {
	res := &Result{}
	w := newWatcher(res, nil)
	feedAll(t, w, markerPrefix+"done\r\n")
	feedAll(t, w, validate.Prefix+" status=FAIL check=x detail=y\r\n")
	if len(res.Lines) != 0 || res.Failures != 0 {
		t.Errorf("lines after done counted: %+v", res.Lines)
	}
	if _, err := w.feed("Kernel panic - not syncing: Attempted to kill init!", time.Second); err == nil {
		t.Error("a panic after done is not an error")
	}
}

// powerDown presses the power button of a real QEMU through its monitor;
// a socket nobody listens on is an error naming the monitor.
func TestPowerDownThroughQMP(t *testing.T) {
	qemu := testenv.Tool(t, "qemu-system-x86_64", "install qemu-system-x86")
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	ctx := context.Background()
	if err := powerDown(ctx, sock); err == nil || !strings.Contains(err.Error(), "QEMU's monitor") {
		t.Errorf("no monitor: %v", err)
	}
	// A machine with nothing to boot: the firmware waits, QEMU stays up.
	cmd := exec.Command(qemu, "-machine", "q35,accel=tcg", "-nodefaults", "-display", "none", "-m", "64",
		"-qmp", "unix:"+sock+",server=on,wait=off")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	// Up when the monitor accepts a connection: the socket file exists
	// from its bind, a moment before QEMU listens on it.
	for range 200 {
		if c, derr := net.Dial("unix", sock); derr == nil {
			c.Close()
			break
		}
		select {
		case e := <-exited:
			t.Fatalf("QEMU exited: %v", e)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := powerDown(ctx, sock); err != nil {
		t.Fatal(err)
	}
}
