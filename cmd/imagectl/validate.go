package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/textsafe"
)

func newValidateCmd(env []string) *cobra.Command {
	cmd, rf := command(env, runValidate, &cobra.Command{
		Use:   "validate RECIPE",
		Short: "Check a recipe and report every error in it",
		Long: fmt.Sprintf(`Validate loads a recipe with its layer files, variables and sources and
reports every problem at once, each with file:line:col and a snippet. It exits
non-zero when there is any error. It prints the first %d diagnostics and
counts the rest; control characters and invalid UTF-8 from the input are
printed escaped (\x1b). Given a layer file, it says so: a layer file is
validated through a recipe that uses it.

Input limits: imagectl reads HCL input - recipes, layer files, var files,
-var and IMAGECTL_VAR_* values written as HCL, templates, sites.hcl - of at
most %d bytes (1 MiB), nested at most %d levels deep: each bracket, brace,
parenthesis, quote, heredoc and template interpolation or directive is a
level, and so is each operator within one expression. It refuses more with a
diagnostic at the place. A recipe needs a few kilobytes and a dozen levels.
A pipe (a FIFO, or -var-file <(command)) is read until it is closed, and
refused after %s without input; a device is refused.

Ctrl-C (or SIGTERM) stops it at any point with exit status 130, even while
a file it reads blocks; a second one exits at once.`,
			hclkit.MaxDiagnostics, hclkit.MaxInputSize, hclkit.MaxNesting, hclkit.PipeWait),
		Example: `  imagectl validate examples/demo.hcl -var-file base.vars.hcl
  imagectl validate recipes/h200.hcl -var site_bootstrap_dir=/srv/infra/env/maas/site-bootstrap \
      -var netdata_retention_mb=512 --output json`,
		Args: cobra.ExactArgs(1),
	})
	rf.register(cmd)
	return cmd
}

func runValidate(ctx context.Context, rf *recipeFlags, args []string, s streams, env []string) error {
	r, err := rf.load(ctx, s, args[0], env)
	if err != nil {
		return err
	}
	enabled := len(r.Image.EnabledLayers())
	v := map[string]any{
		"valid": true, "recipe": args[0], "image": r.Image.Name, "version": r.Image.Version,
		"layers": len(r.Image.Layers), "enabled_layers": enabled, "diagnostics": []any{},
	}
	return rf.output.print(s.out, v, func(w io.Writer) error {
		_, err := textsafe.Fprintf(w, "%s: valid (image %s, %d layers, %d enabled)\n", args[0], r.Image.Name, len(r.Image.Layers), enabled)
		return err
	})
}
