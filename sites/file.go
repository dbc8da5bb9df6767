package sites

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/hclkit"
)

// File is a parsed sites file.
type File struct {
	Sites  []*Site
	Groups []*Group
	// Files holds the parsed source for diagnostic snippets, with every
	// value written in it starred out (maskValues).
	Files map[string]*hcl.File
}

// fileSchema is the sites file's top level: site and group blocks.
var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "site", LabelNames: []string{"name"}}, {Type: "group", LabelNames: []string{"name"}}},
}

// PathEnv is the environment variable that names the sites file when the
// command line does not.
const PathEnv = "IMAGECTL_SITES"

// DefaultPath is the sites file read when neither the command line nor
// $IMAGECTL_SITES names one.
const DefaultPath = "sites.hcl"

// FilePath is the sites file to read: given (--sites), else
// $IMAGECTL_SITES in env (KEY=value pairs, as os.Environ), else
// ./sites.hcl.
func FilePath(given string, env []string) string {
	switch {
	case given != "":
		return given
	case environ.Get(env, PathEnv) != "":
		return environ.Get(env, PathEnv)
	}
	return DefaultPath
}

// Load reads and parses a sites file, within the input limits of
// every HCL file imagectl reads (hclkit.ReadInput, hclkit.ParseConfig).
func Load(path string) (*File, hcl.Diagnostics) {
	src, err := hclkit.ReadInput(path)
	if err != nil {
		return &File{Files: map[string]*hcl.File{}}, hcl.Diagnostics{{Severity: hcl.DiagError,
			Summary: "Cannot read sites file", Detail: fmt.Sprintf("Reading %s: %v.", path, err)}}
	}
	return Parse(src, path)
}

// Parse parses a sites file's content; filename is for diagnostics
// and resolves relative api_key_file paths.
func Parse(src []byte, filename string) (*File, hcl.Diagnostics) {
	out := &File{Files: map[string]*hcl.File{}}
	f, diags := hclkit.ParseConfig(src, filename)
	if diags.HasErrors() {
		out.Files[filename] = &hcl.File{Bytes: maskUnparsed(src)}
		return out, diags
	}
	// No value of the file is shown in a snippet: any may be a key or a
	// token written in the wrong place. Those written in clear are errors.
	shown := append([]byte(nil), src...)
	maskValues(f.Body.(*hclsyntax.Body), shown)
	checkClearSecrets(f.Body.(*hclsyntax.Body), &diags)
	out.Files[filename] = &hcl.File{Body: f.Body, Bytes: shown}
	if diags.HasErrors() {
		return out, diags
	}
	content, d := f.Body.Content(fileSchema)
	diags = append(diags, d...)
	seen := map[string]hcl.Range{}
	var declared []string
	for _, b := range content.Blocks {
		if b.Type == "site" {
			declared = append(declared, b.Labels[0])
		}
	}
	sort.Strings(declared)
	var groups []*hcl.Block
	for _, b := range content.Blocks {
		if b.Type == "group" {
			groups = append(groups, b)
			continue
		}
		if prev, dup := seen[b.Labels[0]]; dup {
			diags = append(diags, hclkit.ErrorAt(b.LabelRanges[0], "Duplicate site",
				fmt.Sprintf("Site %q is already declared at %s.", b.Labels[0], prev)))
			continue
		}
		seen[b.Labels[0]] = b.DefRange
		s, d := decodeSite(b, filepath.Dir(filename), declared)
		diags = append(diags, d...)
		if s != nil {
			out.Sites = append(out.Sites, s)
		}
	}
	for _, b := range groups {
		name := b.Labels[0]
		if prev, dup := seen[name]; dup {
			diags = append(diags, hclkit.ErrorAt(b.LabelRanges[0], "Duplicate site or group name",
				fmt.Sprintf("%q is already declared at %s: a group's name is used like a site's (--site), so it must differ from every site's and group's.", name, prev)))
			continue
		}
		seen[name] = b.DefRange
		g, d := decodeGroup(b, out, declared)
		diags = append(diags, d...)
		if g != nil {
			out.Groups = append(out.Groups, g)
		}
	}
	out.linkPolicies()
	return out, diags
}

// Site returns the named site; an unknown name is an error that lists the
// sites (and the closest one).
func (f *File) Site(name string) (*Site, error) {
	var names []string
	for _, s := range f.Sites {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	sort.Strings(names)
	groups := ""
	all := append([]string(nil), names...)
	if len(f.Groups) > 0 {
		var gs []string
		for _, g := range f.Groups {
			gs = append(gs, g.Name)
		}
		sort.Strings(gs)
		all = append(all, gs...)
		groups = "; groups: " + strings.Join(gs, ", ")
	}
	return nil, fmt.Errorf("no site %q in the sites file (sites: %s%s).%s", name, strings.Join(names, ", "), groups, closest(name, all))
}

// Group returns the named group, nil when there is none.
func (f *File) Group(name string) *Group {
	for _, g := range f.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// Resolve returns the sites that names (sites and groups) stand for, each
// once, in the order named; an unknown name is an error as Site's.
func (f *File) Resolve(names []string) ([]*Site, error) {
	var out []*Site
	seen := map[string]bool{}
	add := func(n string) error {
		if seen[n] {
			return nil
		}
		s, err := f.Site(n)
		if err != nil {
			return err
		}
		seen[n] = true
		out = append(out, s)
		return nil
	}
	for _, n := range names {
		if g := f.Group(n); g != nil {
			for _, m := range g.Sites {
				if err := add(m); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := add(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// linkPolicies gives each site the policies it is held to: its own, then
// its groups'.
func (f *File) linkPolicies() {
	for _, s := range f.Sites {
		s.Policies = nil
		if s.Policy != nil {
			s.Policies = append(s.Policies, s.Policy)
		}
		for _, g := range f.Groups {
			if g.Policy != nil && slices.Contains(g.Sites, s.Name) {
				s.Policies = append(s.Policies, g.Policy)
			}
		}
	}
}
