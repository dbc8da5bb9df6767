//go:build guestfs

package guestfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/builder/pack"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/appliance"
	"github.com/gpuaas/imagectl/internal/testbase"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
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
			if _, err := pack.Disk(ctx, raw, rootPartition, io.Discard, 6, time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("imagectl-host-with-convert", func(b *testing.B) {
		for b.Loop() {
			r := filepath.Join(b.TempDir(), "r.raw")
			shell(b, "qemu-img convert -q -O raw "+base+" "+r)
			if _, err := pack.Disk(ctx, r, rootPartition, io.Discard, 6, time.Time{}); err != nil {
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
			if _, err := pack.Appliance(ctx, sess, io.Discard, 6, time.Time{}); err != nil {
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

// BenchmarkBuildTimes runs, once each, the builds the goals
// compare, prints where each one's time went side by side (the manifest's
// timings, in seconds, and the wall time of the whole Build call), and
// reports the four ratios, each next to the build it is compared with:
//
//   - demo-no-caches: examples/demo.hcl without the layer cache or the
//     package cache, every package downloaded by the appliance's apt (how
//     builds ran before the package cache);
//   - virt-customize: the equivalent virt-customize (packages, files,
//     commands, services, bundle, clean-up), guestfish tar-out with xattrs
//     and gzip, on the same base image;
//   - demo-cold: a first build, its layer cache and package cache empty
//     (both filled);
//   - demo-warm: nothing changed (every layer restored, no appliance);
//   - demo-first-layer: the first layer changed (-var version=0.1.1 changes
//     its motd), so every layer is rebuilt, with the package cache warm;
//   - demo-netdata: a Netdata setting changed (the @config layer and what
//     follows it);
//   - h200-no-caches: the H200 stand-in (testdata/h200-debian.hcl) as
//     builds ran before the package cache;
//   - h200-fill: the H200 stand-in filling an empty package cache;
//   - h200-warm-packages: the H200 stand-in with an empty layer cache and
//     the package cache warm.
//
// Run with -benchtime 1x: under TCG it took 38 minutes on an idle 2-core
// machine.
func BenchmarkBuildTimes(b *testing.B) {
	vars, base, accel, env := benchSetup(b)
	ctx := context.Background()
	bundles, err := filepath.Abs("../../testdata/bundles")
	if err != nil {
		b.Fatal(err)
	}
	demo := func(flags ...string) *plan.Plan {
		return loadPlan(b, "../../examples/demo.hcl", recipes.Options{Inputs: recipes.Inputs{Files: []string{vars}, Flags: flags}})
	}
	h200 := func() *plan.Plan {
		return loadPlan(b, "../../testdata/h200-debian.hcl", recipes.Options{Roots: []string{bundles},
			Inputs: recipes.Inputs{Files: []string{vars}, Flags: []string{"site_bootstrap_dir=" + bundles}}})
	}
	type row struct {
		name   string
		wall   float64
		t      manifest.Timings
		sha256 string
		tgz    string // kept until the bench ends (b.TempDir)
		rev    string // the recipe checkout's commit the build recorded
	}
	var rows []row
	build := func(name string, p *plan.Plan, layers, packages string) row {
		start := time.Now()
		res, err := builder.Build(ctx, p, builder.BuildOptions{Executor: Executor{}, CacheDir: b.TempDir(), WorkDir: b.TempDir(),
			OutputDir: b.TempDir(), Accel: accel, LayerCache: layers, PackageCache: packages, Env: env})
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		r := row{name: name, wall: time.Since(start).Seconds(), t: *res.Manifest.Build.Timings, sha256: res.Manifest.Artifact.SHA256,
			tgz: res.Files.Tarball}
		r.rev = res.Manifest.Lineage.SourceRevision
		rows = append(rows, r)
		// Each build's figures as it ends, so a run that fails later
		// still says where the earlier builds' time went.
		fmt.Fprintf(os.Stderr, "bench: %s %.1fs sha256:%s %+v\n", name, r.wall, r.sha256, r.t)
		return r
	}
	for b.Loop() {
		rows = nil
		dir := b.TempDir()
		layers, packages := filepath.Join(dir, "layers"), filepath.Join(dir, "packages")
		build("demo-no-caches", demo(), "", "")
		start := time.Now()
		virtCustomizeDemo(b, base, env)
		vc := row{name: "virt-customize", wall: time.Since(start).Seconds()}
		rows = append(rows, vc)
		fmt.Fprintf(os.Stderr, "bench: %s %.1fs\n", vc.name, vc.wall)
		cold := build("demo-cold", demo(), layers, packages)
		build("demo-warm", demo(), layers, packages)
		first := build("demo-first-layer", demo("version=0.1.1"), layers, packages)
		netdata := build("demo-netdata", demo("netdata_retention_mb=65"), layers, packages)
		h200Packages := filepath.Join(dir, "h200-packages")
		h200Before := build("h200-no-caches", h200(), "", "")
		build("h200-fill", h200(), "", h200Packages)
		h200Warm := build("h200-warm-packages", h200(), "", h200Packages)

		var out strings.Builder
		tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "build\twall\tbase\tlaunch\tresolve\tdownload\tinstall\tcommands\tsnapshot\tpack\tsbom\tdownloaded MiB\tcached MiB\t")
		for _, r := range rows {
			t := r.t
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", r.name, r.wall, t.Base, t.Launch, t.Resolve, t.Download, t.Install,
				t.Commands, t.Snapshot, t.Pack, t.SBOM, float64(t.DownloadBytes)/(1<<20), float64(t.CachedBytes)/(1<<20))
		}
		tw.Flush()
		ratio := func(name string, a, alt row, goal float64) {
			x := a.wall / alt.wall
			fmt.Fprintf(&out, "%-52s %.2fx (%.0fs against %s's %.0fs; goal at most %.2fx)\n", name, x, a.wall, alt.name, alt.wall, goal)
			b.ReportMetric(x, name+"-x")
		}
		ratio("demo-cold/virt-customize", cold, vc, 0.4)
		ratio("demo-first-layer/demo-cold", first, cold, 0.5)
		fmt.Fprintf(&out, "%-52s %d bytes downloaded again, %d from the package cache\n", "demo-first-layer", first.t.DownloadBytes, first.t.CachedBytes)
		ratio("h200-warm-packages/h200-no-caches", h200Warm, h200Before, 0.6)
		ratio("demo-netdata/demo-cold", netdata, cold, 0.25)
		b.ReportMetric(float64(first.t.DownloadBytes), "first-layer-downloaded-bytes")
		// The same inputs give the same bytes, with or without the caches:
		// the demo before and after them, the stand-in's three builds
		// (users and groups its packages add included). Where they do not,
		// the entries that differ say why. The checkout's commit is an
		// input that the marker records: builds on either side of a commit
		// made during the run are compared without the marker.
		for _, same := range [][]string{{"demo-no-caches", "demo-cold", "demo-warm"}, {"h200-no-caches", "h200-fill", "h200-warm-packages"}} {
			var first *row
			sums := map[string][]string{}
			for i, r := range rows {
				if !slices.Contains(same, r.name) {
					continue
				}
				sums[r.sha256] = append(sums[r.sha256], r.name)
				switch {
				case first == nil:
					first = &rows[i]
				case r.sha256 == first.sha256:
				default:
					a, z := tgzEntries(b, first.tgz), tgzEntries(b, r.tgz)
					if r.rev != first.rev {
						// The marker records the checkout's commit: it
						// differs, and nothing else may.
						delete(a, marker)
						delete(z, marker)
						fmt.Fprintf(&out, "%s and %s: the checkout changed between them (%s, then %s): compared without %s\n",
							first.name, r.name, first.rev, r.rev, marker)
					}
					diffs := entryDiffs(a, z, first.name, r.name, 20)
					if len(diffs) > 0 {
						b.Errorf("builds of the same inputs gave other tgz bytes: %s %s, %s %s", first.name, first.sha256, r.name, r.sha256)
					}
					for _, d := range diffs {
						b.Errorf("%s", d)
					}
				}
			}
			fmt.Fprintf(&out, "%-52s %d tgz digest(s) for %d builds\n", strings.Join(same, ", "), len(sums), len(same))
		}
		b.Log("\n" + out.String())
	}
}

// marker is the build marker's entry in the demo's and the stand-in's tgz.
const marker = "." + recipes.DefaultBuildMarker

// virtCustomizeDemo runs what the old pipeline would for examples/demo.hcl
// on base: virt-customize (packages, files, commands, services, bundle,
// clean-up), then guestfish tar-out with xattrs piped to gzip.
func virtCustomizeDemo(b *testing.B, base string, env []string) {
	dir := b.TempDir()
	overlay := filepath.Join(dir, "o.qcow2")
	hello := filepath.Join(dir, "demo-hello")
	if err := os.WriteFile(hello, []byte("#!/bin/sh\necho \"imagectl-demo 0.1.0\"\n"), 0o755); err != nil {
		b.Fatal(err)
	}
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
