package recipes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
)

// givenValues are the values a layer block passes to the variables of its
// layer file (variables = { ... }); anchor is that attribute, or the block.
type givenValues struct {
	vals   map[string]cty.Value
	rng    hcl.Range
	anchor hcl.Range
}

// applyGiven resolves a layer file's variables from the values its layer
// block passes, the layer file's own defaults below them.
func applyGiven(vars []*Variable, given *givenValues) hcl.Diagnostics {
	var diags hcl.Diagnostics
	byName, names := applyDefaults(vars)
	for name, val := range given.vals {
		v := byName[name]
		if v == nil {
			d := undeclared(name, names, given.rng.Ptr())
			d.Detail = strings.Replace(d.Detail, "The recipe declares", "The layer file declares", 1)
			diags = append(diags, d)
			continue
		}
		val, marks := val.UnmarkDeepWithPaths()
		cv, err := convertValue(val, v.Type)
		if err != nil {
			diags = append(diags, hclkit.ErrorAt(given.rng, "Invalid value for layer variable",
				fmt.Sprintf("The value for %q is not a valid %s: %s.", name, typeexpr.TypeString(v.Type), err)))
			v.Value = cty.DynamicVal
			continue
		}
		v.Value, v.Source, v.origin = cv, "layer block", cv.MarkWithPaths(marks)
	}
	return append(diags, requireValues(vars, func(v *Variable) *hcl.Diagnostic {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("No value for layer variable %q", v.Name),
			Detail:   fmt.Sprintf("The layer file declares %q without a default; pass it with variables = { %s = ... } in the layer block.", v.Name, v.Name),
			Subject:  given.anchor.Ptr(),
			Context:  v.DeclRange.Ptr(),
		}
	})...)
}

// decodeLayer decodes a layer block of an image: inline content, or a layer
// file named by source.
func (l *loader) decodeLayer(loadCtx context.Context, block *hcl.Block, ctx *hcl.EvalContext) (*Layer, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	layer := &Layer{Name: block.Labels[0], DeclRange: block.DefRange, Enabled: true}
	if msg := checkName("layer", layer.Name); msg != "" {
		diags = append(diags, hclkit.ErrorAt(block.LabelRanges[0], "Invalid layer name", msg))
	}
	content, a := decodeBody(block.Body, layerBlockSchema, ctx, &diags)
	layer.NoRecommends = !a.boolean("install_recommends", true)

	if !a.has("source") {
		if a.has("variables") {
			a.errorAt("variables", "Variables without a layer file", "variables = { ... } passes values to a layer file's variables; this layer has no source.")
		}
		diags = append(diags, l.decodeLayerContent(layer, content, ctx, l.recipeDir)...)
		return layer, diags
	}

	// Content from a layer file: nothing else may be written beside source.
	for name := range content.Attributes {
		switch name {
		case "source", "variables", "enabled", "description", "install_recommends":
		default:
			diags = append(diags, hclkit.ErrorAt(content.Attributes[name].NameRange, "Layer content beside source",
				fmt.Sprintf("This layer takes its content from its source file; move %q into that file or into a layer of its own.", name)))
		}
	}
	for _, b := range content.Blocks {
		diags = append(diags, hclkit.ErrorAt(b.DefRange, "Layer content beside source",
			fmt.Sprintf("This layer takes its content from its source file; move the %s block into that file or into a layer of its own.", b.Type)))
	}
	layer.Enabled = a.boolean("enabled", true)
	layer.Description = a.str("description", "")
	src, userPath := a.path("source")
	if src == "" {
		return layer, diags
	}
	if !strings.HasSuffix(src, ".hcl") {
		diags = append(diags, hclkit.ErrorAt(*a.rng("source"), "Invalid layer file name",
			fmt.Sprintf("%q does not end in .hcl; a layer source is an HCL layer file.", src)))
		return layer, diags
	}
	abs := located(l.recipeDir, src, userPath)
	if abs == l.recipePath {
		diags = append(diags, hclkit.ErrorAt(*a.rng("source"), "Layer imports itself",
			"The layer source is the recipe itself; a layer source must be a layer file."))
		return layer, diags
	}
	if d := interrupted(loadCtx); d != nil {
		return layer, append(diags, d...)
	}
	srcBytes, err := hclkit.ReadInput(abs)
	if err != nil {
		summary, detail := "Missing layer file", fmt.Sprintf("Cannot read layer file %s: %v.", src, err)
		switch {
		case os.IsNotExist(err):
			detail = fmt.Sprintf("The layer file %s does not exist (looked for %s).", src, abs)
		case hclkit.IsTooLarge(err):
			summary = "Layer file too large"
		}
		diags = append(diags, hclkit.ErrorAt(*a.rng("source"), summary, detail))
		return layer, diags
	}
	display := displayPath(l, abs)
	file, d := l.parser.parseFile(srcBytes, display)
	diags = append(diags, d...)
	if d.HasErrors() {
		return layer, diags
	}
	layer.File = relTo(l.recipeDir, abs)
	layer.FileDigest = digest.Bytes(srcBytes).String()

	fileContent, d := file.Body.Content(layerFileSchema)
	diags = append(diags, d...)
	given := &givenValues{vals: map[string]cty.Value{}, anchor: *a.rng("source")}
	if a.has("variables") {
		given.rng = *a.rng("variables")
		given.anchor = given.rng
		if m, ok := a.anyMap("variables"); ok {
			given.vals = m
		}
	}
	fileCtx, _, d := l.scope(loadCtx, fileContent.Blocks, filepath.Dir(abs), Inputs{}, given)
	diags = append(diags, d...)
	enabled, description := layer.Enabled, layer.Description
	diags = append(diags, l.decodeLayerContent(layer, fileContent, fileCtx, filepath.Dir(abs))...)
	layer.Enabled = enabled && layer.Enabled
	if description != "" {
		layer.Description = description
	}
	return layer, diags
}

// displayPath names a file for diagnostics the way the user named the
// recipe: relative to the working directory when the recipe was.
func displayPath(l *loader, abs string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, abs); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return abs
}

func relTo(dir, p string) string {
	if rel, err := filepath.Rel(dir, p); err == nil {
		return filepath.ToSlash(rel)
	}
	return p
}

// decodeLayerContent decodes what a layer holds, from a layer block or a
// layer file's top level; dir is that file's directory.
func (l *loader) decodeLayerContent(layer *Layer, content *hcl.BodyContent, ctx *hcl.EvalContext, dir string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	a := newAttrs(content, ctx, &diags)
	layer.Description = a.str("description", layer.Description)
	layer.Enabled = a.boolean("enabled", layer.Enabled)
	layer.Packages = checkedPackages(a, "packages", &diags)
	layer.OptionalPackages = checkedPackages(a, "optional_packages", &diags)
	layer.Run = a.checkedList("run", "Empty command", func(cmd string) string {
		if strings.TrimSpace(cmd) == "" {
			return "A run command is empty."
		}
		return ""
	})

	repos, files := newLabels("Apt repository", " in this layer"), newLabels("File", " in this layer")
	var services *hcl.Block
	for _, b := range content.Blocks {
		switch b.Type {
		case "apt_repository":
			decodeLabeled(&layer.Repositories, repos, b, &diags, func() (*AptRepository, hcl.Diagnostics) { return l.decodeAptRepository(b, ctx, dir) })
		case "file":
			if msg := checkImagePath(b.Labels[0]); msg != "" {
				diags = append(diags, hclkit.ErrorAt(b.LabelRanges[0], "Invalid file path", msg))
			}
			decodeLabeled(&layer.Files, files, b, &diags, func() (*File, hcl.Diagnostics) { return l.decodeFile(b, ctx, dir) })
		case "services":
			if services != nil {
				diags = append(diags, hclkit.ErrorAt(b.DefRange, "Duplicate services block",
					fmt.Sprintf("A layer has one services block; the first is at %s.", services.DefRange)))
				continue
			}
			services = b
			_, sa := decodeBody(b.Body, servicesSchema, ctx, &diags)
			layer.Services.Enable = checkedUnits(sa, "enable")
			layer.Services.Disable = checkedUnits(sa, "disable")
			enabled := map[string]bool{}
			for _, u := range layer.Services.Enable {
				enabled[u] = true
			}
			for _, u := range layer.Services.Disable {
				if enabled[u] {
					sa.errorAt("disable", "Service both enabled and disabled", fmt.Sprintf("%q is in both enable and disable.", u))
				}
			}
		}
	}
	return diags
}

func checkedPackages(a attrs, name string, diags *hcl.Diagnostics) []string {
	pkgs, ranges := a.strList(name)
	seen := map[string]bool{}
	for i, p := range pkgs {
		if msg := checkPackage(p); msg != "" {
			summary := "Invalid package name"
			if strings.TrimSpace(p) == "" {
				summary = "Empty package name"
			}
			*diags = append(*diags, hclkit.ErrorAt(ranges[i], summary, msg))
			continue
		}
		if seen[p] {
			*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Duplicate package",
				Detail: fmt.Sprintf("%q is listed twice in %s.", p, name), Subject: ranges[i].Ptr()})
		}
		seen[p] = true
	}
	return pkgs
}

func checkedUnits(a attrs, name string) []string {
	return a.checkedList(name, "Invalid service name", checkUnit)
}

func (l *loader) decodeAptRepository(b *hcl.Block, ctx *hcl.EvalContext, dir string) (*AptRepository, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	repo := &AptRepository{Name: b.Labels[0], Enabled: true}
	if msg := checkName("apt repository", repo.Name); msg != "" {
		diags = append(diags, hclkit.ErrorAt(b.LabelRanges[0], "Invalid apt repository name", msg))
	}
	_, a := decodeBody(b.Body, aptRepositorySchema, ctx, &diags)
	repo.Enabled = a.boolean("enabled", true)
	repo.URI = a.str("uri", "")
	if repo.URI != "" {
		if msg := checkHTTPURL(repo.URI); msg != "" {
			a.errorAt("uri", "Invalid repository URI", msg)
		}
	}
	repo.Suite = a.str("suite", "")
	repo.Components, _ = a.strList("components")
	switch {
	case !a.ok("suite"):
	case repo.Suite == "":
		a.errorAt("suite", "Empty suite", `Give the suite (such as "noble"), or "./" or a path ending in "/" for a flat repository.`)
	case strings.HasSuffix(repo.Suite, "/") && len(repo.Components) > 0:
		a.errorAt("components", "Components in a flat repository", "A suite ending in \"/\" names a flat repository, which has no components.")
	case !strings.HasSuffix(repo.Suite, "/") && len(repo.Components) == 0 && !a.failed["components"]:
		a.errorAt("suite", "Missing components", `A suite that is not a flat repository path needs components, such as ["main"].`)
	}
	for _, c := range repo.Components {
		if c == "" || strings.ContainsAny(c, " \t/") {
			a.errorAt("components", "Invalid component", fmt.Sprintf("%q is not an apt component name.", c))
		}
	}
	key, userPath := a.path("key")
	switch {
	case !a.ok("key"):
	case strings.Contains(key, "://"):
		if !strings.HasPrefix(key, "https://") {
			a.errorAt("key", "Insecure key URL", "A signing key must be fetched over https.")
		} else if msg := checkHTTPURL(key); msg != "" {
			a.errorAt("key", "Invalid key URL", msg)
		}
		repo.Key.URL = key
	case key != "":
		// Keys of disabled repositories are not read: their files may be
		// absent on purpose.
		if !repo.Enabled {
			repo.Key.Display = key
			break
		}
		content, _, err := l.tree.readSource(dir, key, userPath, hclkit.MaxInputSize)
		if err != nil {
			diags = append(diags, sourceDiag("key file", a.rng("key"), err))
			break
		}
		repo.Key.Display, repo.Key.Content = key, content
	default:
		a.errorAt("key", "Empty key", "Give the signing key as an https URL or a file in the recipe's tree.")
	}
	return repo, diags
}

func (l *loader) decodeFile(b *hcl.Block, ctx *hcl.EvalContext, dir string) (*File, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	f := &File{Path: b.Labels[0]}
	_, a := decodeBody(b.Body, fileSchema, ctx, &diags)

	var given []string
	for _, n := range []string{"content", "source", "template"} {
		if a.has(n) {
			given = append(given, n)
		}
	}
	// Point at whichever of them comes second in the file.
	sort.Slice(given, func(i, j int) bool { return a.rng(given[i]).Start.Byte < a.rng(given[j]).Start.Byte })
	switch len(given) {
	case 0:
		diags = append(diags, hclkit.ErrorAt(b.DefRange, "Missing file content",
			"A file needs exactly one of content, source or template."))
	case 1:
	default:
		a.errorAt(given[1], "Conflicting file content",
			fmt.Sprintf("A file takes exactly one of content, source or template; this one has %s.", strings.Join(given, " and ")))
	}
	if a.has("vars") && !a.has("template") {
		a.errorAt("vars", "Template variables without a template", "vars are the variables of a template; this file has no template.")
	}
	if len(given) == 1 {
		switch given[0] {
		case "content":
			if a.ok("content") {
				f.Content = []byte(a.str("content", ""))
				f.Origin = "content"
			}
		case "source":
			src, userPath := a.path("source")
			if !a.ok("source") {
				break
			}
			if b, _, err := l.tree.readSource(dir, src, userPath, maxResultBytes); err != nil {
				diags = append(diags, sourceDiag("file source", a.rng("source"), err))
			} else {
				f.Content, f.Origin = b, "source "+src
			}
		case "template":
			tpl, userPath := a.path("template")
			if !a.ok("template") {
				break
			}
			vars := cty.EmptyObjectVal
			if m, ok := a.anyMap("vars"); ok {
				vars = cty.ObjectVal(m)
			}
			v, err := renderTemplate(l.tree, dir, tpl, userPath, vars, ctx.Functions)
			if err != nil {
				if _, _, rerr := l.tree.readSource(dir, tpl, userPath, hclkit.MaxInputSize); rerr != nil {
					diags = append(diags, sourceDiag("template", a.rng("template"), rerr))
				} else {
					a.errorAt("template", "Cannot render template", err.Error()+".")
				}
			} else {
				f.Content, f.Origin = []byte(v.AsString()), "template "+tpl
			}
		}
	}
	mode := a.str("mode", "0644")
	m, msg := parseMode(mode)
	if msg != "" {
		a.errorAt("mode", "Invalid file mode", msg)
	}
	f.Mode = fsmode.FromUnix(m)
	f.Owner = a.str("owner", "root:root")
	if msg := checkOwner(f.Owner); msg != "" {
		a.errorAt("owner", "Invalid owner", msg)
	}
	return f, diags
}
