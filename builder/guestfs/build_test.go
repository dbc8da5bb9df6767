//go:build guestfs

package guestfs

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder"
	basecache "github.com/gpuaas/imagectl/builder/base"
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/builder/pack"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/deploycheck"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/qemuproc"
	"github.com/gpuaas/imagectl/internal/testbase"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/recipes"
)

// These tests run real builds in a real libguestfs appliance on the
// project's Debian base image (make base-image; the Makefile exports
// IMAGECTL_TEST_BASE_VARS). They are slow under TCG: -short skips them.

var varRE = regexp.MustCompile(`(?m)^(\w+)\s*=\s*"([^"]*)"`)

func baseImage(t *testing.T) (path, checksum string) {
	return baseImageFrom(t, testbase.Vars(t))
}

// baseImageFrom reads the base image's path and checksum from the var file
// make base-image writes.
func baseImageFrom(t testing.TB, vars string) (path, checksum string) {
	b, err := os.ReadFile(vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range varRE.FindAllStringSubmatch(string(b), -1) {
		switch m[1] {
		case "base_image":
			path = m[2]
		case "base_checksum":
			checksum = m[2]
		}
	}
	return path, checksum
}

// hostMirror is the Debian mirror this machine's apt uses: the appliance
// reaches the same archive.
func hostMirror(t *testing.T) string {
	for _, f := range []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			switch {
			case len(fields) >= 2 && fields[0] == "URIs:":
				return fields[1]
			case len(fields) >= 3 && fields[0] == "deb" && strings.HasPrefix(fields[1], "http"):
				return fields[1]
			}
		}
	}
	t.Fatal("no Debian mirror in this machine's apt sources")
	return ""
}

// recipeTree copies testdata/recipes/build into a temporary directory with
// the Debian archive keyring beside it.
func recipeTree(t *testing.T) string {
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", "../../testdata/recipes/build/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	os.MkdirAll(filepath.Join(dir, "keys"), 0o755)
	if out, err := exec.Command("cp", "/usr/share/keyrings/debian-archive-keyring.gpg", filepath.Join(dir, "keys/archive.gpg")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return dir
}

func planFor(t *testing.T, recipe string, flags ...string) *plan.Plan {
	t.Helper()
	return loadPlan(t, recipe, recipes.Options{Inputs: recipes.Inputs{Files: []string{testbase.Vars(t)}, Flags: flags}})
}

// loadPlan loads the recipe file with opts and plans it, failing tb on
// any error.
func loadPlan(tb testing.TB, recipe string, opts recipes.Options) *plan.Plan {
	tb.Helper()
	r, diags := recipes.NewParser().LoadFile(recipe, opts)
	if diags.HasErrors() {
		tb.Fatalf("%s: %s", recipe, diags.Error())
	}
	plan, err := plan.New(r, plan.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return plan
}

func buildOptions(t *testing.T, out string, events *[]event.Event) builder.BuildOptions {
	return builder.BuildOptions{
		Executor:     Executor{},
		CacheDir:     t.TempDir(),
		WorkDir:      t.TempDir(),
		OutputDir:    out,
		PackageCache: testenv.PackageCache(t),
		Env:          os.Environ(),
		Events: func(e event.Event) {
			if events != nil {
				*events = append(*events, e)
			}
			if e.Type == "log" || (e.Status != "" && e.Status != "start") {
				t.Logf("%s %s %s %s %.1fs %s", e.Type, e.Status, e.Phase+e.Layer, e.Summary, e.Seconds, e.Message)
			}
		},
	}
}

func TestBuildEveryStepKind(t *testing.T) {
	dir := recipeTree(t)
	plan := planFor(t, filepath.Join(dir, "every-step.hcl"), "mirror_uri="+hostMirror(t))
	out := t.TempDir()
	var events []event.Event
	res, err := builder.Build(context.Background(), plan, buildOptions(t, out, &events))
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest

	// The manifest describes the file beside it.
	sum, size := fileSHA256(t, res.Files.Tarball)
	if m.Artifact.Packer != "host" {
		t.Errorf("the tgz was packed by %q, want the host-side reader", m.Artifact.Packer)
	}
	if m.Artifact.SHA256 != sum || m.Artifact.Size != size {
		t.Errorf("manifest says %s/%d, the tgz is %s/%d", m.Artifact.SHA256, m.Artifact.Size, sum, size)
	}
	if m.Builder.Accelerator == "" || len(m.Packages) < 100 {
		t.Errorf("manifest: accelerator %q, %d packages", m.Builder.Accelerator, len(m.Packages))
	}
	if strings.Join(m.MissingOptional, ",") != "no-such-package-imagectl-test" {
		t.Errorf("missing optional packages: %v", m.MissingOptional)
	}
	if len(m.AptKeys) != 1 || m.AptKeys[0].Repository != "mirror" {
		t.Errorf("apt keys: %+v", m.AptKeys)
	}
	for _, l := range m.Layers {
		if l.Enabled && (l.Digest == "" || len(l.Steps) == 0) {
			t.Errorf("layer %s: no digest or steps in the manifest", l.Name)
		}
	}
	kinds := map[string]bool{}
	for _, e := range events {
		if e.Type == "step" && e.Status == "ok" {
			kinds[e.Kind] = true
		}
	}
	for _, k := range []string{"apt-repository", "packages", "file", "run", "services", "kernel-args", "bundle", "validation-script", "build-marker", "cleanup"} {
		if !kinds[k] {
			t.Errorf("no %s step ran", k)
		}
	}

	// Unpack the tgz the way curtin does and look at it from outside.
	root := t.TempDir()
	if out, err := exec.Command("tar", "-C", root, "--xattrs", "--xattrs-include=*", "-Sxpf", res.Files.Tarball, "--numeric-owner").CombinedOutput(); err != nil {
		t.Fatalf("curtin's tar cannot extract the tgz: %v: %s", err, out)
	}
	checkFile(t, root, "etc/every-step/plain.conf", "plain\n", 0o600)
	checkFile(t, root, "usr/local/bin/every-step", "#!/bin/sh\necho \"hello from every-step\"\n", 0o755)
	checkFile(t, root, "usr/local/share/gpuaas/site-bootstrap/site/bin/bootstrap.sh", "#!/bin/sh\necho site bootstrap\n", 0o755)
	checkFile(t, root, "usr/local/share/gpuaas/site-bootstrap/site/site.conf", "SITE=test\n", 0o644)
	if target, err := os.Readlink(filepath.Join(root, "usr/local/share/gpuaas/site-bootstrap/site/run")); err != nil || target != "bin/bootstrap.sh" {
		t.Errorf("bundle symlink: %q %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/every-step-ran")); err != nil {
		t.Error("the run step left no trace")
	}
	// The clean-up removes apt's lists, so apt-get update left out the
	// Translation indexes: the lists the run step saw have the suites'
	// Packages and no Translation.
	if b, err := os.ReadFile(filepath.Join(root, "var/lib/every-step-lists")); err != nil || !strings.Contains(string(b), "_Packages") || strings.Contains(string(b), "_Translation-") {
		t.Errorf("apt's lists after the packages step: %v\n%s", err, b)
	}
	if entries, err := os.ReadDir(filepath.Join(root, "var/lib/apt/lists")); err != nil || slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.Contains(e.Name(), "_Packages") }) {
		t.Errorf("apt's lists in the tgz: %v %v", entries, err)
	}
	for _, f := range []string{"etc/default/grub", "etc/default/grub.d/99-imagectl-kernel-args.cfg"} {
		b, _ := os.ReadFile(filepath.Join(root, f))
		if !strings.Contains(string(b), "intel_iommu=on") || !strings.Contains(string(b), "iommu=pt") {
			t.Errorf("%s lacks the kernel args:\n%s", f, b)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/cron.service")); err != nil {
		t.Error("cron was not enabled")
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/machine-id")); len(b) != 0 {
		t.Errorf("machine-id not emptied: %q", b)
	}
	for _, gone := range []string{"usr/sbin/policy-rc.d", "boot/efi/EFI"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); err == nil {
			t.Errorf("%s is in the tgz", gone)
		}
	}
	if keys, _ := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*")); len(keys) > 0 {
		t.Errorf("SSH host keys left: %v", keys)
	}
	if out, err := exec.Command("getcap", filepath.Join(root, "usr/bin/ping")).CombinedOutput(); err != nil || !strings.Contains(string(out), "cap_net_raw") {
		t.Errorf("ping lost its file capability: %q %v", out, err)
	}
	gid := ownerGID(t, root, "crontab")
	if st := statOf(t, filepath.Join(root, "etc/every-step/plain.conf")); st.gid != gid {
		t.Errorf("plain.conf group %d, want crontab (%d)", st.gid, gid)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/imagectl/build.json")); err != nil || !strings.Contains(string(b), `"top_key": "`+m.Lineage.TopKey+`"`) {
		t.Errorf("build marker: %v\n%s", err, b)
	}

	// The validation script baked in and the one beside the artifact are
	// the same, and pass on the unpacked tree.
	baked, _ := os.ReadFile(filepath.Join(root, "usr/local/sbin/every-step-validate.sh"))
	beside, _ := os.ReadFile(res.Files.ValidationScript)
	if len(baked) == 0 || string(baked) != string(beside) {
		t.Error("the baked validation script differs from the one beside the artifact")
	}
	vout, err := exec.Command("sh", res.Files.ValidationScript, "--root", root).CombinedOutput()
	if err != nil || strings.Contains(string(vout), "status=FAIL") {
		t.Errorf("validation of the unpacked tgz: %v\n%s", err, vout)
	}

	// The deployability check on the built tgz: the clean-up and packing
	// leave nothing curtin trips on; what remains is that the test image is
	// Debian, not Ubuntu.
	findings, err := deploycheck.CheckDeployable(context.Background(), res.Files.Tarball, deploycheck.DeployOptions{KernelArgs: m.KernelArgs})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range findings {
		got[f.Check] = true
	}
	if !got["os-release"] {
		t.Error("a Debian image passed the Ubuntu check")
	}
	// The recipe waives that check: the manifest records the finding as
	// waived, with the recipe's reason, and nothing else as waived.
	waived := 0
	for _, f := range m.Deploy {
		if f.Waived {
			waived++
			if f.Check != "os-release" || f.WaiverReason != "the test base image is Debian" {
				t.Errorf("waived finding %+v", f)
			}
		}
	}
	if waived != 1 || len(m.DeployWaivers) != 1 {
		t.Errorf("manifest: %d waived findings, waivers %+v; want the os-release one", waived, m.DeployWaivers)
	}
	for _, f := range m.DeployErrors() {
		if f.Check == "os-release" {
			t.Errorf("a waived check is among the deploy errors: %+v", f)
		}
	}
	for _, clean := range []string{"compression", "kernel", "boot-efi", "curtin-hooks", "policy-rc.d", "machine-id", "ssh-host-keys", "cloud-init-state", "kernel-args", "cloud-init", "netplan", "lsb-release"} {
		if got[clean] {
			t.Errorf("deployability finding %q on the built image: %+v", clean, findings)
		}
	}
}

func TestBuildFailures(t *testing.T) {
	base, checksum := baseImage(t)
	dir := t.TempDir()
	write := func(name, layer string) string {
		p := filepath.Join(dir, name)
		src := fmt.Sprintf("image \"fail\" {\n  title = \"f\"\n  version = \"1\"\n  base {\n    source = %q\n    checksum = var_checksum\n  }\n%s\n}\n", base, layer)
		src = strings.Replace(src, "var_checksum", "\""+checksum+"\"", 1)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	load := func(p string, flags ...string) *plan.Plan {
		return loadPlan(t, p, recipes.Options{Inputs: recipes.Inputs{Flags: flags}})
	}
	noOutputs := func(t *testing.T, out, work string) {
		t.Helper()
		for _, d := range []string{out, work} {
			if entries, _ := os.ReadDir(d); len(entries) > 0 {
				t.Errorf("left behind in %s: %v", d, entries)
			}
		}
		if pids := qemuproc.Children(); len(pids) > 0 {
			t.Errorf("QEMU processes left running: %v", pids)
		}
	}
	run := func(t *testing.T, ctx context.Context, plan *plan.Plan, opts builder.BuildOptions) error {
		t.Helper()
		_, err := builder.Build(ctx, plan, opts)
		if err == nil {
			t.Fatal("the build succeeded")
		}
		noOutputs(t, opts.OutputDir, opts.WorkDir)
		return err
	}

	t.Run("bad checksum", func(t *testing.T) {
		p := load(write("a.hcl", ""))
		p.Manifest.Base.SHA256 = strings.Repeat("0", 64)
		opts := buildOptions(t, t.TempDir(), nil)
		if err := run(t, context.Background(), p, opts); !errors.Is(err, basecache.ErrChecksum) {
			t.Errorf("got %v", err)
		}
	})
	t.Run("missing base", func(t *testing.T) {
		p := load(write("b.hcl", ""))
		p.Inputs.BasePath = filepath.Join(dir, "nope.qcow2")
		opts := buildOptions(t, t.TempDir(), nil)
		if err := run(t, context.Background(), p, opts); err == nil || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("failing command", func(t *testing.T) {
		p := load(write("c.hcl", `  layer "x" {
    run = ["echo about to fail; exit 3"]
  }`))
		err := run(t, context.Background(), p, buildOptions(t, t.TempDir(), nil))
		var ce *guest.CommandError
		if !errors.As(err, &ce) || ce.ExitCode != 3 || !strings.Contains(ce.Output, "about to fail") || !strings.Contains(err.Error(), "layer x, run step") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("failing required package", func(t *testing.T) {
		p := load(write("d.hcl", `  layer "pkgs" {
    packages = ["no-such-package-imagectl-test"]
  }`))
		err := run(t, context.Background(), p, buildOptions(t, t.TempDir(), nil))
		if err == nil || !strings.Contains(err.Error(), "Unable to locate package no-such-package-imagectl-test") {
			t.Errorf("apt's own error is not in %v", err)
		}
	})
	t.Run("cancelled mid-build", func(t *testing.T) {
		p := load(write("e.hcl", `  layer "slow" {
    run = ["sleep 600"]
  }`))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		opts := buildOptions(t, t.TempDir(), nil)
		var cancelledAt time.Time
		inner := opts.Events
		opts.Events = func(e event.Event) {
			inner(e)
			if e.Type == "step" && e.Status == "start" && e.Kind == "run" {
				go func() { time.Sleep(2 * time.Second); cancelledAt = time.Now(); cancel() }()
			}
		}
		err := run(t, ctx, p, opts)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v", err)
		}
		if waited := time.Since(cancelledAt); waited > 20*time.Second {
			t.Errorf("the build took %s to stop after cancellation", waited)
		}
	})
}

// TestPackIsDeterministicAndFaithful customizes a raw copy of the base image
// with what trips up readers of ext4 (sparse and preallocated files, hard
// links, devices, a fifo, long symlinks, nanosecond and pre-1970 mtimes,
// setuid bits, odd owners, a directory large enough for an htree; the base
// has no tools to set xattrs: TestBuildEveryStepKind checks ping's file
// capability in a host-packed tgz, and package ext4tar checks xattrs and
// ACLs against the kernel's view), then compares, entry by entry, the appliance's own tar-out with
// xattrs (the oracle) against both packers: the host-side reader of the
// disk (packed twice, which must give the same bytes) and the appliance
// path (Repack of that same tar-out stream).
func TestPackIsDeterministicAndFaithful(t *testing.T) {
	base, _ := baseImage(t)
	work := t.TempDir()
	disk := filepath.Join(work, "disk.raw")
	if out, err := exec.Command("qemu-img", "convert", "-q", "-f", "qcow2", "-O", "raw", base, disk).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	ctx := context.Background()
	sess, err := Executor{}.Open(ctx, disk, guest.SessionOptions{Format: "raw", Log: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.Run(ctx, `set -e
d=/srv/pack-test; mkdir -p $d/big
truncate -s 5M $d/sparse; printf middle | dd of=$d/sparse bs=1 seek=2000000 conv=notrunc status=none
dd if=/dev/urandom of=$d/leading bs=4096 seek=300 count=3 status=none
fallocate -l 1M $d/prealloc; printf head | dd of=$d/prealloc conv=notrunc status=none
printf tail > $d/keepsize; fallocate -n -l 2M $d/keepsize
printf data > $d/h1; ln $d/h1 $d/h2; ln $d/h1 $d/h0
mknod $d/null c 1 3; mknod $d/blk b 259 70000; mkfifo $d/fifo
ln -s "$(printf 'very-long-target/%.0s' $(seq 1 20))end" $d/long-link
touch -d '2001-02-03 04:05:06.123456789' $d/h1; touch -h -d '1969-07-20 20:17:40' $d/long-link
printf x > $d/suid; chmod 4750 $d/suid; chown 70000:1234 $d/suid
for i in $(seq 1 3000); do : > $d/big/f$i; done`); err != nil {
		t.Fatal(err)
	}
	mounts := sess.Mounts()
	if len(mounts) == 0 || mounts[0].Point != "/" || mounts[0].Partition < 1 {
		t.Fatalf("mounts %+v: want / on a partition", mounts)
	}

	// The oracle and the appliance packer read the same tar-out stream.
	oracle := map[string]string{}
	applianceTGZ := filepath.Join(work, "appliance.tgz")
	fa, err := os.Create(applianceTGZ)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	opr, opw := io.Pipe()
	oracleDone := make(chan error, 1)
	go func() {
		err := tarDigests(opr, oracle)
		io.Copy(io.Discard, opr)
		oracleDone <- err
	}()
	packDone := make(chan error, 1)
	go func() {
		tee := io.TeeReader(pr, opw)
		_, err := pack.Repack(ctx, tee, fa, 6, time.Time{})
		io.Copy(io.Discard, tee)
		opw.Close()
		packDone <- err
	}()
	if err := sess.TarOut(ctx, pw); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-packDone; err != nil {
		t.Fatal(err)
	}
	if err := <-oracleDone; err != nil {
		t.Fatal(err)
	}
	fa.Close()
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}

	// The host packer, twice, from the disk the appliance left.
	var host [2]string
	for i := range host {
		host[i] = filepath.Join(work, fmt.Sprintf("host%d.tgz", i))
		f, err := os.Create(host[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pack.Disk(ctx, disk, mounts[0].Partition, f, 6, time.Time{}); err != nil {
			t.Fatalf("PackDisk: %v", err)
		}
		f.Close()
	}
	a, _ := fileSHA256(t, host[0])
	b, _ := fileSHA256(t, host[1])
	if a != b {
		t.Errorf("packing the same filesystem twice gave %s and %s", a, b)
	}
	if _, ok := oracle["./srv/pack-test/big/f3000"]; !ok {
		t.Fatal("the test files are not in the oracle")
	}
	for _, tgz := range []string{host[0], applianceTGZ} {
		t.Run(filepath.Base(tgz), func(t *testing.T) {
			packed := tgzEntries(t, tgz)
			bad := 0
			for name, want := range oracle {
				if name == "./boot/efi" || strings.HasPrefix(name, "./boot/efi/") {
					if _, ok := packed[name]; ok {
						t.Errorf("%s is in the tgz", name)
					}
					continue
				}
				if got := packed[name]; got != want {
					if bad++; bad <= 20 {
						t.Errorf("%s:\n  oracle %s\n  tgz    %s", name, want, got)
					}
				}
			}
			for name := range packed {
				if _, ok := oracle[name]; !ok {
					t.Errorf("%s is in the tgz, not in the oracle", name)
				}
			}
			if len(packed) < 1000 {
				t.Errorf("only %d entries", len(packed))
			}
			t.Logf("%d entries match the oracle", len(packed))
		})
	}
}

// tarDigests records, per entry, everything deploy depends on: type, mode,
// owner, size, content hash, link target, device numbers, xattrs, mtime.
// A hard link gets the digest of the entry it links to, so that archives
// whose hard-link groups are led by different paths compare equal.
func tarDigests(r io.Reader, into map[string]string) error {
	tr := tar.NewReader(r)
	links := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		hs := sha256.New()
		if _, err := io.Copy(hs, tr); err != nil {
			return err
		}
		var xattrs []string
		for k, v := range h.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") {
				xattrs = append(xattrs, k+"="+hex.EncodeToString([]byte(v)))
			}
		}
		name := strings.TrimSuffix("./"+strings.TrimPrefix(h.Name, "./"), "/")
		if h.Typeflag == tar.TypeLink {
			links[name] = strings.TrimSuffix("./"+strings.TrimPrefix(h.Linkname, "./"), "/")
			continue
		}
		into[name] = fmt.Sprintf("type=%c mode=%o uid=%d gid=%d size=%d sha=%x link=%s dev=%d,%d mtime=%d xattrs=%s",
			h.Typeflag, h.Mode&0o7777, h.Uid, h.Gid, h.Size, hs.Sum(nil)[:8], h.Linkname,
			h.Devmajor, h.Devminor, h.ModTime.UnixNano(), strings.Join(sorted(xattrs), ","))
	}
	for name, target := range links {
		d, ok := into[target]
		if !ok {
			return fmt.Errorf("hard link %s to %s, which is not in the archive", name, target)
		}
		into[name] = d
	}
	return nil
}

// tgzEntries describes each entry of a tgz (tarDigests).
func tgzEntries(tb testing.TB, tgz string) map[string]string {
	tb.Helper()
	f, err := os.Open(tgz)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		tb.Fatal(err)
	}
	m := map[string]string{}
	if err := tarDigests(zr, m); err != nil {
		tb.Fatalf("reading %s: %v", tgz, err)
	}
	return m
}

func fileSHA256(t *testing.T, p string) (string, int64) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

func checkFile(t *testing.T, root, p, content string, mode os.FileMode) {
	t.Helper()
	full := filepath.Join(root, p)
	b, err := os.ReadFile(full)
	if err != nil {
		t.Errorf("%s: %v", p, err)
		return
	}
	if string(b) != content {
		t.Errorf("%s = %q, want %q", p, b, content)
	}
	if st, _ := os.Stat(full); st.Mode().Perm() != mode {
		t.Errorf("%s mode %v, want %v", p, st.Mode().Perm(), mode)
	}
}

type ownership struct{ uid, gid int }

func statOf(t *testing.T, p string) ownership {
	out, err := exec.Command("stat", "-c", "%u %g", p).Output()
	if err != nil {
		t.Fatal(err)
	}
	var o ownership
	fmt.Sscan(string(out), &o.uid, &o.gid)
	return o
}

func ownerGID(t *testing.T, root, group string) int {
	b, err := os.ReadFile(filepath.Join(root, "etc/group"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 && f[0] == group {
			var gid int
			fmt.Sscan(f[2], &gid)
			return gid
		}
	}
	t.Fatalf("no group %s in the image", group)
	return -1
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// TestBuildFallsBackToAppliance builds on a base whose root filesystem the
// host-side reader does not support (metadata_csum switched off): with the
// default packer the build says why and packs through the appliance; with
// --packer host it fails, leaving nothing behind.
func TestBuildFallsBackToAppliance(t *testing.T) {
	base, _ := baseImage(t)
	dir := t.TempDir()
	raw := filepath.Join(dir, "base.raw")
	part := filepath.Join(dir, "root.img")
	sh := func(script string) {
		t.Helper()
		if out, err := exec.Command("bash", "-euo", "pipefail", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	sh(fmt.Sprintf(`qemu-img convert -q -O raw %[1]s %[2]s
start=$(sgdisk -i 1 %[2]s | sed -n 's/^First sector: \([0-9]*\).*/\1/p')
end=$(sgdisk -i 1 %[2]s | sed -n 's/^Last sector: \([0-9]*\).*/\1/p')
dd status=none if=%[2]s of=%[3]s bs=512 skip=$start count=$((end - start + 1))
tune2fs -O ^metadata_csum %[3]s >/dev/null
dd status=none conv=notrunc if=%[3]s of=%[2]s bs=512 seek=$start
rm %[3]s`, base, raw, part))
	sum, _ := fileSHA256(t, raw)
	recipe := filepath.Join(dir, "fallback.hcl")
	src := fmt.Sprintf(`image "fallback" {
  title   = "fallback"
  version = "1"
  base {
    source   = %q
    checksum = "sha256:%s"
    format   = "raw"
  }
  layer "marker" {
    file "/etc/fallback-marker" {
      content = "packed\n"
    }
  }
}
`, raw, sum)
	if err := os.WriteFile(recipe, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := loadPlan(t, recipe, recipes.Options{})

	t.Run("host only", func(t *testing.T) {
		var events []event.Event
		opts := buildOptions(t, t.TempDir(), &events)
		opts.Packer = "host"
		_, err := builder.Build(context.Background(), plan, opts)
		if err == nil || !strings.Contains(err.Error(), "metadata_csum") || !strings.Contains(err.Error(), "--packer host") {
			t.Fatalf("got %v, want a refusal naming metadata_csum and the packer", err)
		}
		// Refused once the appliance is up, before any layer is applied.
		for _, e := range events {
			if e.Type == event.TypeStep || e.Phase == builder.PhasePack {
				t.Errorf("the refused build went on: %+v", e)
			}
		}
		for _, d := range []string{opts.OutputDir, opts.WorkDir} {
			if entries, _ := os.ReadDir(d); len(entries) > 0 {
				t.Errorf("left behind in %s: %v", d, entries)
			}
		}
	})
	t.Run("auto", func(t *testing.T) {
		var events []event.Event
		opts := buildOptions(t, t.TempDir(), &events)
		res, err := builder.Build(context.Background(), plan, opts)
		if err != nil {
			t.Fatal(err)
		}
		said := false
		for _, e := range events {
			said = said || (e.Type == "log" && strings.Contains(e.Message, "packing through the appliance") && strings.Contains(e.Message, "metadata_csum"))
			// The filesystem's features say so before the appliance is
			// shut down: it packs through the same session. (A launch
			// may itself launch again, when the appliance's kernel names
			// the disks in another order: that is not the pack's.)
			if strings.Contains(e.Message, "packing through the appliance (launching it again)") {
				t.Errorf("the build launched the appliance a second time to pack: %s", e.Message)
			}
		}
		if !said {
			t.Error("the build did not say why it packed through the appliance")
		}
		if res.Manifest.Artifact.Packer != "appliance" {
			t.Errorf("packer %q, want appliance", res.Manifest.Artifact.Packer)
		}
		out, err := exec.Command("tar", "-xzOf", res.Files.Tarball, "./etc/fallback-marker").CombinedOutput()
		if err != nil || string(out) != "packed\n" {
			t.Errorf("the marker in the tgz: %q, %v", out, err)
		}
		if pids := qemuproc.Children(); len(pids) > 0 {
			t.Errorf("QEMU processes left running: %v", pids)
		}
	})
}
