package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/buildinfo"
)

func newVersionCmd() *cobra.Command {
	var output outputFlag
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print imagectl's version",
		Example: "  imagectl version\n  imagectl version --output json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.check(); err != nil {
				return err
			}
			if output.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]string{
					"version": buildinfo.Version, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH,
				})
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "imagectl %s (%s, %s/%s)\n", buildinfo.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
	output.register(cmd)
	return cmd
}
