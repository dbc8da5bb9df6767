package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
)

// recipeFlags are the flags of every command that loads a recipe.
type recipeFlags struct {
	vars     []string
	varFiles []string
	roots    []string
	output   outputFlag
	// dryRun loads for a plan that is only shown (build --dry-run):
	// bundles whose sources need a variable without a value are shown
	// unresolved, with one warning, rather than failing the load.
	dryRun bool
}

func (f *recipeFlags) register(cmd *cobra.Command) {
	f.registerInputs(cmd)
	f.output.register(cmd)
}

// registerInputs registers the variable and root flags alone, for a
// command that has its own --output (smoke --compare-first-boot).
func (f *recipeFlags) registerInputs(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.vars, "var", nil, "set a variable: -var name=value (repeatable; highest precedence; a path is relative to the working directory)")
	cmd.Flags().StringArrayVar(&f.varFiles, "var-file", nil, "read variables from an HCL file of name = value lines (repeatable; paths in it are relative to the working directory)")
	cmd.Flags().StringArrayVar(&f.roots, "root", nil, "also allow file, bundle and key sources the recipe names from this directory tree (repeatable; paths given as variables need none)")
}

// load checks the flags, then reads a recipe and prints its diagnostics:
// every error and warning at once, as text on stderr, or as JSON on stdout
// when the recipe fails and --output json is set. It returns nil and an
// exitError when there are errors. It stops as soon as the command's
// context is cancelled (Ctrl-C), whatever the load is doing: every command
// that reads a recipe or var files reads them here.
// loadAt is load for a command that takes --version: the version names
// files and store paths, so it is refused before the recipe is read
// (plan.New holds every caller to the same rule).
func (f *recipeFlags) loadAt(ctx context.Context, s streams, path, version string, env []string) (*recipes.Recipe, error) {
	if version != "" {
		if err := manifest.CheckVersion(version); err != nil {
			return nil, fmt.Errorf("--version: %w", err)
		}
	}
	return f.load(ctx, s, path, env)
}

func (f *recipeFlags) load(ctx context.Context, s streams, path string, env []string) (*recipes.Recipe, error) {
	if err := f.output.check(); err != nil {
		return nil, err
	}
	p := recipes.NewParser()
	r, diags, err := p.Load(ctx, path, recipes.Options{
		Inputs: recipes.Inputs{Env: env, Files: f.varFiles, Flags: f.vars},
		Roots:  f.roots,
		DryRun: f.dryRun,
	})
	if err != nil {
		return nil, fmt.Errorf("loading recipe %s: %w", path, context.Cause(ctx))
	}
	if diags.HasErrors() && f.output.json() {
		if err := writeJSON(s.out, map[string]any{"valid": false, "recipe": path, "diagnostics": hclkit.DiagnosticsJSON(diags)}); err != nil {
			return nil, err
		}
		return nil, exitError{1}
	}
	if len(diags) > 0 {
		if err := hclkit.WriteDiagnostics(s.err, p.Files(), diags, isTerminal(s.err, env)); err != nil {
			return nil, err
		}
	}
	if diags.HasErrors() {
		return nil, exitError{1}
	}
	return r, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
