//go:build guestfs

package guestfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/builder/pack"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/appliance"
	"github.com/gpuaas/imagectl/internal/testbase"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/recipes"
)

// BenchmarkPack compares, on the test base image, ways of turning its root
// filesystem into a gzip'd tar:
//
//   - imagectl-host: what a build does at its pack step: the host-side
//     reader of the raw working disk (the build made that raw copy when it
//     started), PAX, numeric owners, pgzip and sha256 in one pass;
//   - imagectl-host-with-convert: the same plus making the raw copy from the
//     qcow2 (qemu-img convert), for a like-for-like start from the qcow2;
//   - imagectl-appliance: its fallback, an appliance session's tar-out
//     with xattrs streamed through the same writer (launch included);
//   - guestfish: tar-out with xattrs and numeric owners piped to gzip -6;
//   - virt-tar-out piped to gzip -6: the old pipeline (it loses xattrs);
//   - host: tar --xattrs | pigz of the same tree extracted on the host
//     (the extraction is not timed).
//
// Run with -benchtime 1x: the appliance paths take tens of seconds under TCG.
func BenchmarkPack(b *testing.B) {
	_, base, accel, env := benchSetup(b)
	ctx := context.Background()
	shell := func(b *testing.B, script string) {
		cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	raw := filepath.Join(b.TempDir(), "base.raw")
	shell(b, "qemu-img convert -q -O raw "+base+" "+raw)
	const rootPartition = 1 // scripts/mkbase.sh: ext4 root on p1, ESP on p15

	b.Run("imagectl-host", func(b *testing.B) {
		for b.Loop() {
			if _, err := pack.Disk(ctx, raw, rootPartition, io.Discard, 6); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("imagectl-host-with-convert", func(b *testing.B) {
		for b.Loop() {
			r := filepath.Join(b.TempDir(), "r.raw")
			shell(b, "qemu-img convert -q -O raw "+base+" "+r)
			if _, err := pack.Disk(ctx, r, rootPartition, io.Discard, 6); err != nil {
				b.Fatal(err)
			}
			os.Remove(r)
		}
	})
	b.Run("imagectl-appliance", func(b *testing.B) {
		for b.Loop() {
			overlay := filepath.Join(b.TempDir(), "o.qcow2")
			shell(b, "qemu-img create -q -f qcow2 -F qcow2 -b "+base+" "+overlay)
			sess, err := Executor{}.Open(ctx, overlay, guest.SessionOptions{Accel: accel})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := pack.Appliance(ctx, sess, io.Discard, 6); err != nil {
				b.Fatal(err)
			}
			sess.Close()
		}
	})
	b.Run("guestfish-tar-out-gzip", func(b *testing.B) {
		for b.Loop() {
			shell(b, "guestfish --ro -a "+base+" -i tar-out / - xattrs:true numericowner:true | gzip -6 > /dev/null")
		}
	})
	b.Run("virt-tar-out-gzip", func(b *testing.B) {
		for b.Loop() {
			shell(b, "virt-tar-out -a "+base+" / - | gzip -6 > /dev/null")
		}
	})
	b.Run("host-tar-pigz", func(b *testing.B) {
		testenv.Tool(b, "pigz", "make deps installs pigz")
		tree := b.TempDir()
		shell(b, "guestfish --ro -a "+base+" -i tar-out / - xattrs:true numericowner:true | tar -C "+tree+" --xattrs --xattrs-include='*' --numeric-owner -xpf -")
		b.ResetTimer()
		for b.Loop() {
			shell(b, "tar -C "+tree+" --xattrs --xattrs-include='*' --numeric-owner -cf - . | pigz -6 > /dev/null")
		}
	})
}

// BenchmarkDemoBuild compares a whole build of examples/demo.hcl by imagectl
// with the equivalent sequence the old pipeline would run: virt-customize
// (packages, files, commands, services, bundle, clean-up) then guestfish
// tar-out with xattrs piped to gzip, on the same base image.
func BenchmarkDemoBuild(b *testing.B) {
	vars, base, accel, env := benchSetup(b)
	ctx := context.Background()

	b.Run("imagectl", func(b *testing.B) {
		for b.Loop() {
			plan := loadPlan(b, "../../examples/demo.hcl", recipes.Options{Inputs: recipes.Inputs{Files: []string{vars}}})
			if _, err := builder.Build(ctx, plan, builder.BuildOptions{Executor: Executor{}, CacheDir: b.TempDir(),
				WorkDir: b.TempDir(), OutputDir: b.TempDir(), Accel: accel}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("virt-customize-guestfish-gzip", func(b *testing.B) {
		for b.Loop() {
			dir := b.TempDir()
			overlay := filepath.Join(dir, "o.qcow2")
			hello := filepath.Join(dir, "demo-hello")
			os.WriteFile(hello, []byte("#!/bin/sh\necho \"imagectl-demo 0.1.0\"\n"), 0o755)
			script := strings.Join([]string{
				"set -e",
				"qemu-img create -q -f qcow2 -F qcow2 -b " + base + " " + overlay,
				"qemu-img resize -q " + overlay + " 4G",
				"virt-customize -q -a " + overlay + " --network" +
					" --run-command 'growpart /dev/sda 1 || true; resize2fs /dev/sda1 || true'" +
					" --update --install jq,less,curl,htop,netdata" +
					" --write '/etc/motd:imagectl demo image 0.1.0'" +
					" --upload " + hello + ":/usr/local/bin/demo-hello --chmod 0755:/usr/local/bin/demo-hello" +
					" --run-command 'install -d -m 0750 /var/lib/imagectl-demo'" +
					" --run-command 'sed -i \"s/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX=\\\"intel_iommu=on iommu=pt\\\"/\" /etc/default/grub && update-grub'" +
					" --mkdir /usr/local/share/gpuaas/site-bootstrap --copy-in ../../examples/site-bootstrap/demo:/usr/local/share/gpuaas/site-bootstrap" +
					" --run-command 'systemctl enable netdata'" +
					" --run-command 'apt-get clean; rm -rf /var/lib/apt/lists/*; : > /etc/machine-id; rm -f /etc/ssh/ssh_host_*'",
				"guestfish --ro -a " + overlay + " -i tar-out / - xattrs:true numericowner:true | gzip -6 > " + filepath.Join(dir, "out.tgz"),
			}, "\n")
			cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
		}
	})
}

// benchSetup finds the test base image and decides the accelerator once, so
// that imagectl and the command-line tools it is compared with run alike.
func benchSetup(b *testing.B) (vars, base, accel string, env []string) {
	vars = testbase.Vars(b)
	base, _ = baseImageFrom(b, vars)
	accel, err := appliance.Accelerator(context.Background(), "auto", nil)
	if err != nil {
		b.Fatal(err)
	}
	env = os.Environ()
	if accel == "tcg" {
		env = append(env, "LIBGUESTFS_BACKEND_SETTINGS=force_tcg")
	}
	return vars, base, accel, env
}

// BenchmarkDemoCache measures the layer cache on examples/demo.hcl, one run
// each: a cold build without the cache, a cold build filling an empty cache
// (its overhead), a warm rebuild with nothing changed (every layer
// restored, no appliance), and a rebuild after changing only a Netdata
// setting (the @config layer and what follows it).
func BenchmarkDemoCache(b *testing.B) {
	vars, _, accel, _ := benchSetup(b)
	ctx := context.Background()
	planOf := func(b *testing.B, flags ...string) *plan.Plan {
		return loadPlan(b, "../../examples/demo.hcl", recipes.Options{Inputs: recipes.Inputs{Files: []string{vars}, Flags: flags}})
	}
	build := func(b *testing.B, p *plan.Plan, cacheDir string) {
		if _, err := builder.Build(ctx, p, builder.BuildOptions{Executor: Executor{}, CacheDir: b.TempDir(),
			WorkDir: b.TempDir(), OutputDir: b.TempDir(), Accel: accel, LayerCache: cacheDir}); err != nil {
			b.Fatal(err)
		}
	}
	shared := filepath.Join(b.TempDir(), "layers")
	b.Run("cold-no-cache", func(b *testing.B) {
		for b.Loop() {
			build(b, planOf(b), "")
		}
	})
	b.Run("cold-with-cache", func(b *testing.B) {
		for b.Loop() {
			os.RemoveAll(shared)
			build(b, planOf(b), shared)
		}
	})
	b.Run("warm-no-change", func(b *testing.B) {
		for b.Loop() {
			build(b, planOf(b), shared)
		}
	})
	b.Run("netdata-setting-changed", func(b *testing.B) {
		n := 64
		for b.Loop() {
			n++
			build(b, planOf(b, fmt.Sprintf("netdata_retention_mb=%d", n)), shared)
		}
	})
}
