package recipes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
)

// Options control how a recipe is loaded.
type Options struct {
	Inputs Inputs
	// Roots are extra directory trees that file, bundle and key sources may
	// come from, beside the tree of the file that names them.
	Roots []string
}

// Parser loads recipes and keeps every file it read (recipe, layer files,
// var files) so that diagnostics can show snippets of them.
type Parser struct {
	p *hclparse.Parser
}

// NewParser returns a Parser with no files loaded.
func NewParser() *Parser { return &Parser{p: hclparse.NewParser()} }

// Files returns the files read so far, by name, for WriteDiagnostics.
func (p *Parser) Files() map[string]*hcl.File { return p.p.Files() }

// LoadFile reads, decodes and checks the recipe at path. The recipe is nil
// when diags has errors; all errors found are in diags.
func (p *Parser) LoadFile(path string, opts Options) (*Recipe, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read recipe", Detail: err.Error()}}
	}
	return p.LoadSource(path, src, opts)
}

// LoadSource is LoadFile with the recipe's bytes already in hand; path
// still locates the recipe's directory for relative paths.
func (p *Parser) LoadSource(path string, src []byte, opts Options) (*Recipe, hcl.Diagnostics) {
	absPath, err := filepath.Abs(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot locate recipe", Detail: err.Error()}}
	}
	file, diags := p.p.ParseHCL(src, path)
	if diags.HasErrors() {
		return nil, diags
	}
	sum := sha256.Sum256(src)
	r := &Recipe{Path: path, Dir: filepath.Dir(absPath), Digest: "sha256:" + hex.EncodeToString(sum[:])}
	var roots []string
	for _, root := range opts.Roots {
		if abs, err := filepath.Abs(root); err == nil {
			roots = append(roots, abs)
		}
	}
	l := &loader{parser: p, tree: tree{extra: roots}, recipePath: absPath, recipeDir: r.Dir}

	content, d := file.Body.Content(recipeSchema)
	diags = append(diags, d...)

	ctx, vars, d := l.scope(content.Blocks, r.Dir, opts.Inputs, nil)
	diags = append(diags, d...)
	r.Variables = vars

	var images hcl.Blocks
	for _, b := range content.Blocks {
		if b.Type == "image" {
			images = append(images, b)
		}
	}
	switch {
	case len(images) == 0:
		start := hcl.Range{Filename: path, Start: hcl.InitialPos, End: hcl.InitialPos}
		diags = append(diags, errorAt(start, "Missing image block",
			`A recipe needs one image "<name>" { ... } block.`))
	default:
		for _, extra := range images[1:] {
			diags = append(diags, errorAt(extra.DefRange, "Duplicate image block",
				fmt.Sprintf("A recipe builds one image; the first image block is at %s.", images[0].DefRange)))
		}
		img, d := l.decodeImage(images[0], ctx)
		diags = append(diags, d...)
		r.Image = img
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return r, diags
}

// loader carries what decoding one recipe needs.
type loader struct {
	parser     *Parser
	tree       tree
	recipePath string
	recipeDir  string
}

// scope decodes the variable and locals blocks of one file (a recipe or a
// layer file), resolves the variables from inputs (recipe) or given values
// (layer file), and returns the evaluation context for the rest of the file.
func (l *loader) scope(blocks hcl.Blocks, dir string, in Inputs, given *givenValues) (*hcl.EvalContext, []*Variable, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var vars []*Variable
	seen := map[string]*Variable{}
	var localBlocks hcl.Blocks
	for _, b := range blocks {
		switch b.Type {
		case "variable":
			v, d := decodeVariable(b)
			diags = append(diags, d...)
			if prev := seen[v.Name]; prev != nil {
				diags = append(diags, errorAt(b.LabelRanges[0], "Duplicate variable",
					fmt.Sprintf("Variable %q is already declared at %s.", v.Name, prev.DeclRange)))
				continue
			}
			seen[v.Name] = v
			vars = append(vars, v)
		case "locals":
			localBlocks = append(localBlocks, b)
		}
	}
	if given == nil {
		diags = append(diags, resolveVariables(l.parser, vars, in)...)
	} else {
		diags = append(diags, applyGiven(vars, given)...)
	}
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": varsObject(vars)},
		Functions: functions(l.tree, dir),
	}
	diags = append(diags, checkValidations(vars, ctx)...)
	locals, d := decodeLocals(localBlocks, ctx)
	diags = append(diags, d...)
	ctx.Variables["local"] = locals
	return ctx, vars, diags
}
