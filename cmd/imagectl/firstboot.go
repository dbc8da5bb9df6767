package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder/firstboot"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/manifest"
)

type firstbootFlags struct {
	recipe   recipeFlags
	out      string
	userData bool
	manifest string
	version  string
}

func newFirstbootCmd(env []string) *cobra.Command {
	cmd, f := command(env, runFirstboot, &cobra.Command{
		Use:   "firstboot RECIPE",
		Short: "Write the first-boot script: the recipe's build done on a host booted from its base image",
		Long: `Firstboot writes the POSIX sh script that performs a recipe's layers, in the
plan's order, on a host booted from the recipe's base image, as root: apt
repositories and keys, packages (optional ones recorded as missing), files
(embedded, checked by sha256), run commands, services (enabled and started,
or disabled and stopped), kernel args (after a reboot), bundles (embedded),
the validation script, the build marker and the clean-up that applies to a
live host. Each step logs its summary with a timestamp; a step that does not
run at first boot (build --dry-run shows which, and why) says why. The
script stops at the first failing step and ends with one result line that
counts the bytes apt downloaded. With --manifest it installs a build's
validation script and marker instead of the plan's, and pins every apt
key to the build's digests; the build must be of this plan (image, version,
layer digests). --version sets the image version as build --version does.
With --user-data it writes the script wrapped into NoCloud user-data (a
cloud-config whose runcmd stops there when the script fails). It takes the
variable and recipe flags build --dry-run takes. A script that carries a
sensitive variable's value is written only to a file (--out), its owner's
alone.`,
		Example: `  imagectl firstboot examples/demo.hcl -var-file base.vars.hcl --out firstboot.sh
  imagectl firstboot recipes/h200.hcl -var site_bootstrap_dir=/srv/site-bootstrap --user-data --out user-data
  imagectl firstboot recipes/h200.hcl -var site_bootstrap_dir=/srv/site-bootstrap --manifest artifacts/gpuaas-h200-host-ubuntu2404-1.4.0.manifest.json --out firstboot.sh
  imagectl build recipes/h200.hcl --dry-run -var site_bootstrap_dir=/srv/site-bootstrap   # what runs at first boot, per step`,
		Args: cobra.ExactArgs(1),
	})
	f.recipe.register(cmd)
	f.recipe.output.formats = []string{"text"}
	cmd.Flags().StringVar(&f.out, "out", "", "write the script to this file (mode 0755; user-data 0644; 0700 or 0600 when it carries a sensitive value) instead of standard output")
	cmd.Flags().StringVar(&f.manifest, "manifest", "", "a build's manifest of this image: install its validation script (package versions pinned) and build marker, and check the apt keys fetched by URL against the digests it recorded")
	cmd.Flags().StringVar(&f.version, "version", "", "image version (overrides the recipe's, as build --version does; --manifest's build must have it)")
	cmd.Flags().BoolVar(&f.userData, "user-data", false, "write NoCloud user-data (a cloud-config that writes the script and runs it) instead of the script")
	return cmd
}

func runFirstboot(ctx context.Context, f *firstbootFlags, args []string, s streams, env []string) error {
	r, err := f.recipe.loadAt(ctx, s, args[0], f.version, env)
	if err != nil {
		return err
	}
	p, err := plan.New(r, plan.Options{Version: f.version})
	if err != nil {
		return err
	}
	var opts firstboot.Options
	if f.manifest != "" {
		m, err := manifest.Read(f.manifest)
		if err != nil {
			return err
		}
		if opts, err = firstboot.FromBuild(m, p.Manifest); err != nil {
			return fmt.Errorf("--manifest %s: %w", f.manifest, err)
		}
	}
	opts.Redact = func(s string) string { return string(p.Redact([]byte(s))) }
	res, err := firstboot.Script(ctx, p.Layers, p.Manifest, opts)
	if err != nil {
		return err
	}
	out := res.Script
	if f.userData {
		out = res.UserData()
	}
	if f.out == "" || f.out == "-" {
		if res.Sensitive {
			return fmt.Errorf("the first-boot script of %s carries a sensitive variable's value: write it to a file with --out (mode 0700, or 0600 for user-data)", args[0])
		}
		_, err = s.out.Write(out)
		return err
	}
	return atomicfile.WriteFile(f.out, out, res.Mode(f.userData))
}
