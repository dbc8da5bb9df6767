package recipes

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// BundleEntry is one entry of a bundle, as it will be staged under the
// bundle's destination (always owned by root).
type BundleEntry struct {
	// Path is relative to the bundle's root, with forward slashes.
	Path string `json:"path"`
	// Type is "file", "dir" or "symlink".
	Type   string      `json:"type"`
	Mode   fs.FileMode `json:"-"`
	Size   int64       `json:"size,omitempty"`
	SHA256 string      `json:"sha256,omitempty"`
	Target string      `json:"target,omitempty"`
}

// readBundle lists a bundle's entries with their hashes and computes its
// digest: the sha256 of the tarball's bytes for a tarball, and for a
// directory the sha256 of its canonical listing (see listingDigest).
func readBundle(b *Bundle) ([]BundleEntry, string, error) {
	if b.Archive {
		return readTarBundle(b.Path)
	}
	var entries []BundleEntry
	err := filepath.WalkDir(b.Path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(b.Path, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := BundleEntry{Path: filepath.ToSlash(rel), Mode: info.Mode().Perm() | info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)}
		switch {
		case d.IsDir():
			e.Type = "dir"
		case info.Mode()&fs.ModeSymlink != 0:
			e.Type = "symlink"
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			e.Type = "file"
			f, err := readlimit.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			n, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("reading %s: %w", p, err)
			}
			e.Size, e.SHA256 = n, hex.EncodeToString(h.Sum(nil))
		default:
			return fmt.Errorf("%s is a %s: a bundle holds files, directories and symlinks only", p, info.Mode().Type())
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return entries, listingDigest(entries), nil
}

// listingDigest is the digest of a directory bundle: sha256 over one line per
// entry, "<type> <octal mode> <size> <sha256 or link target> <path>", in
// path order. It changes when any content, mode or name changes, and not
// with mtimes or the directory's location.
func listingDigest(entries []BundleEntry) string {
	sorted := append([]BundleEntry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	h := sha256.New()
	for _, e := range sorted {
		ref := e.SHA256
		if e.Type == "symlink" {
			ref = e.Target
		}
		fmt.Fprintf(h, "%s %s %d %s %s\n", e.Type, fsmode.String(e.Mode), e.Size, ref, e.Path)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func readTarBundle(p string) ([]BundleEntry, string, error) {
	f, err := readlimit.Open(p)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	whole := sha256.New()
	var r io.Reader = io.TeeReader(f, whole)
	if strings.HasSuffix(p, ".gz") || strings.HasSuffix(p, ".tgz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, "", fmt.Errorf("reading %s: %w", p, err)
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	var entries []BundleEntry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("reading %s: %w", p, err)
		}
		name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if name == "" {
			continue
		}
		if strings.HasPrefix(hdr.Name, "/") || strings.Contains("/"+hdr.Name+"/", "/../") {
			return nil, "", fmt.Errorf("%s: entry %q leaves the bundle directory", p, hdr.Name)
		}
		e := BundleEntry{Path: name, Mode: fsmode.FromUnix(uint32(hdr.Mode))}
		switch hdr.Typeflag {
		case tar.TypeDir:
			e.Type = "dir"
		case tar.TypeSymlink:
			e.Type, e.Target = "symlink", hdr.Linkname
		case tar.TypeReg:
			e.Type = "file"
			h := sha256.New()
			n, err := io.Copy(h, tr)
			if err != nil {
				return nil, "", fmt.Errorf("reading %s: %w", p, err)
			}
			e.Size, e.SHA256 = n, hex.EncodeToString(h.Sum(nil))
		default:
			return nil, "", fmt.Errorf("%s: entry %q is of a type a bundle cannot hold (files, directories and symlinks only)", p, hdr.Name)
		}
		entries = append(entries, e)
	}
	// Hash the rest of the file (tar padding) so the digest is the file's.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, "", err
	}
	if _, err := io.Copy(whole, f); err != nil {
		return nil, "", err
	}
	return entries, "sha256:" + hex.EncodeToString(whole.Sum(nil)), nil
}

// inspectBundle fills b.Entries and b.Digest and checks the digest against
// the recipe's checksum.
func inspectBundle(b *Bundle, checksumRange *hcl.Range, sourceRange *hcl.Range) hcl.Diagnostics {
	entries, digest, err := readBundle(b)
	if err != nil {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read bundle",
			Detail: fmt.Sprintf("Reading bundle %q: %s.", b.Name, err), Subject: sourceRange}}
	}
	b.Entries, b.Digest = entries, digest
	if b.Checksum != "" && b.Checksum != digest {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Bundle checksum mismatch",
			Detail:  fmt.Sprintf("Bundle %q has digest %s, not the %s the recipe expects.", b.Name, digest, b.Checksum),
			Subject: checksumRange}}
	}
	return nil
}
