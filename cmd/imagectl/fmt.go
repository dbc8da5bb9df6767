package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/recipes"
)

func newFmtCmd() *cobra.Command {
	var check bool
	cmd := &cobra.Command{
		Use:   "fmt [PATH...]",
		Short: "Rewrite recipes and layer files in canonical HCL formatting",
		Long: `Fmt rewrites .hcl files (recipes, layer files, var files) in the canonical
formatting of hclwrite. Directories are walked for .hcl files; "-" formats
standard input to standard output. With --check nothing is written: the files
that need formatting are listed and the exit status is 1 if there are any.`,
		Example: `  imagectl fmt recipes/h200.hcl
  imagectl fmt --check recipes layers examples`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"."}
			}
			if len(args) == 1 && args[0] == "-" {
				return fmtStdin(cmd)
			}
			var files []string
			for _, a := range args {
				found, err := hclFiles(a)
				if err != nil {
					return err
				}
				files = append(files, found...)
			}
			var unformatted, broken int
			for _, f := range files {
				src, err := hclkit.ReadInput(f)
				if err != nil {
					return err
				}
				out, diags := recipes.Format(src, f)
				if diags.HasErrors() {
					files := map[string]*hcl.File{f: {Bytes: src}}
					if err := hclkit.WriteDiagnostics(cmd.ErrOrStderr(), files, diags, false); err != nil {
						return err
					}
					broken++
					continue
				}
				if bytes.Equal(src, out) {
					continue
				}
				unformatted++
				if check {
					fmt.Fprintln(cmd.OutOrStdout(), f)
					continue
				}
				if err := atomicfile.Replace(f, out); err != nil {
					return fmt.Errorf("rewriting %s: %w", f, err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			if broken > 0 || (check && unformatted > 0) {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "list files that need formatting and exit 1 if any; write nothing")
	return cmd
}

func fmtStdin(cmd *cobra.Command) error {
	src, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), hclkit.MaxInputSize+1))
	if err != nil {
		return fmt.Errorf("reading standard input: %w", err)
	}
	if len(src) > hclkit.MaxInputSize {
		return fmt.Errorf("standard input is larger than %d bytes (1 MiB), the most imagectl reads of an HCL file", hclkit.MaxInputSize)
	}
	out, diags := recipes.Format(src, "<stdin>")
	if diags.HasErrors() {
		files := map[string]*hcl.File{"<stdin>": {Bytes: src}}
		if err := hclkit.WriteDiagnostics(cmd.ErrOrStderr(), files, diags, false); err != nil {
			return err
		}
		return exitError{1}
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}

// hclFiles lists the .hcl files at p: p itself, or those under directory p.
func hclFiles(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != p && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".hcl") {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}
