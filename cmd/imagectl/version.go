package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/buildinfo"
)

type versionFlags struct{ output outputFlag }

func newVersionCmd() *cobra.Command {
	cmd, f := command(nil, runVersion, &cobra.Command{
		Use:     "version",
		Short:   "Print imagectl's version",
		Example: "  imagectl version\n  imagectl version --output json",
		Args:    cobra.NoArgs,
	})
	f.output.register(cmd)
	return cmd
}

func runVersion(_ context.Context, f *versionFlags, _ []string, s streams, _ []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	v := map[string]string{"version": buildinfo.Version, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH}
	return f.output.print(s.out, v, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "imagectl %s (%s, %s/%s)\n", buildinfo.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return err
	})
}
