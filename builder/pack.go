package builder

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
	"github.com/gpuaas/imagectl/internal/digest"
)

// PackResult describes a packed root filesystem.
type PackResult struct {
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
// attributes as SCHILY.xattr records, nothing under ./boot/efi, gzip at the
// given level compressed in parallel, and the sha256 of the output computed
// in the same pass. The same input stream gives the same bytes.
func Repack(ctx context.Context, in io.Reader, out io.Writer, level int) (PackResult, error) {
	tw, err := newTGZWriter(out, level)
	if err != nil {
		return PackResult{}, err
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

// PackDisk packs the ext4 root filesystem on partition part of the raw disk
// image at path (0: the image is the filesystem), read on the host, into
// the artifact's tgz with the same header shape as Repack, entries in byte
// order of their names. An error for which ext4tar.IsUnsupported is true
// means the filesystem must be packed through the appliance instead; what
// was written to out by then is to be thrown away.
func PackDisk(ctx context.Context, path string, part int, out io.Writer, level int) (PackResult, error) {
	fsys, err := ext4tar.Open(path, part)
	if err != nil {
		return PackResult{}, err
	}
	defer fsys.Close()
	tw, err := newTGZWriter(out, level)
	if err != nil {
		return PackResult{}, err
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
	res    PackResult
}

func newTGZWriter(out io.Writer, level int) (*tgzWriter, error) {
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
	return &tgzWriter{hw: hw, zw: zw, tw: tar.NewWriter(zw)}, nil
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
	nh, err := normalizeHeader(hdr)
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

func (t *tgzWriter) close() (PackResult, error) {
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
// packings of the same filesystem.
func normalizeHeader(h *tar.Header) (*tar.Header, error) {
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
