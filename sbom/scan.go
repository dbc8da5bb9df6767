package sbom

import (
	"archive/tar"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/klauspost/pgzip"

	"github.com/gpuaas/imagectl/internal/readlimit"
)

const (
	// ctxEvery is how many tar entries Scan reads between context checks.
	ctxEvery = 256
	// maxLinks is how many symlinks Scan follows to resolve one path, and
	// how many further passes over the tgz it makes for hard links.
	maxLinks = 8
)

// Scan reads a packed tgz as a stream and returns its inventory. Nothing
// is extracted: the dpkg status file, the packages' copyright files,
// os-release and the apt sources are parsed as they pass (each within a
// bound), the wanted files hashed, and the symlinks under usr/share/doc and
// of os-release resolved once the stream has ended. Usually that is the
// one read; wanted hard links to earlier entries cost up to maxLinks more
// passes (below).
func Scan(ctx context.Context, tgz string, opts ScanOptions) (*Inventory, error) {
	f, err := readlimit.Open(tgz)
	if err != nil {
		return nil, fmt.Errorf("reading the SBOM's inventory: %w", err)
	}
	defer f.Close()
	s := newScanner(opts)
	if err := s.read(ctx, f); err != nil {
		return nil, fmt.Errorf("reading the SBOM's inventory from %s: %w", tgz, err)
	}
	if !s.hasStatus {
		return nil, fmt.Errorf("%s has no %s: not a Debian root filesystem", tgz, statusPath)
	}
	// A wanted hard link whose first copy passed unhashed: another pass
	// hashes just those first copies (and follows a hard link met there
	// to its own, in the pass after), at most maxLinks passes. Rare (a
	// recipe file hard linked from elsewhere), so the common build reads
	// the tgz once.
	for pass := 0; pass < maxLinks; pass++ {
		targets := s.unhashedTargets()
		if len(targets) == 0 {
			break
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("reading the SBOM's inventory from %s: %w", tgz, err)
		}
		again := newScanner(ScanOptions{Files: targets})
		again.hashOnly = true
		if err := again.read(ctx, f); err != nil {
			return nil, fmt.Errorf("reading the SBOM's inventory from %s again, for hard links: %w", tgz, err)
		}
		progress := false
		for _, t := range targets {
			if h, ok := again.hashed[t]; ok {
				s.linkTargets[t], progress = h, true
			} else if next, ok := again.hardlinks[t]; ok {
				s.linkHops[t], progress = next, true
			} else if again.wantedSymlinks[t] {
				s.wantedSymlinks[t], progress = true, true
			}
		}
		if !progress {
			break
		}
	}
	inv, err := s.inventory()
	if err != nil {
		return nil, fmt.Errorf("reading the SBOM's inventory from %s: %w", tgz, err)
	}
	return inv, nil
}

// scanner is what Scan keeps while the stream passes: parsed results keyed
// by normalized path (no leading "/" or "./"), never whole files.
type scanner struct {
	files map[string]bool // wanted files, normalized
	dirs  []string        // wanted directories, normalized
	// hashOnly: a further pass for hard links hashes the wanted files and
	// parses nothing (the first pass has the packages, licenses and OS).
	hashOnly bool

	hasStatus  bool
	packages   []Package
	copyrights map[string][]string // copyright file -> its License values
	osReleases map[string]OSRelease
	apt        map[string][]AptSource
	symlinks   map[string]string // symlink -> its target, as written
	hashed     map[string]File   // by normalized path in the tgz
	hardlinks  map[string]string // wanted hard link -> its target
	// linkTargets are unwanted files hashed for a wanted hard link to them,
	// linkHops the unwanted hard links met on the way to them.
	linkTargets map[string]File
	linkHops    map[string]string
	// wantedSymlinks are the wanted paths that are symlinks: not hashed,
	// and neither is a hard link to one.
	wantedSymlinks map[string]bool

	// Wanted paths found through a top-level symlink (merged /usr), so
	// that a file is reported under the path the recipe gave it; a path
	// asked for as it is in the tgz keeps it (askedFiles, askedDirs).
	fileAlias  map[string]string // path in the tgz -> path asked for
	dirAlias   [][2]string       // {directory in the tgz, directory asked for}
	askedFiles map[string]bool
	askedDirs  []string
}

func newScanner(opts ScanOptions) *scanner {
	s := &scanner{
		files:          map[string]bool{},
		copyrights:     map[string][]string{},
		osReleases:     map[string]OSRelease{},
		apt:            map[string][]AptSource{},
		symlinks:       map[string]string{},
		hashed:         map[string]File{},
		hardlinks:      map[string]string{},
		fileAlias:      map[string]string{},
		linkTargets:    map[string]File{},
		linkHops:       map[string]string{},
		wantedSymlinks: map[string]bool{},
	}
	s.askedFiles = map[string]bool{}
	for _, p := range opts.Files {
		s.files[normalize(p)] = true
		s.askedFiles[normalize(p)] = true
	}
	for _, d := range opts.Dirs {
		s.dirs = append(s.dirs, normalize(d))
	}
	s.askedDirs = append([]string(nil), s.dirs...)
	return s
}

// normalize makes a tar entry name or an image path relative to the root:
// "./var/lib/dpkg/status", "/var/lib/dpkg/status" and
// "var/lib/dpkg/status" are all "var/lib/dpkg/status"; ".." does not leave
// the root.
func normalize(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

// wanted reports whether a normalized path is one of the files to hash.
func (s *scanner) wanted(name string) bool {
	if s.files[name] {
		return true
	}
	for _, d := range s.dirs {
		if d == "" || strings.HasPrefix(name, d+"/") {
			return true
		}
	}
	return false
}

// remap follows a top-level symlink (merged /usr: lib -> usr/lib) for the
// wanted files and directories under it, so that a file the recipe wrote
// to /lib/... is found where the tgz holds it, under usr/lib/, and reported
// as /lib/... . The packer writes entries in name order, so the link comes
// before what it leads to.
func (s *scanner) remap(name, link string) {
	target := normalize(link) // relative to the root either way: name is top-level
	if target == "" || target == name {
		return
	}
	for f := range s.files {
		if rest, ok := strings.CutPrefix(f, name+"/"); ok {
			s.files[target+"/"+rest] = true
			s.fileAlias[target+"/"+rest] = f
		}
	}
	for _, d := range s.dirs {
		if rest, ok := strings.CutPrefix(d+"/", name+"/"); ok {
			found := strings.TrimSuffix(target+"/"+rest, "/")
			s.dirs = append(s.dirs, found)
			s.dirAlias = append(s.dirAlias, [2]string{found, d})
		}
	}
}

// reported is the path a hashed file is reported under: the one asked for,
// where it was found through a remapped symlink.
func (s *scanner) reported(name string) string {
	if s.askedFiles[name] {
		return "/" + name
	}
	for _, d := range s.askedDirs {
		if d == "" || strings.HasPrefix(name, d+"/") {
			return "/" + name
		}
	}
	if f, ok := s.fileAlias[name]; ok {
		return "/" + f
	}
	for _, a := range s.dirAlias {
		if rest, ok := strings.CutPrefix(name, a[0]+"/"); ok {
			return "/" + path.Join(a[1], rest)
		}
	}
	return "/" + name
}

// interesting reports whether a symlink is one Scan resolves later.
func interesting(name string) bool {
	return strings.HasPrefix(name, "usr/share/doc/") || name == osReleasePaths[0] || name == osReleasePaths[1]
}

// read iterates the tgz's entries.
func (s *scanner) read(ctx context.Context, f io.Reader) error {
	zr, err := pgzip.NewReader(readlimit.WithContext(ctx, f))
	if err != nil {
		return fmt.Errorf("reading its gzip header: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for n := 0; ; n++ {
		if n%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading its tar stream: %w", err)
		}
		if err := s.entry(hdr, tr); err != nil {
			return err
		}
	}
	// The tar's end is not the gzip stream's: read to it, so that a
	// truncated or corrupt stream is an error.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return fmt.Errorf("reading its gzip stream: %w", err)
	}
	return nil
}

// entry takes what Scan wants of one tar entry. A path met again replaces
// what was taken of it before, as extracting the tar would.
func (s *scanner) entry(hdr *tar.Header, r io.Reader) error {
	name := normalize(hdr.Name)
	if name == "" {
		return nil
	}
	delete(s.symlinks, name)
	delete(s.hashed, name)
	delete(s.hardlinks, name)
	delete(s.wantedSymlinks, name)
	switch hdr.Typeflag {
	case tar.TypeReg:
		return s.regular(name, hdr, r)
	case tar.TypeSymlink:
		if interesting(name) {
			s.symlinks[name] = hdr.Linkname
		}
		if s.wanted(name) {
			s.wantedSymlinks[name] = true
		}
		if !strings.Contains(name, "/") {
			s.remap(name, hdr.Linkname)
		}
	case tar.TypeLink:
		if s.wanted(name) {
			s.hardlinks[name] = normalize(hdr.Linkname)
		}
	}
	return nil
}

// regular parses and hashes a regular file as it passes.
func (s *scanner) regular(name string, hdr *tar.Header, r io.Reader) error {
	var h *hasher
	if s.wanted(name) {
		h = newHasher()
		r = io.TeeReader(r, h)
	}
	var err error
	switch {
	case s.hashOnly:
	case name == statusPath:
		if hdr.Size > statusLimit {
			return fmt.Errorf("%s is %d bytes, more than the %d bytes an SBOM reads of it", statusPath, hdr.Size, statusLimit)
		}
		s.hasStatus = true
		s.packages, err = parseStatus(r)
	case copyrightPath.MatchString(name):
		s.copyrights[name], err = parseCopyright(r)
	case name == osReleasePaths[0] || name == osReleasePaths[1]:
		s.osReleases[name], err = parseOSRelease(r)
	case isAptSources(name):
		s.apt[name], err = parseAptSources("/"+name, r)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	if h != nil {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return fmt.Errorf("hashing %s: %w", name, err)
		}
		s.hashed[name] = h.file(s.reported(name))
	}
	return nil
}

// inventory resolves what the stream left pending (symlinks, hard links)
// and sorts the result.
func (s *scanner) inventory() (*Inventory, error) {
	inv := &Inventory{Packages: s.packages}
	for _, p := range osReleasePaths {
		if o, ok := s.osReleases[s.resolve(p)]; ok {
			inv.OS = o
			break
		}
	}
	for i := range inv.Packages {
		p := &inv.Packages[i]
		p.Licenses = s.copyrights[s.resolve("usr/share/doc/"+p.Name+"/copyright")]
		p.License = packageLicense(p.Licenses)
	}
	sortPackages(inv.Packages, Package.nameArch)

	for name := range s.hardlinks {
		target := s.linkTarget(name)
		if s.wantedSymlinks[target] {
			continue // a hard link to a symlink: listed as a symlink is, not at all
		}
		f, ok := s.hashed[target]
		if !ok {
			f, ok = s.linkTargets[target]
		}
		if !ok {
			return nil, fmt.Errorf("/%s is a hard link to /%s, which is not a regular file in the tgz", name, target)
		}
		f.Path = s.reported(name)
		s.hashed[name] = f
	}
	for _, f := range s.hashed {
		inv.Files = append(inv.Files, f)
	}
	sort.Slice(inv.Files, func(i, j int) bool { return inv.Files[i].Path < inv.Files[j].Path })

	files := make([]string, 0, len(s.apt))
	for f := range s.apt {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		inv.AptSources = append(inv.AptSources, s.apt[f]...)
	}
	return inv, nil
}

// linkTarget is the first copy a wanted hard link names, through the hard
// links it names in turn (wanted ones, and unwanted ones a later pass met;
// at most maxLinks of them).
func (s *scanner) linkTarget(name string) string {
	target := s.hardlinks[name]
	for hops := 0; hops < maxLinks; hops++ {
		next, ok := s.hardlinks[target]
		if !ok {
			next, ok = s.linkHops[target]
		}
		if !ok {
			break
		}
		target = next
	}
	return target
}

// unhashedTargets are the first copies of wanted hard links that passed
// unhashed, sorted.
func (s *scanner) unhashedTargets() []string {
	var targets []string
	seen := map[string]bool{}
	for name := range s.hardlinks {
		target := s.linkTarget(name)
		_, hashed := s.hashed[target]
		_, found := s.linkTargets[target]
		if !hashed && !found && !s.wantedSymlinks[target] && !seen[target] {
			seen[target] = true
			targets = append(targets, target)
		}
	}
	sort.Strings(targets)
	return targets
}

// resolve follows the recorded symlinks in a normalized path, at most
// maxLinks of them; a path it cannot resolve is returned as far as it got
// (and so matches nothing).
func (s *scanner) resolve(p string) string {
	for hops := 0; hops < maxLinks; hops++ {
		parts := strings.Split(p, "/")
		changed := false
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			target, ok := s.symlinks[prefix]
			if !ok {
				continue
			}
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(prefix), target)
			}
			p = normalize(path.Join(target, strings.Join(parts[i+1:], "/")))
			changed = true
			break
		}
		if !changed {
			return p
		}
	}
	return ""
}

// hasher hashes a file with SHA-1 and SHA-256 and counts its bytes.
type hasher struct {
	sha1, sha256 hashWriter
	size         int64
}

type hashWriter interface {
	io.Writer
	Sum([]byte) []byte
}

func newHasher() *hasher { return &hasher{sha1: sha1.New(), sha256: sha256.New()} }

func (h *hasher) Write(b []byte) (int, error) {
	h.sha1.Write(b)
	h.sha256.Write(b)
	h.size += int64(len(b))
	return len(b), nil
}

func (h *hasher) file(p string) File {
	return File{Path: p, SHA1: hex.EncodeToString(h.sha1.Sum(nil)), SHA256: hex.EncodeToString(h.sha256.Sum(nil)), Size: h.size}
}
