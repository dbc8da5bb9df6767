// Package pack owns the tgz: the customized root filesystem read from the
// disk on the host (package ext4tar) or streamed out of the appliance,
// normalized, compressed and hashed in one pass, with Root choosing
// between the two. It also owns the build's source date (source.go): the
// time every newer modification time in the tgz is clamped to, so the
// same inputs give the same bytes; and the walk over a raw disk's ext4
// filesystems (EachExt4) that the source date and the smoke comparison's
// root filesystem are found with.
package pack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/klauspost/pgzip"

	"github.com/gpuaas/imagectl/builder/ext4tar"
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
)

// Result describes a packed root filesystem.
type Result struct {
	SHA256  string // of the compressed tgz, hex
	Size    int64  // bytes of the compressed tgz
	Entries int
	// Content is the sum of regular file sizes.
	Content int64
}

// excluded reports paths the tgz must not carry: at deploy curtin mounts the
// EFI system partition (vfat) at /boot/efi before extracting, where chown
// and symlinks fail; it creates the mount point itself.
func excluded(name string) bool {
	n := strings.TrimPrefix(strings.TrimPrefix(name, "./"), "/")
	return n == "boot/efi" || strings.HasPrefix(n, "boot/efi/")
}

// Repack turns a tar stream of a root filesystem (the appliance's tar-out
// with xattrs and numeric owners) into the artifact's tgz: PAX headers with
// numeric owners only, no user or group names, no atime or ctime, extended
// attributes as SCHILY.xattr records, nothing under ./boot/efi, every
// modification time newer than epoch set to epoch (none when epoch is
// zero), gzip at the given level compressed in parallel, and the sha256 of
// the output computed in the same pass. The same input stream gives the
// same bytes.
func Repack(ctx context.Context, in io.Reader, out io.Writer, level int, epoch time.Time) (Result, error) {
	tw, err := newTGZWriter(out, level, epoch)
	if err != nil {
		return Result{}, err
	}
	defer tw.abort()
	tr := tar.NewReader(in)
	for {
		if err := ctx.Err(); err != nil {
			return tw.res, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return tw.res, fmt.Errorf("reading the root filesystem stream: %w", err)
		}
		if err := tw.add(hdr, tr); err != nil {
			return tw.res, err
		}
	}
	return tw.close()
}

// Disk packs the ext4 root filesystem on partition part of the raw disk
// image at path (0: the image is the filesystem), read on the host, into
// the artifact's tgz with the same header shape as Repack, entries in byte
// order of their names. An error for which ext4tar.IsUnsupported is true
// means the filesystem must be packed through the appliance instead; what
// was written to out by then is to be thrown away.
func Disk(ctx context.Context, path string, part int, out io.Writer, level int, epoch time.Time) (Result, error) {
	fsys, err := ext4tar.Open(path, part)
	if err != nil {
		return Result{}, err
	}
	defer fsys.Close()
	tw, err := newTGZWriter(out, level, epoch)
	if err != nil {
		return Result{}, err
	}
	defer tw.abort()
	if err := fsys.Walk(ctx, func(hdr *tar.Header, body io.Reader) error {
		return tw.add(hdr, body)
	}); err != nil {
		return tw.res, err
	}
	return tw.close()
}

// tgzWriter writes root filesystem entries as the artifact's tgz.
type tgzWriter struct {
	closed bool
	hw     *digest.Writer
	zw     *pgzip.Writer
	tw     *tar.Writer
	res    Result
	// epoch clamps modification times; zero keeps them.
	epoch time.Time
}

func newTGZWriter(out io.Writer, level int, epoch time.Time) (*tgzWriter, error) {
	hw := digest.NewWriter(out)
	zw, err := pgzip.NewWriterLevel(hw, level)
	if err != nil {
		return nil, err
	}
	// A fixed block size and header keep the output independent of the
	// machine: pgzip's blocks are compressed in parallel but written in order.
	if err := zw.SetConcurrency(1<<20, 2*runtime.NumCPU()); err != nil {
		return nil, err
	}
	zw.Header.ModTime = time.Unix(0, 0)
	zw.Header.OS = 255
	return &tgzWriter{hw: hw, zw: zw, tw: tar.NewWriter(zw), epoch: epoch}, nil
}

// abort stops the compressor's goroutines after a failure; the output is
// to be thrown away.
func (t *tgzWriter) abort() {
	if !t.closed {
		t.closed = true
		t.zw.Close()
	}
}

// add writes one entry, normalized, unless it is excluded; body is read for
// regular files.
func (t *tgzWriter) add(hdr *tar.Header, body io.Reader) error {
	if excluded(hdr.Name) {
		return nil
	}
	nh, err := normalizeHeader(hdr, t.epoch)
	if err != nil {
		return err
	}
	if err := t.tw.WriteHeader(nh); err != nil {
		return fmt.Errorf("writing %s: %w", hdr.Name, err)
	}
	if nh.Typeflag == tar.TypeReg {
		n, err := io.Copy(t.tw, body)
		if err != nil {
			return fmt.Errorf("packing %s: %w", hdr.Name, err)
		}
		t.res.Content += n
	}
	t.res.Entries++
	return nil
}

func (t *tgzWriter) close() (Result, error) {
	t.closed = true
	if err := t.tw.Close(); err != nil {
		t.zw.Close()
		return t.res, err
	}
	if err := t.zw.Close(); err != nil {
		return t.res, err
	}
	d := t.hw.Digest()
	t.res.SHA256, t.res.Size = d.Hex(), d.Size
	return t.res, nil
}

// normalizeHeader keeps what deploy needs and drops what varies between
// packings of the same filesystem, and clamps the modification time to
// epoch (the SOURCE_DATE_EPOCH clamp): what the build wrote gets epoch, what
// is older (the base's files, the packages' files with their archives'
// times) keeps its time.
func normalizeHeader(h *tar.Header, epoch time.Time) (*tar.Header, error) {
	name := h.Name
	if !strings.HasPrefix(name, "./") {
		name = "./" + strings.TrimPrefix(name, "/")
	}
	nh := &tar.Header{
		Typeflag: h.Typeflag,
		Name:     name,
		Linkname: h.Linkname,
		Mode:     h.Mode & 0o7777,
		Uid:      h.Uid,
		Gid:      h.Gid,
		ModTime:  h.ModTime,
		Format:   tar.FormatPAX,
	}
	if !epoch.IsZero() && nh.ModTime.After(epoch) {
		nh.ModTime = epoch
	}
	switch h.Typeflag {
	case tar.TypeReg:
		nh.Typeflag, nh.Size = tar.TypeReg, h.Size
	case tar.TypeLink:
		if !strings.HasPrefix(nh.Linkname, "./") && !strings.HasPrefix(nh.Linkname, "/") {
			nh.Linkname = "./" + nh.Linkname
		}
	case tar.TypeSymlink, tar.TypeDir, tar.TypeFifo:
	case tar.TypeChar, tar.TypeBlock:
		nh.Devmajor, nh.Devminor = h.Devmajor, h.Devminor
	default:
		return nil, fmt.Errorf("%s: unsupported tar entry type %q", h.Name, h.Typeflag)
	}
	for k, v := range h.PAXRecords {
		if strings.HasPrefix(k, "SCHILY.xattr.") {
			if nh.PAXRecords == nil {
				nh.PAXRecords = map[string]string{}
			}
			nh.PAXRecords[k] = v
		}
	}
	return nh, nil
}

// Root packs the customized root filesystem into the tgz.
type Root struct {
	Mode  string // auto, host or appliance
	Disk  string // the raw disk the session customized
	Level int
	// Epoch is the build's source date: newer modification times are
	// clamped to it (zero: none are).
	Epoch time.Time
	Log   func(string)
	// Reopen starts a new appliance session on Disk.
	Reopen func() (guest.Session, error)
}

// Pack reads the root filesystem on the host when it can: the appliance is
// shut down first, so the filesystem is clean, and the disk is read
// directly, much faster than a tar-out through the appliance. When the
// guest's layout or filesystem is one the host-side reader does not
// support, it packs through the appliance instead and says why: through
// the open session when the layout or the filesystem's features say so
// before it is shut down, else through a new one; the two are never mixed
// in one tgz. It returns the temporary file that becomes
// the tgz when published, and which packer made it.
func (p Root) Pack(ctx context.Context, sess guest.Session, mounts []guest.Mount, tgzPath string) (*atomicfile.File, Result, string, error) {
	mode := p.Mode
	if mode == "" {
		mode = "auto"
	}
	why := hostUnpackable(mounts)
	switch {
	case mode != "auto" && mode != "host" && mode != "appliance":
		return nil, Result{}, "", fmt.Errorf("unknown packer %q (auto, host or appliance)", mode)
	case mode == "host" && why != "":
		return nil, Result{}, "", hostRefused(errors.New(why))
	case mode == "appliance" || why != "":
		if why != "" {
			p.Log("packing through the appliance: " + why)
		}
		if sess == nil {
			return p.appliance(ctx, tgzPath)
		}
		f, res, err := packSession(ctx, sess, tgzPath, p.Level, p.Epoch)
		return f, res, "appliance", err
	}
	if sess != nil {
		// A filesystem whose features the host cannot read is packed
		// through the session still open, not a second one after it.
		if err := featureRefusal(p.Disk, mounts); err != nil {
			if mode == "host" {
				return nil, Result{}, "", hostRefused(err)
			}
			p.Log(fmt.Sprintf("packing through the appliance: %v", err))
			f, res, err := packSession(ctx, sess, tgzPath, p.Level, p.Epoch)
			return f, res, "appliance", err
		}
		if err := sess.Close(); err != nil {
			return nil, Result{}, "", fmt.Errorf("shutting the appliance down before packing: %w", err)
		}
	}
	f, err := atomicfile.Create(tgzPath, 0o644)
	if err != nil {
		return nil, Result{}, "", err
	}
	res, err := Disk(ctx, p.Disk, mounts[0].Partition, f, p.Level, p.Epoch)
	if err == nil {
		return f, res, "host", nil
	}
	f.Abort()
	if !ext4tar.IsUnsupported(err) || mode == "host" || ctx.Err() != nil {
		return nil, Result{}, "", fmt.Errorf("packing the root filesystem on the host: %w", err)
	}
	p.Log(fmt.Sprintf("packing through the appliance (launching it again): %v", err))
	return p.appliance(ctx, tgzPath)
}

// HostRefusal says why the host-side reader will not pack the guest on
// disk, as far as its layout (mounts) and the filesystem's features tell
// while the appliance still has it mounted, or nil. A build that must pack
// on the host (--packer host) asks right after the appliance starts, so it
// refuses before applying the layers left to apply rather than after them;
// Pack asks again, and the reader has the last word: the journal's state
// and each inode are read only then, and a probe that fails for another
// reason (the disk unreadable) is left to it.
func HostRefusal(disk string, mounts []guest.Mount) error {
	if why := hostUnpackable(mounts); why != "" {
		return hostRefused(errors.New(why))
	}
	if err := featureRefusal(disk, mounts); err != nil {
		return hostRefused(err)
	}
	return nil
}

// featureRefusal is the host reader's refusal of the root filesystem's
// features (ext4tar.ProbeFeatures), or nil; a probe that fails otherwise
// is left to the reader.
func featureRefusal(disk string, mounts []guest.Mount) error {
	if err := ext4tar.ProbeFeatures(disk, mounts[0].Partition); err != nil && ext4tar.IsUnsupported(err) {
		return err
	}
	return nil
}

// hostRefused is the error of a build that must pack on the host and
// cannot.
func hostRefused(err error) error {
	return fmt.Errorf("--packer host refuses the guest: %w (--packer auto packs it through the appliance)", err)
}

// appliance packs through a new appliance session on the disk.
func (p Root) appliance(ctx context.Context, tgzPath string) (*atomicfile.File, Result, string, error) {
	sess, err := p.Reopen()
	if err != nil {
		return nil, Result{}, "", err
	}
	defer sess.Close()
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	f, res, err := packSession(ctx, sess, tgzPath, p.Level, p.Epoch)
	return f, res, "appliance", err
}

// hostUnpackable says why the host-side reader cannot pack the guest, or ""
// when it can: it reads one ext4 root filesystem on a partition of the disk
// (or the whole disk); only an EFI system partition may be mounted besides,
// since nothing under /boot/efi goes into the tgz.
func hostUnpackable(mounts []guest.Mount) string {
	if len(mounts) == 0 || mounts[0].Point != "/" {
		return "the guest's root filesystem is not known"
	}
	root := mounts[0]
	if root.Partition < 0 {
		return fmt.Sprintf("the root filesystem is on %s, not on a partition of the disk", root.Device)
	}
	if root.Type != "ext4" {
		return fmt.Sprintf("the root filesystem is %s, not ext4", root.Type)
	}
	for _, m := range mounts[1:] {
		if m.Point != "/boot/efi" {
			return fmt.Sprintf("the guest mounts %s on %s, and only the root filesystem is read on the host", m.Device, m.Point)
		}
	}
	return ""
}

// packSession packs the guest's root filesystem into a temporary file that
// becomes the tgz when published.
func packSession(ctx context.Context, sess guest.Session, tgzPath string, level int, epoch time.Time) (*atomicfile.File, Result, error) {
	f, err := atomicfile.Create(tgzPath, 0o644)
	if err != nil {
		return nil, Result{}, err
	}
	res, err := Appliance(ctx, sess, f, level, epoch)
	if err != nil {
		f.Abort()
		return nil, Result{}, fmt.Errorf("packing the root filesystem: %w", err)
	}
	return f, res, nil
}

// Appliance streams the session's root filesystem (tar-out with xattrs and
// numeric owners) through Repack into w: compression and sha256 in one pass,
// no uncompressed tar on disk; modification times clamped to epoch.
func Appliance(ctx context.Context, sess guest.Session, w io.Writer, level int, epoch time.Time) (Result, error) {
	pr, pw := io.Pipe()
	type packed struct {
		res Result
		err error
	}
	done := make(chan packed, 1)
	go func() {
		res, err := Repack(ctx, pr, w, level, epoch)
		if err == nil {
			// tar pads its output past the end-of-archive marker: take it
			// all, or the writer would see a broken pipe.
			_, err = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(errors.New("packing stopped"))
		done <- packed{res, err}
	}()
	err := sess.TarOut(ctx, pw)
	pw.CloseWithError(err)
	p := <-done
	if p.err != nil {
		// The repacker's error is the cause; the tar-out's broken pipe is
		// its consequence.
		err = p.err
	}
	return p.res, err
}
