package firstboot

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/recipes"
)

// bundle stages a bundle as the build does: its destination (made when
// missing, an existing one left as it is), then every entry in order
// (directories with their modes, files embedded and checked, symlinks),
// owned by root. Before each entry, in_bundle refuses a path that goes
// through a symlink, or something not a directory, below the destination:
// the listing was checked as the recipe loader checks it
// (recipes.CheckBundleEntries), and the host is checked as it is. The
// files are read from the bundle's source now and checked against the
// plan, so a bundle changed since the plan was made fails here rather
// than shipping unplanned bytes.
func (g *gen) bundle(s steps.StageBundle) error {
	if err := recipes.CheckBundleEntries(s.Entries); err != nil {
		return fmt.Errorf("staging bundle %s: %w", s.Name, err)
	}
	files, err := readBundle(g, s)
	if err != nil {
		return fmt.Errorf("staging bundle %s: %w", s.Name, err)
	}
	if err := g.line("bundle_dest %s", g.q(s.Destination)); err != nil {
		return err
	}
	for _, e := range s.Entries {
		p := path.Join(s.Destination, e.Path)
		if strings.Contains(e.Path, "/") {
			if err := g.line("in_bundle %s %s", g.q(s.Destination), g.q(e.Path)); err != nil {
				return err
			}
		}
		switch e.Type {
		case "dir":
			err = g.line("put_dir %s %s", g.q(p), fsmode.String(e.Mode))
		case "symlink":
			err = g.line("put_link %s %s", g.q(p), g.q(e.Target))
		case "file":
			err = g.putFile(p, e.Mode, "root:root", e.SHA256, files[e.Path])
		default:
			err = fmt.Errorf("entry %s: unknown type %q", e.Path, e.Type)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readBundle reads the content of a bundle's files from its source (a
// directory or a tarball), each bounded by the size the plan recorded and
// checked against its sha256 (recipes.CopyBundle).
func readBundle(g *gen, s steps.StageBundle) (map[string][]byte, error) {
	var entries []steps.BundleEntry
	for _, e := range s.Entries {
		if e.Type == "file" {
			entries = append(entries, e)
		}
	}
	bufs := map[string]*bytes.Buffer{}
	err := recipes.CopyBundle(g.ctx, s, entries, func(e steps.BundleEntry) (io.Writer, error) {
		bufs[e.Path] = new(bytes.Buffer)
		return bufs[e.Path], nil
	})
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(bufs))
	for p, b := range bufs {
		files[p] = b.Bytes()
	}
	return files, nil
}
