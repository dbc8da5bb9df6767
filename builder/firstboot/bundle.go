package firstboot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/digest"
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
// checked against its sha256.
func readBundle(g *gen, s steps.StageBundle) (map[string][]byte, error) {
	want := map[string]steps.BundleEntry{}
	for _, e := range s.Entries {
		if e.Type == "file" {
			want[e.Path] = e
		}
	}
	files := map[string][]byte{}
	read := func(e steps.BundleEntry, r io.Reader) error {
		if err := g.ctx.Err(); err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(r, e.Size+1))
		if err != nil {
			return fmt.Errorf("reading %s: %w", e.Path, err)
		}
		if int64(len(b)) != e.Size || !digest.Bytes(b).Matches(e.SHA256) {
			return fmt.Errorf("%s changed since the plan was made", e.Path)
		}
		files[e.Path] = b
		return nil
	}
	if !s.Archive {
		for p, e := range want {
			f, err := os.Open(filepath.Join(s.SourcePath, filepath.FromSlash(p)))
			if err != nil {
				return nil, err
			}
			err = read(e, f)
			f.Close()
			if err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	f, err := os.Open(s.SourcePath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(s.SourcePath, ".gz") || strings.HasSuffix(s.SourcePath, ".tgz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, err
		}
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		e, ok := want[name]
		if !ok || hdr.Typeflag != tar.TypeReg {
			continue
		}
		if _, done := files[name]; done {
			continue
		}
		if err := read(e, tr); err != nil {
			return nil, err
		}
	}
	for p := range want {
		if _, ok := files[p]; !ok {
			return nil, fmt.Errorf("%s disappeared since the plan was made", p)
		}
	}
	return files, nil
}
