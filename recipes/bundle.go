package recipes

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// BundleEntry is one entry of a bundle, as the build's StageBundle step
// will stage it under the bundle's destination (always owned by root):
// reading a bundle lists the step's entries.
type BundleEntry = steps.BundleEntry

// readBundle lists a bundle's entries with their hashes and computes its
// digest: the sha256 of the tarball's bytes for a tarball, and for a
// directory the sha256 of its canonical listing (see listingDigest).
func readBundle(b *Bundle) ([]BundleEntry, string, error) {
	entries, d, err := readBundleEntries(b)
	if err != nil {
		return nil, "", err
	}
	if err := CheckBundleEntries(entries); err != nil {
		return nil, "", fmt.Errorf("%s: %w", b.Path, err)
	}
	return entries, d, nil
}

// CheckBundleEntries refuses a listing that no executor can stage inside
// the bundle's destination: a name that is not clean and relative, an
// entry at or under an earlier symlink entry (staged in order, it would
// be written through the link, wherever it points), and a symlink that
// replaces an earlier entry. The build (tar) and the first-boot script
// (builder/firstboot) both stage a bundle this check passed.
func CheckBundleEntries(entries []BundleEntry) error {
	links, seen := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		p := e.Path
		if p == "" || p == "." || path.Clean(p) != p || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			return fmt.Errorf("entry %q is not a clean relative name", p)
		}
		for q := p; q != "."; q = path.Dir(q) {
			if links[q] {
				return fmt.Errorf("entry %q lies at or under the symlink entry %q: it would be staged through the link", p, q)
			}
		}
		if e.Type == "symlink" {
			if seen[p] {
				return fmt.Errorf("symlink entry %q replaces an earlier entry of the same name", p)
			}
			links[p] = true
		}
		seen[p] = true
	}
	return nil
}

// CopyBundle reads a planned bundle again from its source for an executor
// to stage it: s.SourcePath, a directory, or a tarball when s.Archive. It
// calls to once for each of entries (the step's, or some of them), in the
// source's order (a tarball's, a directory's by path), and copies a file
// entry's content into the writer to returns (for other entries it is not
// used), reading at most the size the plan recorded and checking it and
// the sha256: a bundle changed since the plan was made fails here rather
// than shipping unplanned bytes. In a tarball the first entry of a name
// counts, and a file entry is a regular file's.
func CopyBundle(ctx context.Context, s steps.StageBundle, entries []BundleEntry, to func(e BundleEntry) (io.Writer, error)) error {
	want := map[string]BundleEntry{}
	for _, e := range entries {
		want[e.Path] = e
	}
	one := func(e BundleEntry, r io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		delete(want, e.Path)
		w, err := to(e)
		if err != nil || e.Type != "file" {
			return err
		}
		d, err := digest.Copy(ctx, w, io.LimitReader(r, e.Size+1), nil)
		if err != nil {
			return fmt.Errorf("copying %s: %w", e.Path, err)
		}
		if d.Size != e.Size || !d.Matches(e.SHA256) {
			return fmt.Errorf("%s changed since the plan was made", e.Path)
		}
		return nil
	}
	var err error
	if s.Archive {
		err = copyTarBundle(s.SourcePath, want, one)
	} else {
		err = copyDirBundle(s.SourcePath, want, one)
	}
	if err != nil {
		return err
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		return fmt.Errorf("%s disappeared since the plan was made", p)
	}
	return nil
}

// copyDirBundle calls one for each wanted entry of the directory bundle
// dir, by path, with its file opened when it is a file entry.
func copyDirBundle(dir string, want map[string]BundleEntry, one func(BundleEntry, io.Reader) error) error {
	for _, p := range slices.Sorted(maps.Keys(want)) {
		e := want[p]
		if e.Type != "file" {
			if err := one(e, nil); err != nil {
				return err
			}
			continue
		}
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		err = one(e, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// tarStream is the tar stream of the tarball p read from r: gunzipped
// when p's name ends in .gz or .tgz.
func tarStream(r io.Reader, p string) (io.Reader, error) {
	if strings.HasSuffix(p, ".gz") || strings.HasSuffix(p, ".tgz") {
		return gzip.NewReader(r)
	}
	return r, nil
}

// copyTarBundle calls one for each wanted entry of the tarball p, in its
// order, with the tar reader at the entry's content.
func copyTarBundle(p string, want map[string]BundleEntry, one func(BundleEntry, io.Reader) error) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := tarStream(f, p)
	if err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		e, ok := want[strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")]
		if !ok || (e.Type == "file" && hdr.Typeflag != tar.TypeReg) {
			continue
		}
		if err := one(e, tr); err != nil {
			return err
		}
	}
}

func readBundleEntries(b *Bundle) ([]BundleEntry, string, error) {
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
	h := digest.NewWriter(nil)
	for _, e := range sorted {
		ref := e.SHA256
		if e.Type == "symlink" {
			ref = e.Target
		}
		fmt.Fprintf(h, "%s %s %d %s %s\n", e.Type, fsmode.String(e.Mode), e.Size, ref, e.Path)
	}
	return h.Digest().String()
}

func readTarBundle(p string) ([]BundleEntry, string, error) {
	f, err := readlimit.Open(p)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	whole := digest.NewWriter(nil)
	r, err := tarStream(io.TeeReader(f, whole), p)
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", p, err)
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
	return entries, whole.Digest().String(), nil
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

// A dry run shows the plan of a recipe whose bundles are not at hand (the
// design's own example, imagectl build recipes/h200.hcl --dry-run, on a fresh
// clone): a variable without a value that only bundle sources use leaves
// those bundles unresolved, and one warning says what a build needs.

// bundleOnlyVariables names the variables that the recipe in body uses in
// bundle sources and nowhere else: only those may stay without a value in a
// dry run. A reference it cannot name (var["x"], var itself) makes it name
// none.
func bundleOnlyVariables(body hcl.Body) map[string]bool {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return nil
	}
	var sources []hcl.Range
	for _, img := range sb.Blocks {
		if img.Type != "image" {
			continue
		}
		for _, b := range img.Body.Blocks {
			if at, ok := b.Body.Attributes["source"]; ok && b.Type == "bundle" {
				sources = append(sources, at.Expr.Range())
			}
		}
	}
	inSource := func(r hcl.Range) bool {
		for _, s := range sources {
			if s.Start.Byte <= r.Start.Byte && r.End.Byte <= s.End.Byte {
				return true
			}
		}
		return false
	}
	only, elsewhere, unnamed := map[string]bool{}, map[string]bool{}, false
	hclsyntax.VisitAll(sb, func(n hclsyntax.Node) hcl.Diagnostics {
		e, ok := n.(*hclsyntax.ScopeTraversalExpr)
		if !ok || e.Traversal.RootName() != "var" {
			return nil
		}
		var at hcl.TraverseAttr
		if len(e.Traversal) > 1 {
			at, ok = e.Traversal[1].(hcl.TraverseAttr)
		}
		switch {
		case !ok || len(e.Traversal) < 2:
			unnamed = true
		case inSource(e.SrcRange):
			only[at.Name] = true
		default:
			elsewhere[at.Name] = true
		}
		return nil
	})
	if unnamed {
		return nil
	}
	for name := range elsewhere {
		delete(only, name)
	}
	return only
}

// unsetIn names, sorted, the variables without a value (a dry run's) that
// the attribute's expression uses.
func (l *loader) unsetIn(a attrs, name string) []string {
	at, ok := a.m[name]
	if !ok || len(l.unset) == 0 {
		return nil
	}
	var needs []string
	for _, tr := range at.Expr.Variables() {
		if len(tr) < 2 || tr.RootName() != "var" {
			continue
		}
		if ref, ok := tr[1].(hcl.TraverseAttr); ok && l.unset[ref.Name] && !slices.Contains(needs, ref.Name) {
			needs = append(needs, ref.Name)
		}
	}
	sort.Strings(needs)
	return needs
}

// written is the attribute's expression as the recipe writes it, without
// the quotes of a string: "${var.site_bootstrap_dir}/h200-ib".
func (l *loader) written(a attrs, name string) string {
	rng := a.rng(name)
	f := l.parser.files[rng.Filename]
	if f == nil {
		return ""
	}
	s := string(rng.SliceBytes(f.Bytes))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	return s
}

// unresolvedWarning is the one warning of a dry run with unresolved
// bundles: which bundles, and the values a build needs. It is nil when every
// bundle is resolved.
func unresolvedWarning(vars []*Variable, img *Image) *hcl.Diagnostic {
	var bundles []string
	for _, b := range img.Bundles {
		if b.Unresolved != "" {
			bundles = append(bundles, strconv.Quote(b.Name))
		}
	}
	var unset []*Variable
	for _, v := range vars {
		if v.Source == "unset" {
			unset = append(unset, v)
		}
	}
	if len(bundles) == 0 || len(unset) == 0 {
		return nil
	}
	var names, flags, envs []string
	for _, v := range unset {
		names = append(names, v.Name)
		flags = append(flags, fmt.Sprintf("-var %s=...", v.Name))
		envs = append(envs, EnvPrefix+v.Name)
	}
	plural := func(n int, one, many string) string {
		if n == 1 {
			return one
		}
		return many
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  fmt.Sprintf("No value for %s %s: %s unresolved", plural(len(unset), "variable", "variables"), joinQuoted(names), plural(len(bundles), "bundle", "bundles")),
		Detail: fmt.Sprintf("This dry run shows %s %s unresolved, without digest or files. A build needs %s: set %s with %s, in a -var-file, or with the environment %s %s.",
			plural(len(bundles), "bundle", "bundles"), strings.Join(bundles, ", "), joinVars(names), plural(len(unset), "it", "them"),
			strings.Join(flags, " "), plural(len(unset), "variable", "variables"), strings.Join(envs, ", ")),
		Subject: unset[0].DeclRange.Ptr(),
	}
}

// joinVars writes names as var.a, var.b.
func joinVars(names []string) string {
	return "var." + strings.Join(names, ", var.")
}

func joinQuoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
