package recipes

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/hclkit"
)

// Options control how a recipe is loaded.
type Options struct {
	Inputs Inputs
	// Roots are extra directory trees that file, bundle and key sources may
	// come from, beside the tree of the file that names them.
	Roots []string
	// DryRun loads the recipe for a plan that is only shown: a variable
	// without a value that only bundle sources use leaves those bundles
	// unresolved (Bundle.Unresolved), with one warning naming what a build
	// needs, instead of failing. A build refuses such a recipe.
	DryRun bool
}

// Parser loads recipes and keeps every file it read (recipe, layer files,
// var files) so that diagnostics can show snippets of them.
type Parser struct {
	files map[string]*hcl.File
}

// NewParser returns a Parser with no files loaded.
func NewParser() *Parser { return &Parser{files: map[string]*hcl.File{}} }

// Files returns the files read so far, by name, for hclkit.WriteDiagnostics.
func (p *Parser) Files() map[string]*hcl.File { return p.files }

// parseFile parses an HCL file through hclkit.ParseConfig (and so the input
// limits), once per name: a file read again (a layer file two layers use)
// is the file already parsed, and its errors are not reported twice. A file
// refused by the limits is kept without a body, for snippets.
func (p *Parser) parseFile(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	if f := p.files[filename]; f != nil {
		return f, nil
	}
	f, diags := hclkit.ParseConfig(src, filename)
	if f == nil {
		f = &hcl.File{Body: hcl.EmptyBody(), Bytes: src}
	}
	p.files[filename] = f
	return f, diags
}

// interrupted is the diagnostic of a load that its context ended.
func interrupted(ctx context.Context) hcl.Diagnostics {
	if err := ctx.Err(); err != nil {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Interrupted", Detail: fmt.Sprintf("Loading stopped: %v.", context.Cause(ctx))}}
	}
	return nil
}

// Load is LoadFile under a context: it returns ctx.Err() as soon as ctx is
// done, whatever the load is doing (reading a FIFO, parsing a large file),
// with neither recipe nor diagnostics. The load goes on in the background
// until its next step, on a parser of its own: p is left as it was.
func (p *Parser) Load(ctx context.Context, path string, opts Options) (*Recipe, hcl.Diagnostics, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	type result struct {
		r     *Recipe
		diags hcl.Diagnostics
		files map[string]*hcl.File
	}
	done := make(chan result, 1)
	go func() {
		q := NewParser()
		r, diags := q.loadFile(ctx, path, opts)
		done <- result{r, diags, q.files}
	}()
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case res := <-done:
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		for name, f := range res.files {
			if p.files[name] == nil {
				p.files[name] = f
			}
		}
		return res.r, res.diags, nil
	}
}

// LoadFile reads, decodes and checks the recipe at path. The recipe is nil
// when diags has errors; all errors found are in diags.
func (p *Parser) LoadFile(path string, opts Options) (*Recipe, hcl.Diagnostics) {
	return p.loadFile(context.Background(), path, opts)
}

// loadFile is LoadFile that stops between files, with an "Interrupted"
// error, once ctx is done.
func (p *Parser) loadFile(ctx context.Context, path string, opts Options) (*Recipe, hcl.Diagnostics) {
	src, err := hclkit.ReadInput(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read recipe", Detail: err.Error() + "."}}
	}
	return p.loadSource(ctx, path, src, opts)
}

// LoadSource is LoadFile with the recipe's bytes already in hand; path
// still locates the recipe's directory for relative paths.
func (p *Parser) LoadSource(path string, src []byte, opts Options) (*Recipe, hcl.Diagnostics) {
	return p.loadSource(context.Background(), path, src, opts)
}

// loadSource is LoadSource that stops between files once ctx is done.
func (p *Parser) loadSource(ctx context.Context, path string, src []byte, opts Options) (*Recipe, hcl.Diagnostics) {
	absPath, err := filepath.Abs(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot locate recipe", Detail: err.Error()}}
	}
	file, diags := p.parseFile(src, path)
	if diags.HasErrors() {
		return nil, diags
	}
	if d := notARecipe(file, path); d != nil {
		return nil, append(diags, d)
	}
	r := &Recipe{Path: path, Dir: filepath.Dir(absPath), Digest: digest.Bytes(src).String()}
	var roots []string
	for _, root := range opts.Roots {
		if abs, err := filepath.Abs(root); err == nil {
			roots = append(roots, abs)
		}
	}
	l := &loader{parser: p, tree: tree{extra: roots}, recipePath: absPath, recipeDir: r.Dir}
	if opts.DryRun {
		l.unset = bundleOnlyVariables(file.Body)
	}

	content, d := file.Body.Content(recipeSchema)
	diags = append(diags, d...)

	eval, vars, d := l.scope(ctx, content.Blocks, r.Dir, opts.Inputs, nil)
	diags = append(diags, d...)
	r.Variables = vars
	for _, v := range vars {
		if v.Source != "unset" {
			delete(l.unset, v.Name)
		}
	}

	var images hcl.Blocks
	for _, b := range content.Blocks {
		if b.Type == "image" {
			images = append(images, b)
		}
	}
	switch {
	case len(images) == 0:
		start := hcl.Range{Filename: path, Start: hcl.InitialPos, End: hcl.InitialPos}
		diags = append(diags, hclkit.ErrorAt(start, "Missing image block",
			`A recipe needs one image "<name>" { ... } block.`))
	default:
		for _, extra := range images[1:] {
			diags = append(diags, hclkit.ErrorAt(extra.DefRange, "Duplicate image block",
				fmt.Sprintf("A recipe builds one image; the first image block is at %s.", images[0].DefRange)))
		}
		img, d := l.decodeImage(ctx, images[0], eval)
		diags = append(diags, d...)
		r.Image = img
		if d := unresolvedWarning(vars, img); d != nil {
			diags = append(diags, d)
		}
	}
	diags = append(diags, interrupted(ctx)...)
	if diags.HasErrors() {
		return nil, diags
	}
	return r, diags
}

// notARecipe recognises a layer file given where a recipe is expected: no
// image block, and what only a layer file holds at its top level (packages,
// run, apt_repository, file, services). It returns the one diagnostic that
// says so, in place of one per layer attribute, or nil.
func notARecipe(file *hcl.File, path string) *hcl.Diagnostic {
	rc, _, _ := file.Body.PartialContent(recipeSchema)
	for _, b := range rc.Blocks {
		if b.Type == "image" {
			return nil
		}
	}
	lc, _, _ := file.Body.PartialContent(layerFileSchema)
	var first *hcl.Range
	for _, at := range lc.Attributes {
		if first == nil || at.NameRange.Start.Byte < first.Start.Byte {
			first = at.NameRange.Ptr()
		}
	}
	for _, b := range lc.Blocks {
		if b.Type == "variable" || b.Type == "locals" {
			continue
		}
		if first == nil || b.DefRange.Start.Byte < first.Start.Byte {
			first = b.DefRange.Ptr()
		}
	}
	if first == nil {
		return nil
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "This is a layer file",
		Detail: fmt.Sprintf("%s holds a layer (packages, repositories, files, services, commands) and no image block: it is a layer file, not a recipe. "+
			"Layer files are validated through the recipe that uses them: imagectl validate RECIPE, where RECIPE's image has layer \"<name>\" { source = \".../%s\" }.",
			path, filepath.Base(path)),
		Subject: first,
	}
}

// loader carries what decoding one recipe needs.
type loader struct {
	parser     *Parser
	tree       tree
	recipePath string
	recipeDir  string
	// unset are the variables a dry run may leave without a value
	// (Options.DryRun): those only bundle sources use.
	unset map[string]bool
}

// scope decodes the variable and locals blocks of one file (a recipe or a
// layer file), resolves the variables from inputs (recipe) or given values
// (layer file), and returns the evaluation context for the rest of the file.
func (l *loader) scope(loadCtx context.Context, blocks hcl.Blocks, dir string, in Inputs, given *givenValues) (*hcl.EvalContext, []*Variable, hcl.Diagnostics) {
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
				diags = append(diags, hclkit.ErrorAt(b.LabelRanges[0], "Duplicate variable",
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
		diags = append(diags, resolveVariables(loadCtx, l.parser, vars, in, l.unset)...)
	} else {
		diags = append(diags, applyGiven(vars, given)...)
	}
	registerSensitive(vars, in)
	fns := functions(l.tree, dir)
	plain := &hcl.EvalContext{Variables: map[string]cty.Value{"var": varsObject(vars, false)}, Functions: fns}
	diags = append(diags, checkValidations(vars, plain)...)
	// The rest of the file sees where values came from (origin.go).
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": varsObject(vars, true)}, Functions: fns}
	locals, d := decodeLocals(localBlocks, ctx)
	diags = append(diags, d...)
	ctx.Variables["local"] = locals
	return ctx, vars, diags
}
