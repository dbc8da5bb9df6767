//go:build guestfs

package smoke

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/profile/profilesim"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/gitcatalog/gittest"
	"github.com/gpuaas/imagectl/upload/maassim"
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
	return runCmd(cmd)
}

// runCmd runs cmd and returns its stdout, its stderr and its exit status
// (-1, with why in stderr, when it could not run).
func runCmd(cmd *exec.Cmd) (string, string, int) {
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

// releaseLoop is the release around the stand-in's boots, each part real:
// imagectl itself (built once, run as a user runs it), the stand-in's
// versions in a directory store, the promotion catalog in a git repository
// the real git daemon serves over loopback, simulated MAAS sites (canary
// and east) and the admin API's deploy profile at east, and a sites file
// whose group fleet (east) may be promoted to only once one host at the
// canary passed the converged slice checks.
type releaseLoop struct {
	bin, store, sites string
	env               []string
	ssh               *sshClient
	profiles          *profilesim.Server
}

func newReleaseLoop(t *testing.T, c *sshClient) *releaseLoop {
	t.Helper()
	goTool := testenv.Tool(t, "go", "install Go")
	l := &releaseLoop{bin: filepath.Join(t.TempDir(), "imagectl"), store: filepath.Join(t.TempDir(), "store"), ssh: c}
	// The CGO-free build: hostcheck, evidence and promote need no
	// libguestfs, and it links in seconds.
	build := exec.Command(goTool, "build", "-o", l.bin, "../cmd/imagectl")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building imagectl: %v\n%s", err, out)
	}
	root := t.TempDir()
	gittest.BareIn(t, root, "catalog.git")
	catalog := gittest.Daemon(t, root) + "catalog.git"

	sims := map[string]*maassim.Server{}
	for _, s := range []string{"canary", "east"} {
		sims[s] = maassim.New(maassim.Options{CompleteAfterGets: -1})
		t.Cleanup(sims[s].Close)
	}
	ps := profilesim.New(profilesim.Options{})
	t.Cleanup(ps.Close)
	l.profiles = ps
	ps.SetProfile("2", "h200-slice", "ubuntu/noble")
	l.sites = filepath.Join(t.TempDir(), "sites.hcl")
	src := fmt.Sprintf(`site "canary" {
  maas_url    = %q
  api_key_env = "CANARY_MAAS_KEY"
}

site "east" {
  maas_url    = %q
  api_key_env = "EAST_MAAS_KEY"

  deploy_profile {
    api_url    = %q
    site_id    = "2"
    profile_id = "h200-slice"
    token_env  = "ADMIN_TOKEN"
    image      = %q
  }
}

group "fleet" {
  sites = ["east"]

  policy {
    evidence {
      sites     = ["canary"]
      profiles  = ["slice"]
      stage     = "converged"
      min_hosts = 1
    }
  }
}
`, sims["canary"].URL, sims["east"].URL, ps.URL, standInImage)
	if err := os.WriteFile(l.sites, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	l.env = append(gittest.Env(t), "IMAGECTL_STORE="+l.store, "IMAGECTL_CATALOG="+catalog, "IMAGECTL_SITES="+l.sites,
		"IMAGECTL_CACHE_DIR="+t.TempDir(), "USER=e2e", "CANARY_MAAS_KEY="+sims["canary"].AdminKey,
		"EAST_MAAS_KEY="+sims["east"].AdminKey, "ADMIN_TOKEN="+ps.Token)
	return l
}

// standInImage is the stand-in recipe's image name.
const standInImage = "gpuaas-h200-host-debian12"

// publish puts a built stand-in (its tgz and the files beside it) into the
// store. The stand-in is Debian: its deployability check's errors (not
// Ubuntu, the cloud image's grub drop-in) would stop a promote to a real
// MAAS, which deploys custom tgz images through its Ubuntu path; the
// simulated sites take it, so the manifest published waives them, as a
// recipe's waive block would, saying why.
func (l *releaseLoop) publish(t *testing.T, tgz string) {
	t.Helper()
	files := manifest.FilesBeside(tgz)
	m, err := manifest.Read(files.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range m.Deploy {
		if f.Severity == "error" {
			m.Deploy[i].Waived, m.Deploy[i].WaiverReason = true, "the Debian stand-in, promoted to simulated MAAS sites by the end-to-end test"
		}
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	files.Manifest = filepath.Join(t.TempDir(), filepath.Base(files.Manifest))
	if err := os.WriteFile(files.Manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := store.NewDir(l.store).Publish(context.Background(), files, store.PublishOptions{}); err != nil {
		t.Fatalf("publishing %s: %v", tgz, err)
	}
}

// imagectl runs imagectl with args and returns its stdout, stderr and exit
// status (-1 when it could not run). It may run on another goroutine than
// the test's (Options.WhileUp's), so it never stops the test.
func (l *releaseLoop) imagectl(t *testing.T, ctx context.Context, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, l.bin, args...)
	cmd.Env = append(os.Environ(), l.env...)
	out, errs, code := runCmd(cmd)
	t.Logf("imagectl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	return out, errs, code
}

// hostcheck runs `imagectl hostcheck` against the VM at ep over the real
// OpenSSH client, recording its result at the canary.
func (l *releaseLoop) hostcheck(t *testing.T, ctx context.Context, ep SSH) (string, string, int) {
	t.Helper()
	args := []string{"hostcheck", ep.Host, "--site", "canary", "--profile", "slice", "--stage", "converged", "--user", ep.User}
	for _, o := range l.ssh.options(ep) {
		args = append(args, "--ssh-option", o)
	}
	return l.imagectl(t, ctx, args...)
}

// evidence lists what the catalog holds for version at the canary.
func (l *releaseLoop) evidence(t *testing.T, ctx context.Context, version string) ([]store.Evidence, error) {
	out, errs, code := l.imagectl(t, ctx, "evidence", standInImage, version, "--site", "canary", "-o", "json")
	// imagectl evidence's JSON: per site, its evidence.
	var sites []struct {
		Site     string           `json:"site"`
		Evidence []store.Evidence `json:"evidence"`
	}
	if code != 0 {
		return nil, fmt.Errorf("imagectl evidence: exit %d: %s", code, errs)
	}
	if err := json.Unmarshal([]byte(out), &sites); err != nil || len(sites) != 1 || sites[0].Site != "canary" {
		return nil, fmt.Errorf("imagectl evidence -o json: %v\n%s", err, out)
	}
	return sites[0].Evidence, nil
}

// converged is the release loop at the good version's VM, kept up after
// its validation: promoted to the canary, the fleet refused for want of
// evidence, the host checked over ssh, its passing result recorded with
// its first-boot timeline, and the fleet promoted. Problems are reported
// with t.Errorf (this runs on Options.WhileUp's goroutine); one that makes
// the rest pointless is returned.
func (l *releaseLoop) converged(t *testing.T, ctx context.Context, ep SSH, version string) error {
	if err := checkSSH(ctx, l.ssh, ep); err != nil {
		return err
	}
	if _, errs, code := l.imagectl(t, ctx, "promote", standInImage, version, "--site", "canary", "--insecure-skip-verify"); code != 0 {
		return fmt.Errorf("promote to the canary: exit %d: %s", code, errs)
	}
	// Before any evidence: refused, exit 3, naming what is missing.
	out, errs, code := l.imagectl(t, ctx, "promote", standInImage, version, "--site", "fleet", "--insecure-skip-verify")
	if code != 3 || !strings.Contains(out+errs, "0 of 1 distinct hosts passed stage converged for profile slice at canary") {
		t.Errorf("promote to the fleet before the evidence: exit %d, want 3 naming the canary's missing slice evidence\n%s%s", code, out, errs)
	}

	out, errs, code = l.hostcheck(t, ctx, ep)
	if code != 0 {
		return fmt.Errorf("imagectl hostcheck: exit %d\n%s%s", code, out, errs)
	}
	evs, err := l.evidence(t, ctx, version)
	if err != nil {
		return err
	}
	if len(evs) != 1 {
		return fmt.Errorf("evidence %+v, want the one host's", evs)
	}
	ev := evs[0]
	r := ev.Result
	if !r.Passed() || ev.Site != "canary" || ev.Via != "hostcheck" || r.Image != standInImage || r.Version != version ||
		r.Profile != "slice" || r.Stage != "converged" || !r.Live || r.Host != "imagectl-smoke" || r.MachineID == "" {
		t.Errorf("evidence: site %s via %s: %s %s %s/%s on %s (%s), live %v, passed %v, failing %v",
			ev.Site, ev.Via, r.Image, r.Version, r.Profile, r.Stage, r.Host, r.MachineID, r.Live, r.Passed(), r.Failing())
	}
	// The host's own account of its first boot, in smoke's milestone
	// names.
	have := map[string]bool{}
	for _, m := range r.Timeline {
		have[m.Name] = true
	}
	for _, m := range []string{MilestoneUserspace, MilestoneMultiUser, MilestoneBootstrapDone, MilestoneBootFinished} {
		if !have[m] {
			t.Errorf("the recorded result's timeline lacks %s: %+v", m, r.Timeline)
		}
	}

	// With the canary's passing host: the fleet is promoted.
	if out, errs, code := l.imagectl(t, ctx, "promote", standInImage, version, "--site", "fleet", "--insecure-skip-verify"); code != 0 {
		t.Errorf("promote to the fleet after the evidence: exit %d\n%s%s", code, out, errs)
	}
	want := manifest.VersionedName("custom/"+standInImage, version)
	if got, _ := l.profiles.DistroSeries("2", "h200-slice"); got != want {
		t.Errorf("east's deploy profile selects %q, want %q", got, want)
	}
	return nil
}

// broken is the release loop at the broken version's VM: promoted to the
// canary, hostcheck finds the bridge without its address (and GRUB
// without iommu=pt), the failing result is recorded, and it blocks the
// fleet, the host and the check named.
func (l *releaseLoop) broken(t *testing.T, ctx context.Context, ep SSH, version string) error {
	if err := checkSSH(ctx, l.ssh, ep); err != nil {
		return err
	}
	// The canary gets the new version; its host is checked.
	if _, errs, code := l.imagectl(t, ctx, "promote", standInImage, version, "--site", "canary", "--insecure-skip-verify"); code != 0 {
		return fmt.Errorf("promote to the canary: exit %d: %s", code, errs)
	}
	out, errs, code := l.hostcheck(t, ctx, ep)
	if code == 0 || !strings.Contains(out+errs, "bridge:ovsbr0") {
		t.Errorf("imagectl hostcheck of the broken host: exit %d, want a failure naming bridge:ovsbr0\n%s%s", code, out, errs)
	}
	evs, err := l.evidence(t, ctx, version)
	if err != nil {
		return err
	}
	failing := map[string]bool{}
	if len(evs) == 1 {
		for _, c := range evs[0].Result.Failing() {
			failing[c.Name] = true
		}
	}
	if len(evs) != 1 || evs[0].Result.Passed() || !failing["bridge:ovsbr0"] || !failing["kernel-arg:iommu=pt:cmdline"] {
		t.Errorf("evidence of the broken host %+v, want one failing result (bridge:ovsbr0, kernel-arg:iommu=pt:cmdline)", evs)
	}
	out, errs, code = l.imagectl(t, ctx, "promote", standInImage, version, "--site", "fleet", "--insecure-skip-verify")
	if code != 3 || !strings.Contains(out+errs, "host imagectl-smoke") || !strings.Contains(out+errs, "at canary failed") || !strings.Contains(out+errs, "bridge:ovsbr0") {
		t.Errorf("promote of the broken version to the fleet: exit %d, want 3 naming the failing host and check\n%s%s", code, out, errs)
	}
	return nil
}
