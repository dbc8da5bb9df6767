package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder"
)

func newBuildCmd(env []string) *cobra.Command {
	var (
		rf      recipeFlags
		dryRun  bool
		version string
	)
	cmd := &cobra.Command{
		Use:   "build RECIPE",
		Short: "Build an image from a recipe (--dry-run prints the plan)",
		Long: `Build resolves a recipe's variables and layers into the ordered steps a
build executes. With --dry-run it prints that plan - base image and checksum,
each layer with its steps and digest, kernel args, Netdata, bundles with their
file hashes, artifact names and the MAAS target - and touches nothing.`,
		Example: `  imagectl build recipes/h200.hcl --dry-run
  imagectl build recipes/h200.hcl --dry-run --output json > plan.json
  imagectl build recipes/h200-slice-vm.hcl --dry-run -var version=1.4.0 -var-file site.hcl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := rf.check(); err != nil {
				return err
			}
			r, err := rf.load(cmd, args[0], env)
			if err != nil {
				return err
			}
			plan, err := builder.NewPlan(r, builder.PlanOptions{Version: version})
			if err != nil {
				return err
			}
			if !dryRun {
				return errors.New("this imagectl can plan but not yet execute a build: run with --dry-run")
			}
			if rf.output == "json" {
				return plan.WriteJSON(cmd.OutOrStdout())
			}
			return plan.WriteText(cmd.OutOrStdout())
		},
	}
	rf.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and touch nothing")
	cmd.Flags().StringVar(&version, "version", "", "image version (overrides the recipe's)")
	return cmd
}
