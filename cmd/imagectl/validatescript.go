package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/validate"
)

type validateScriptFlags struct {
	recipe recipeFlags
	out    string
}

func newValidateScriptCmd(env []string) *cobra.Command {
	cmd, f := command(env, runValidateScript, &cobra.Command{
		Use:   "validate-script RECIPE|MANIFEST",
		Short: "Write the on-host validation script of an image",
		Long: `Validate-script writes the POSIX sh script that checks a deployed host (or,
with --root DIR, an unpacked root filesystem) against its image: packages,
kernel args in /proc/cmdline and both grub files, Netdata, services, the
wait-online bound, files and bundle contents by hash and mode, the build
marker, and the recipe's validation block: its GPU block (nvidia-smi
--query-gpu), and per deploy profile (--profile bare-metal|slice) what the
image guarantees (--stage image) or what the site bootstrap must have
converged (--stage converged). From a build manifest it pins package
versions; from a recipe it checks what the recipe alone says. Each check
prints one "IMAGECTL_VALIDATE status=PASS|FAIL|WARN check=... detail=..."
line, a FAIL with "remediation=..." added; the summary line names the
profile and stage, and the script exits 1 when any check failed. Builds bake
it into the image and write it beside the artifact.`,
		Example: `  imagectl validate-script artifacts/imagectl-demo-0.1.0.manifest.json --out validate.sh
  imagectl validate-script recipes/h200.hcl > gpuaas-h200-host-image-validate.sh
  sh validate.sh --root /mnt/unpacked-image
  sh validate.sh --profile slice --stage converged`,
		Args: cobra.ExactArgs(1),
	})
	f.recipe.register(cmd)
	cmd.Flags().StringVar(&f.out, "out", "", "write the script to this file (mode 0755) instead of standard output")
	return cmd
}

func runValidateScript(ctx context.Context, f *validateScriptFlags, args []string, s streams, env []string) error {
	m, err := imageManifest(ctx, &f.recipe, args[0], s, env)
	if err != nil {
		return err
	}
	script, err := validate.Script(m)
	if err != nil {
		return err
	}
	if f.out == "" || f.out == "-" {
		_, err = s.out.Write(script)
		return err
	}
	return atomicfile.WriteFile(f.out, script, 0o755)
}

// imageManifest reads a build manifest (.json), or plans a recipe for the
// manifest it would build.
func imageManifest(ctx context.Context, rf *recipeFlags, path string, s streams, env []string) (*manifest.Manifest, error) {
	if strings.HasSuffix(path, ".json") {
		return manifest.Read(path)
	}
	r, err := rf.load(ctx, s, path, env)
	if err != nil {
		return nil, err
	}
	p, err := plan.New(r, plan.Options{})
	if err != nil {
		return nil, err
	}
	return p.Manifest, nil
}
