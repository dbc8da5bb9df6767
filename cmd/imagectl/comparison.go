package main

import (
	"context"
	"fmt"
	"io"

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
	return f.output.print(s.out, comparisonsJSON([]store.BootComparison{*c})[0], func(w io.Writer) error {
		textsafe.Fprintf(w, "recorded with %s %s in %s:\n", c.Image, c.Version, st.Location())
		comparisonText(w, "  ", c)
		return nil
	})
}

// comparisonText writes c's one line (store.BootComparison.Summary)
// after indent, escaped.
func comparisonText(w io.Writer, indent string, c *store.BootComparison) {
	textsafe.Fprintf(w, "%s%s\n", indent, c.Summary())
}

// comparisonJSON is a recorded comparison as --output json gives it: the
// record, whether both paths did the same work, and its one line.
type comparisonJSON struct {
	store.BootComparison
	LikeForLike bool   `json:"like_for_like"`
	Summary     string `json:"summary"`
}

func comparisonsJSON(cs []store.BootComparison) []comparisonJSON {
	out := make([]comparisonJSON, len(cs))
	for i := range cs {
		out[i] = comparisonJSON{cs[i], cs[i].LikeForLike(), cs[i].Summary()}
	}
	return out
}
