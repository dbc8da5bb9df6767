package main

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/deploycheck"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storeopen"
)

type checkFlags struct {
	store     storeFlags
	manifest  string
	output    outputFlag
	bareMetal bool
}

func newCheckCmd(env []string) *cobra.Command {
	cmd, f := command(env, runCheck, &cobra.Command{
		Use:   "check (ARTIFACT.tgz | IMAGE VERSION)",
		Short: "Check that a tgz will deploy through MAAS/curtin",
		Long: `Check reads a tgz the way MAAS and curtin will use it, without extracting it or
starting an appliance, and reports what would fail or slow the deploy: the
compression, kernel and initrd under /boot (a generic kernel for bare metal),
cloud-init, netplan and lsb_release, the UEFI boot packages for an offline
deploy, nothing under ./boot/efi, no /curtin/curtin-hooks, no policy-rc.d, an
empty machine-id, no SSH host keys or cloud-init state, the recipe's kernel
args in GRUB_CMDLINE_LINUX, no grub.d drop-in assigning
GRUB_CMDLINE_LINUX_DEFAULT, no commented GRUB_CMDLINE_LINUX_DEFAULT before the
live one. Each finding names its fix. Checks the recipe waives (its waive
blocks, recorded in the manifest) are reported as waived, with the reason.
It exits 1 when any finding is an error that is not waived.

Given IMAGE VERSION it checks that version from the store (--store), fetching
its tgz from a registry into the local cache, verified, when it is remote.`,
		Example: `  imagectl check artifacts/gpuaas-h200-host-ubuntu2404-1.4.0.tgz
  imagectl check image.tgz --manifest image.manifest.json --output json
  imagectl check gpuaas-h200-host 20261123.1 --store oci://registry.example.com/imagectl`,
		Args: cobra.RangeArgs(1, 2),
	})
	f.store.registerVersions(cmd, "the image store IMAGE VERSION is in: a directory or "+storeopen.Scheme+"REGISTRY/PREFIX (default: $IMAGECTL_STORE, else ./"+store.DefaultDir+")")
	cmd.Flags().StringVar(&f.manifest, "manifest", "", "the build manifest (default: the .manifest.json beside the tgz, when there is one)")
	f.output.register(cmd)
	cmd.Flags().BoolVar(&f.bareMetal, "bare-metal", true, "expect a generic kernel (bare-metal hosts)")
	return cmd
}

func runCheck(ctx context.Context, f *checkFlags, args []string, s streams, env []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	tgz, manifestPath, _, err := f.store.artifact(ctx, env, args, f.manifest)
	if err != nil {
		return err
	}
	r, err := deploycheck.CheckArtifact(ctx, tgz, deploycheck.ArtifactOptions{Manifest: manifestPath, BareMetal: f.bareMetal})
	if err != nil {
		return err
	}
	if err := f.output.print(s.out, r, func(w io.Writer) error { return checkText(w, r, args) }); err != nil {
		return err
	}
	if !r.Deployable {
		return exitError{1}
	}
	return nil
}

// checkText prints a check's findings. Messages carry the tgz's entry names
// and waiver reasons the manifest's: escaped, one line each.
func checkText(w io.Writer, r *deploycheck.Report, args []string) error {
	for _, f := range r.Findings {
		if f.Waived {
			textsafe.Fprintf(w, "%s (waived: %s): %s: %s\n", f.Severity, f.WaiverReason, f.Check, f.Message)
			continue
		}
		textsafe.Fprintf(w, "%s: %s: %s\n  fix: %s\n", f.Severity, f.Check, f.Message, f.Fix)
	}
	if len(r.Findings) == 0 {
		textsafe.Fprintf(w, "%s: deployable, no findings\n", strings.Join(args, " "))
	}
	return nil
}
