package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/release"
)

type predeployFlags struct {
	site    siteCmdFlags
	profile string
}

func newPredeployCmd(env []string) *cobra.Command {
	cmd, f := command(env, runPredeploy, &cobra.Command{
		Use:   "predeploy --site SITE [--profile ID] [--output json]",
		Short: "Whether a site may deploy now: the gate the deploy workflow calls before each MAAS deploy",
		Long: `Predeploy answers, before a MAAS deploy starts, whether the selected image
version exists and is approved for the site. For the deploy profile named
by --profile (its profile_id, or SITE_ID/PROFILE_ID), or every
deploy_profile of the site, and the version the catalog says the site runs
of the image the profile follows, it checks: promoted (the catalog names
a version), profile (the profile selects that version's boot resource),
maas (MAAS holds it complete, with the version's sha256; on MAAS 3.5 and
later complete means every region has the file), not-revoked, and policy
(the site's promotion policy was met when the version was promoted, or was
overridden, which a note says), and, for a site with warm_racks = true,
racks (the promotion proved every rack controller serves it; one that could
not be reached, unknown, fails it unless --allow-unknown-racks; see
docs/racks.md). It exits 0 only when every condition
holds, and 1 otherwise, naming each failing condition with a command that
fixes it. It reads only what that needs: the image's history and
revocations, one boot resource and one GET per profile.`,
		Example: `  imagectl predeploy --site maas280 -o json
  imagectl predeploy --site maas280 --profile h200-bm`,
		Args: cobra.NoArgs,
	})
	f.site.register(cmd, false)
	cmd.Flags().BoolVar(&f.site.allowUnknownRacks, "allow-unknown-racks", false, "the racks condition holds although some racks were unknown (could not be reached) when they were checked; a failed rack still fails it")
	cmd.Flags().StringVar(&f.profile, "profile", "", "the deploy profile the deploy uses: its profile_id, or SITE_ID/PROFILE_ID (default: every deploy_profile of the site)")
	return cmd
}

func runPredeploy(ctx context.Context, f *predeployFlags, _ []string, s streams, env []string) error {
	o, err := f.site.options(ctx, s, env, false)
	if err != nil {
		return err
	}
	res, err := release.Predeploy(ctx, f.profile, o)
	if err != nil {
		return err
	}
	if err := f.site.output.print(s.out, res, func(w io.Writer) error { predeployText(w, res); return nil }); err != nil {
		return err
	}
	if !res.Ready {
		return exitError{1}
	}
	return nil
}

func predeployText(w io.Writer, res *release.PredeployResult) {
	for _, img := range res.Images {
		if img.Image != "" {
			textsafe.Fprintf(w, "%s at site %s: %s\n", img.Image, res.Site, dash(img.Version))
		}
		for _, c := range img.Conditions {
			mark := "ok  "
			if !c.OK {
				mark = "FAIL"
			}
			textsafe.Fprintf(w, "  %s %s: %s\n", mark, c.Name, c.Detail)
			if c.Note != "" {
				textsafe.Fprintf(w, "       note: %s\n", c.Note)
			}
			if c.Fix != "" {
				textsafe.Fprintf(w, "       fix: %s\n", c.Fix)
			}
		}
	}
	if res.Ready {
		textsafe.Fprintf(w, "site %s is ready to deploy\n", res.Site)
	} else {
		fmt.Fprintf(w, "not ready\n")
	}
}
