package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newValidateCmd(env []string) *cobra.Command {
	var rf recipeFlags
	cmd := &cobra.Command{
		Use:   "validate RECIPE",
		Short: "Check a recipe and report every error in it",
		Long: `Validate loads a recipe with its layer files, variables and sources and
reports every problem at once, each with file:line:col and a snippet. It exits
non-zero when there is any error.`,
		Example: `  imagectl validate examples/demo.hcl -var-file base.vars.hcl
  imagectl validate recipes/h200.hcl --root /srv/infra -var site_bootstrap_dir=/srv/infra/env/maas/site-bootstrap \
      -var netdata_retention_mb=512 --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := rf.check(); err != nil {
				return err
			}
			r, err := rf.load(cmd, args[0], env)
			if err != nil {
				return err
			}
			enabled := len(r.Image.EnabledLayers())
			if rf.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{
					"valid": true, "recipe": args[0], "image": r.Image.Name, "version": r.Image.Version,
					"layers": len(r.Image.Layers), "enabled_layers": enabled, "diagnostics": []any{},
				})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (image %s, %d layers, %d enabled)\n", args[0], r.Image.Name, len(r.Image.Layers), enabled)
			return err
		},
	}
	rf.register(cmd)
	return cmd
}
