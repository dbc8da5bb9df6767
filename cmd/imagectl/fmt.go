package main

import (
	"bytes"
	"context"
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

type fmtFlags struct{ check bool }

func newFmtCmd() *cobra.Command {
	cmd, f := command(nil, runFmt, &cobra.Command{
		Use:   "fmt [PATH...]",
		Short: "Rewrite recipes and layer files in canonical HCL formatting",
		Long: `Fmt rewrites .hcl files (recipes, layer files, var files) in the canonical
formatting of hclwrite. Directories are walked for .hcl files; "-" formats
standard input to standard output. With --check nothing is written: the files
that need formatting are listed and the exit status is 1 if there are any.`,
		Example: `  imagectl fmt recipes/h200.hcl
  imagectl fmt --check recipes layers examples`,
	})
	cmd.Flags().BoolVar(&f.check, "check", false, "list files that need formatting and exit 1 if any; write nothing")
	return cmd
}

func runFmt(_ context.Context, f *fmtFlags, args []string, s streams, _ []string) error {
	if len(args) == 0 {
		args = []string{"."}
	}
	if len(args) == 1 && args[0] == "-" {
		return fmtStdin(s)
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
	for _, file := range files {
		src, err := hclkit.ReadInput(file)
		if err != nil {
			return err
		}
		out, diags := recipes.Format(src, file)
		if diags.HasErrors() {
			if err := hclkit.WriteDiagnostics(s.err, map[string]*hcl.File{file: {Bytes: src}}, diags, false); err != nil {
				return err
			}
			broken++
			continue
		}
		if bytes.Equal(src, out) {
			continue
		}
		unformatted++
		if !f.check {
			if err := atomicfile.Replace(file, out); err != nil {
				return fmt.Errorf("rewriting %s: %w", file, err)
			}
		}
		fmt.Fprintln(s.out, file)
	}
	if broken > 0 || (f.check && unformatted > 0) {
		return exitError{1}
	}
	return nil
}

func fmtStdin(s streams) error {
	src, err := io.ReadAll(io.LimitReader(s.in, hclkit.MaxInputSize+1))
	if err != nil {
		return fmt.Errorf("reading standard input: %w", err)
	}
	if len(src) > hclkit.MaxInputSize {
		return fmt.Errorf("standard input is larger than %d bytes (1 MiB), the most imagectl reads of an HCL file", hclkit.MaxInputSize)
	}
	out, diags := recipes.Format(src, "<stdin>")
	if diags.HasErrors() {
		if err := hclkit.WriteDiagnostics(s.err, map[string]*hcl.File{"<stdin>": {Bytes: src}}, diags, false); err != nil {
			return err
		}
		return exitError{1}
	}
	_, err = s.out.Write(out)
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
