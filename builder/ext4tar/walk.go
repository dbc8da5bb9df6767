package ext4tar

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"slices"
	"strings"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/ext4"
)

// FS is an ext4 filesystem on a raw disk image, opened read-only and
// checked for what the host-side reader supports.
type FS struct {
	file *os.File
	raw  *rawFS
	fs   *ext4.FileSystem
}

// Open opens the ext4 filesystem on partition part (its number in the
// partition table, as in /dev/sda1; 0 when the whole image is the
// filesystem) of the raw disk image at path, and checks the superblock, the
// features and the journal. An *UnsupportedError says why the filesystem
// cannot be read on the host; other errors are failures to read the image.
func Open(path string, part int) (f *FS, err error) {
	defer recoverInto(&err, "")
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			fh.Close()
		}
	}()
	storage := file.New(fh, true)
	raw, start, size, sector, err := openPartition(fh, storage, path, part)
	if err != nil {
		return nil, err
	}
	if p := raw.problems(); len(p) > 0 {
		return nil, &UnsupportedError{Reasons: p}
	}
	efs, err := ext4.Read(storage, size, start, sector)
	if err != nil {
		return nil, &UnsupportedError{Reasons: []string{"go-diskfs: " + err.Error()}}
	}
	return &FS{file: fh, raw: raw, fs: efs}, nil
}

// ProbeFeatures checks what Open checks that a mount does not set for a
// while: its superblock, geometry and features, not its state or journal.
// A builder asks it before shutting the appliance down, so a filesystem
// the host cannot read is packed through the session still open rather
// than a second one. An *UnsupportedError says why; Open still has the
// last word.
func ProbeFeatures(path string, part int) (err error) {
	defer recoverInto(&err, "")
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	raw, _, _, _, err := openPartition(fh, file.New(fh, true), path, part)
	if err != nil {
		return err
	}
	if p := raw.featureProblems(); len(p) > 0 {
		return &UnsupportedError{Reasons: p}
	}
	return nil
}

// openPartition reads the superblock of the filesystem on partition part
// (0: the whole image) of the raw disk image fh at path, and says where
// the partition lies: its start and size in bytes and the disk's sector
// size.
func openPartition(fh *os.File, storage backend.Storage, path string, part int) (raw *rawFS, start, size, sector int64, err error) {
	if start, size, sector, err = partition(fh, storage, path, part); err != nil {
		return nil, 0, 0, 0, err
	}
	if raw, err = openRaw(io.NewSectionReader(fh, start, size)); err != nil {
		return nil, 0, 0, 0, err
	}
	return raw, start, size, sector, nil
}

// partition finds partition part (0: the whole image) of the raw disk image
// fh at path: its start and size in bytes and the disk's sector size.
func partition(fh *os.File, storage backend.Storage, path string, part int) (start, size, sector int64, err error) {
	st, err := fh.Stat()
	if err != nil {
		return 0, 0, 0, err
	}
	start, size, sector = 0, st.Size(), 512
	if part > 0 {
		d, err := diskfs.OpenBackend(storage, diskfs.WithOpenMode(diskfs.ReadOnly))
		if err != nil {
			return 0, 0, 0, fmt.Errorf("opening %s: %w", path, err)
		}
		table, err := d.GetPartitionTable()
		if err != nil {
			return 0, 0, 0, fmt.Errorf("reading the partition table of %s: %w", path, err)
		}
		found := false
		for _, p := range table.GetPartitions() {
			if p != nil && p.GetIndex() == part {
				start, size, found = p.GetStart(), p.GetSize(), true
			}
		}
		if !found {
			return 0, 0, 0, fmt.Errorf("%s has no partition %d", path, part)
		}
		sector = d.LogicalBlocksize
	}
	if start < 0 || size <= 0 || start+size > st.Size() {
		return 0, 0, 0, fmt.Errorf("partition %d of %s lies outside the image", part, path)
	}
	return start, size, sector, nil
}

// Close releases the image.
func (f *FS) Close() error { return f.file.Close() }

// Walk calls fn for every entry of the filesystem with a tar header as GNU
// tar would write it with --xattrs --numeric-owner (names "./" and
// "./usr/", hard links for regular files and symlinks pointing to the first
// path, sockets skipped), the root first, then each directory's entries in
// byte order of their names, depth first. body is non-nil for regular files
// and yields exactly hdr.Size bytes; it is valid only during the call.
//
// An *UnsupportedError names an entry the host-side reader cannot read
// faithfully; nothing about it has been passed to fn.
func (f *FS) Walk(ctx context.Context, fn func(hdr *tar.Header, body io.Reader) error) error {
	return f.run(&walker{f: f, ctx: ctx, fn: fn, links: map[uint32]string{}})
}

// WalkHeaders is Walk without the files' contents: fn gets the same
// headers, in the same order, and no data block of a regular file is read.
func (f *FS) WalkHeaders(ctx context.Context, fn func(hdr *tar.Header) error) error {
	return f.run(&walker{f: f, ctx: ctx, fn: func(h *tar.Header, _ io.Reader) error { return fn(h) }, links: map[uint32]string{}, headersOnly: true})
}

// run walks the whole filesystem with w, the root first.
func (f *FS) run(w *walker) error {
	var rootInfo iofs.FileInfo
	err := w.diskfs(".", func() (err error) {
		rootInfo, err = f.fs.Stat(".")
		return err
	})
	if err != nil {
		return err
	}
	if err := w.entry(".", "./", rootInfo); err != nil {
		return err
	}
	return w.walk(".", "./")
}

// Partitions are the numbers of the partitions of the raw disk image at
// path (as in /dev/sda1), in the table's order; none when the image has no
// partition table (it may be a filesystem itself: partition 0 to Open).
func Partitions(path string) (parts []int, err error) {
	defer recoverInto(&err, "")
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	d, err := diskfs.OpenBackend(file.New(fh, true), diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	table, err := d.GetPartitionTable()
	if err != nil {
		return nil, nil // no table go-diskfs knows
	}
	for _, p := range table.GetPartitions() {
		if p != nil && p.GetSize() > 0 {
			parts = append(parts, p.GetIndex())
		}
	}
	return parts, nil
}

type walker struct {
	f     *FS
	ctx   context.Context
	fn    func(*tar.Header, io.Reader) error
	links map[uint32]string
	// headersOnly: regular files' contents are neither read nor passed.
	headersOnly bool
}

// diskfs runs a go-diskfs call, turning its errors and panics (it panics
// on some inodes it does not support) into an *UnsupportedError.
func (w *walker) diskfs(path string, call func() error) (err error) {
	defer recoverInto(&err, path)
	if err := call(); err != nil {
		return &UnsupportedError{Path: path, Reasons: []string{"go-diskfs: " + err.Error()}}
	}
	return nil
}

func recoverInto(err *error, path string) {
	if r := recover(); r != nil {
		*err = &UnsupportedError{Path: path, Reasons: []string{fmt.Sprintf("go-diskfs panicked: %v", r)}}
	}
}

// walk emits a directory's entries, listed by one go-diskfs ReadDir (its
// by-path lookups of single entries are quadratic in directory size).
func (w *walker) walk(dir, tname string) error {
	var ents []iofs.DirEntry
	if err := w.diskfs(dir, func() (err error) {
		ents, err = w.f.fs.ReadDir(dir)
		return err
	}); err != nil {
		return err
	}
	slices.SortFunc(ents, func(a, b iofs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range ents {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		p := e.Name()
		if dir != "." {
			p = dir + "/" + e.Name()
		}
		var info iofs.FileInfo
		if err := w.diskfs(p, func() (err error) {
			info, err = e.Info()
			return err
		}); err != nil {
			return err
		}
		tn := tname + e.Name()
		if e.IsDir() {
			tn += "/"
		}
		if err := w.entry(p, tn, info); err != nil {
			return err
		}
		if e.IsDir() {
			if err := w.walk(p, tn); err != nil {
				return err
			}
		}
	}
	return nil
}

// xattrPrefixes maps ext4's xattr name indexes to name prefixes.
var xattrPrefixes = map[uint8]string{1: "user.", 2: "system.posix_acl_access", 3: "system.posix_acl_default",
	4: "trusted.", 6: "security.", 7: "system."}

func (w *walker) entry(p, tname string, info iofs.FileInfo) error {
	st, ok := info.Sys().(*ext4.StatT)
	if !ok {
		return fmt.Errorf("%s: go-diskfs returned %T, not *ext4.StatT", p, info.Sys())
	}
	ri, err := w.f.raw.inode(st.Ino)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if why := w.f.raw.unsupported(ri); why != "" {
		return &UnsupportedError{Path: p, Reasons: []string{why}}
	}
	ft := ri.mode & sIFMT
	hdr := &tar.Header{
		Name:    tname,
		Mode:    int64(ri.mode & 0o7777),
		Uid:     int(st.UID),
		Gid:     int(st.GID),
		ModTime: info.ModTime(),
		Format:  tar.FormatPAX,
	}
	if err := w.xattrs(p, ri, hdr); err != nil {
		return err
	}
	// GNU tar links only regular files and symlinks; hard-linked devices
	// and fifos are archived as separate nodes.
	if (ft == sIFREG || ft == sIFLNK) && st.Nlink > 1 {
		if first, ok := w.links[st.Ino]; ok {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			hdr.PAXRecords = nil
			return w.fn(hdr, nil)
		}
		w.links[st.Ino] = tname
	}
	switch ft {
	case sIFDIR:
		hdr.Typeflag = tar.TypeDir
	case sIFLNK:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, st.LinkTarget
		if uint64(len(st.LinkTarget)) != ri.size {
			return &UnsupportedError{Path: p, Reasons: []string{fmt.Sprintf("symlink target of %d bytes, inode says %d", len(st.LinkTarget), ri.size)}}
		}
	case sIFCHR, sIFBLK:
		hdr.Typeflag = tar.TypeChar
		if ft == sIFBLK {
			hdr.Typeflag = tar.TypeBlock
		}
		hdr.Devmajor, hdr.Devminor = int64(st.Major), int64(st.Minor)
	case sIFIFO:
		hdr.Typeflag = tar.TypeFifo
	case sIFSOCK:
		return nil // GNU tar skips sockets
	case sIFREG:
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(ri.size)
		if w.headersOnly {
			return w.fn(hdr, nil)
		}
		body, err := w.f.raw.open(ri)
		if err != nil {
			return &UnsupportedError{Path: p, Reasons: []string{"extent tree: " + err.Error()}}
		}
		if err := w.fn(hdr, body); err != nil {
			return err
		}
		if body.pos != body.size {
			return fmt.Errorf("%s: %d of %d bytes were read", p, body.pos, body.size)
		}
		return nil
	default:
		return &UnsupportedError{Path: p, Reasons: []string{fmt.Sprintf("unknown file type %#o", ft)}}
	}
	return w.fn(hdr, nil)
}

// xattrs adds the entry's extended attributes as SCHILY.xattr records.
// The raw scan says which inodes have any (GetXattr is a by-path lookup),
// and restores what go-diskfs drops or returns in ext4's own format.
func (w *walker) xattrs(p string, ri *rawInode, hdr *tar.Header) error {
	scan, err := w.f.raw.xattrScan(ri)
	if err != nil {
		return &UnsupportedError{Path: p, Reasons: []string{"xattrs: " + err.Error()}}
	}
	if len(scan) == 0 {
		return nil
	}
	var got map[string][]byte
	if err := w.diskfs(p, func() (err error) {
		got, err = w.f.fs.GetXattr(p)
		return err
	}); err != nil {
		return err
	}
	for _, x := range scan {
		prefix, ok := xattrPrefixes[x.index]
		if !ok {
			return &UnsupportedError{Path: p, Reasons: []string{fmt.Sprintf("xattr %q with unknown name index %d", x.name, x.index)}}
		}
		if x.index == 7 && x.name == "data" {
			continue // the inline-data marker, not an attribute
		}
		if x.valInode != 0 {
			return &UnsupportedError{Path: p, Reasons: []string{"xattr value stored in an inode"}}
		}
		name := prefix + x.name
		v, ok := got[name]
		switch {
		case !ok && x.size == 0:
			v = []byte{} // go-diskfs drops empty values; tar keeps them
		case !ok:
			return &UnsupportedError{Path: p, Reasons: []string{"go-diskfs did not return xattr " + name}}
		}
		if x.index == 2 || x.index == 3 {
			if v, err = aclToXattr(v); err != nil {
				return &UnsupportedError{Path: p, Reasons: []string{name + ": " + err.Error()}}
			}
		}
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords["SCHILY.xattr."+name] = string(v)
	}
	return nil
}

// IsUnsupported reports whether err says the host-side reader cannot
// read the filesystem (as opposed to an I/O error or a cancellation).
func IsUnsupported(err error) bool {
	var u *UnsupportedError
	return errors.As(err, &u)
}
