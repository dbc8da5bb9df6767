//go:build guestfs

package smoke

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/shell"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/validate"
)

// sshClient reaches the stand-in's VMs as a release engineer does: the
// real OpenSSH client, a key the NoCloud seed authorizes for ubuntu, no
// ssh config or known hosts of the machine's own (each VM has new host
// keys).
type sshClient struct {
	ssh, key, pub, home, knownHosts string
}

func newSSHClient(t *testing.T) *sshClient {
	t.Helper()
	c := &sshClient{ssh: testenv.Tool(t, "ssh", "install openssh-client"), home: t.TempDir()}
	keygen := testenv.Tool(t, "ssh-keygen", "install openssh-client")
	c.key, c.knownHosts = filepath.Join(c.home, "id_ed25519"), filepath.Join(c.home, "known_hosts")
	if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "imagectl-e2e", "-f", c.key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	b, err := os.ReadFile(c.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	c.pub = strings.TrimSpace(string(b))
	return c
}

// options are the -o options that reach a VM at ep (also what
// `imagectl hostcheck --ssh-option` takes).
func (c *sshClient) options(ep SSH) []string {
	return []string{"Port=" + strconv.Itoa(ep.Port), "StrictHostKeyChecking=no", "UserKnownHostsFile=" + c.knownHosts,
		"IdentityFile=" + c.key, "IdentitiesOnly=yes", "BatchMode=yes", "ConnectTimeout=60"}
}

// run runs a command line on the VM at ep over ssh and returns its stdout,
// stderr and exit status (255: ssh itself failed).
func (c *sshClient) run(ctx context.Context, ep SSH, command string) (string, string, int) {
	args := []string{"-T", "-F", "/dev/null"}
	for _, o := range c.options(ep) {
		args = append(args, "-o", o)
	}
	args = append(args, "-l", ep.User, "--", ep.Host, command)
	cmd := exec.CommandContext(ctx, c.ssh, args...)
	cmd.Env = append(os.Environ(), "HOME="+c.home)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
		errs.WriteString(err.Error())
	}
	return out.String(), errs.String(), code
}

// checkSSH logs in as the seed's user, who may sudo without a password
// (as MAAS's deploy gives), and finds the host the smoke run booted.
func checkSSH(ctx context.Context, c *sshClient, ep SSH) error {
	if ep.Host != "127.0.0.1" || ep.Port == 0 || ep.User != DefaultSSHUser {
		return fmt.Errorf("ssh endpoint %+v", ep)
	}
	out, errs, code := c.run(ctx, ep, "id -un && sudo -n id -u && uname -n")
	if code != 0 || out != "ubuntu\n0\nimagectl-smoke\n" {
		return fmt.Errorf("ssh to %s as ubuntu, then sudo: exit %d\n%s%s", ep.Address(), code, out, errs)
	}
	return nil
}

// validateOverSSH runs the image's validation script on the VM at ep as
// a release engineer would by hand (sudo, the profile and stage), and
// returns its checks' statuses by name and its exit status.
func validateOverSSH(ctx context.Context, c *sshClient, ep SSH, script string) (map[string]string, int, error) {
	out, errs, code := c.run(ctx, ep, "sudo -n sh "+shell.Quote(script)+" --profile slice --stage converged")
	if code == 255 || code < 0 {
		return nil, code, fmt.Errorf("ssh to %s: exit %d: %s", ep.Address(), code, errs)
	}
	status := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, validate.Prefix+" "); ok {
			kv := keyValues(rest)
			if kv["check"] != "" {
				status[kv["check"]] = kv["status"]
			}
		}
	}
	if len(status) == 0 {
		return nil, code, fmt.Errorf("the validation script over ssh reported no checks: exit %d\n%s%s", code, out, errs)
	}
	return status, code, nil
}
