package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/smoke"
	"github.com/gpuaas/imagectl/store"
)

// comparisonFlags are the flags of evidence add-comparison.
type comparisonFlags struct {
	st     storeFlags
	output outputFlag
	by     string
}

func newEvidenceAddComparisonCmd(env []string) *cobra.Command {
	cmd, f := command(env, runEvidenceAddComparison, &cobra.Command{
		Use:   "add-comparison NAME-VERSION.smoke-compare.json",
		Short: "Record a boot comparison (baked vs first boot) with the version it measured",
		Long: `Evidence add-comparison records the comparison "imagectl smoke
--compare-first-boot" wrote beside a tgz with the image version it
measured, in the store's catalog, of no site: for its profile, stage,
accelerator and memory, whether each path (the baked tgz, and the base
image doing the same work at first boot) passed, in how many seconds it
reached "validated", what it downloaded, and the ratio of the two, which
imagectl computes (a ratio in the file is not kept). It is refused when
the file is not a whole comparison (or larger than ` + readlimit.Size(smoke.MaxComparison) + `), a path
claims it passed without its seconds, it carries a ratio while a path
failed, the store holds no such version, or the tgz it booted is not
that version's (its artifact_sha256). The version keeps each
profile, stage and accelerator's latest ` + fmt.Sprint(store.KeepPerComparison) + ` comparisons; the same file
recorded again is one. "imagectl show IMAGE VERSION" prints the latest.`,
		Example: `  imagectl evidence add-comparison out/gpuaas-h200-host-ubuntu2404-1.4.0.smoke-compare.json --store /srv/imagectl-store`,
		Args:    cobra.ExactArgs(1),
	})
	f.st.register(cmd)
	f.output.register(cmd)
	cmd.Flags().StringVar(&f.by, "by", "", "who records the comparison (default: $USER)")
	return cmd
}

func runEvidenceAddComparison(ctx context.Context, f *comparisonFlags, args []string, s streams, env []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	b, err := readlimit.File(args[0], smoke.MaxComparison)
	if err != nil {
		return fmt.Errorf("reading the boot comparison: %w", err)
	}
	st, err := f.st.open(ctx, env)
	if err != nil {
		return err
	}
	c, err := release.RecordBootComparison(ctx, b, args[0], release.Options{Store: st, Env: env, By: f.by})
	if err != nil {
		return err
	}
	return f.output.print(s.out, c, func(w io.Writer) error {
		textsafe.Fprintf(w, "recorded with %s %s in %s:\n", c.Image, c.Version, st.Location())
		comparisonText(w, "  ", c)
		return nil
	})
}

// comparisonText writes c on one line after indent: "validated in X s
// baked vs Y s at first boot (RATIO, ACCELERATOR, PROFILE/STAGE, measured
// WHEN)" when both paths passed, else which failed and why, escaped.
func comparisonText(w io.Writer, indent string, c *store.BootComparison) {
	where := fmt.Sprintf("%s, %s/%s, measured %s", c.Accelerator, c.Profile, c.Stage, c.MeasuredAt.UTC().Format(time.RFC3339))
	if c.Ratio != nil && c.Baked.ValidatedSeconds != nil && c.FirstBoot.ValidatedSeconds != nil {
		textsafe.Fprintf(w, "%svalidated in %.1f s baked vs %.1f s at first boot (%.2fx, %s)\n",
			indent, *c.Baked.ValidatedSeconds, *c.FirstBoot.ValidatedSeconds, *c.Ratio, where)
		return
	}
	var failed []string
	for _, p := range []struct {
		name string
		p    store.BootPath
	}{{"the baked path", c.Baked}, {"the first-boot path", c.FirstBoot}} {
		if !p.p.Passed {
			failed = append(failed, fmt.Sprintf("%s FAILED: %s", p.name, textsafe.Cut(cmp.Or(p.p.Failure, "no reason given"), 300)))
		}
	}
	textsafe.Fprintf(w, "%snot compared: %s (%s)\n", indent, strings.Join(failed, "; "), where)
}
