// Package digest owns imagectl's SHA-256 digests of files and streams:
// hashing them as they are read (memory stays flat on multi-GB tarballs,
// and a cancelled context stops a long read), with a count of the bytes
// hashed, and the two forms a digest is written in, bare lowercase hex (a
// manifest's artifact sha256, the store's index) and "sha256:<hex>"
// (recipes' base checksums, layer and cache keys), parsed in either form;
// and CheckedReaderAt, which checks reads at offsets against a sha256 as
// they go (a tgz streamed from a registry into MAAS's chunks).
//
// What is hashed and what a mismatch means stay with the callers: each
// names the file and what it was expected to match.
package digest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"

	"github.com/gpuaas/imagectl/internal/readlimit"
)

// ErrMismatch is wrapped by CheckedReaderAt's errors for content that is
// not what its digest and size say (other bytes, or fewer), so that a
// caller holding a cached copy knows to drop it.
var ErrMismatch = errors.New("the content does not match its digest")

// Prefix starts a digest written as "sha256:<hex>".
const Prefix = "sha256:"

// ProgressEvery is how many bytes Copy reads between two progress calls.
const ProgressEvery = 64 << 20

// Digest is the SHA-256 of some bytes and how many there were.
type Digest struct {
	Sum  [sha256.Size]byte
	Size int64
}

// Hex is the digest in lowercase hex, as a manifest records it.
func (d Digest) Hex() string { return hex.EncodeToString(d.Sum[:]) }

// String is the digest as "sha256:<hex>".
func (d Digest) String() string { return Prefix + d.Hex() }

// Matches reports whether want, in either form and either case, is this
// digest; a malformed want matches nothing.
func (d Digest) Matches(want string) bool {
	sum, err := Parse(want)
	return err == nil && sum == d.Sum
}

// Equal reports whether two written digests, in either form and either
// case, are the same SHA-256; a malformed one equals nothing.
func Equal(a, b string) bool {
	x, errA := Parse(a)
	y, errB := Parse(b)
	return errA == nil && errB == nil && x == y
}

// Parse reads a SHA-256 written as "sha256:<hex>" or as bare hex, in
// either case.
func Parse(s string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	h := strings.TrimPrefix(s, Prefix)
	if len(h) != 2*sha256.Size {
		return sum, fmt.Errorf("%q is not a sha256: want 64 hex digits, bare or after %q", s, Prefix)
	}
	if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
		return sum, fmt.Errorf("%q is not a sha256: want 64 hex digits, bare or after %q", s, Prefix)
	}
	return sum, nil
}

// Bytes is the digest of b.
func Bytes(b []byte) Digest {
	return Digest{Sum: sha256.Sum256(b), Size: int64(len(b))}
}

// File hashes a file as a stream. Its errors name the file.
func File(ctx context.Context, path string) (Digest, error) {
	return FileProgress(ctx, path, nil)
}

// FileProgress hashes a file as File does, calling progress, when not nil,
// as Copy does, with the file's size as total. Only a regular file is
// hashed: a FIFO or a device is refused (readlimit.Open), never waited on
// or read without end.
func FileProgress(ctx context.Context, path string, progress func(done, total int64)) (Digest, error) {
	f, err := readlimit.Open(path)
	if err != nil {
		if errors.Is(err, readlimit.ErrNotRegular) {
			return Digest{}, fmt.Errorf("hashing: %w", err) // it names path
		}
		return Digest{}, fmt.Errorf("hashing %s: %w", path, err)
	}
	defer f.Close()
	var report func(int64)
	if progress != nil {
		st, err := f.Stat()
		if err != nil {
			return Digest{}, fmt.Errorf("hashing %s: %w", path, err)
		}
		report = func(done int64) { progress(done, st.Size()) }
	}
	d, err := Copy(ctx, nil, f, report)
	if err != nil {
		return Digest{}, fmt.Errorf("hashing %s: %w", path, err)
	}
	return d, nil
}

// Copy copies src to dst (nil: nowhere) in 1 MiB pieces, hashing what it
// copies, until src ends, ctx is cancelled or either side fails. progress,
// when not nil, is called with the bytes copied so far every ProgressEvery
// bytes and once at the end.
func Copy(ctx context.Context, dst io.Writer, src io.Reader, progress func(done int64)) (Digest, error) {
	w := NewWriter(dst)
	buf := make([]byte, 1<<20)
	var reported int64
	called := false
	for {
		if err := ctx.Err(); err != nil {
			return Digest{}, err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return Digest{}, err
			}
			if progress != nil && w.n-reported >= ProgressEvery {
				progress(w.n)
				reported, called = w.n, true
			}
		}
		if rerr == io.EOF {
			if progress != nil && (!called || reported != w.n) {
				progress(w.n)
			}
			return w.Digest(), nil
		}
		if rerr != nil {
			return Digest{}, rerr
		}
	}
}

// Writer hashes what is written through it to an underlying writer (nil:
// nowhere), as the packer does while it writes a tgz, or as the target of
// an io.TeeReader.
type Writer struct {
	w io.Writer
	h hash.Hash
	n int64
}

// NewWriter returns a Writer in front of w, which may be nil.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, h: sha256.New()} }

// Write writes p to the underlying writer and hashes what it took.
func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	var err error
	if w.w != nil {
		n, err = w.w.Write(p)
	}
	w.h.Write(p[:n])
	w.n += int64(n)
	return n, err
}

// Digest is the digest of what was written so far.
func (w *Writer) Digest() Digest {
	d := Digest{Size: w.n}
	w.h.Sum(d.Sum[:0])
	return d
}

// CheckedReaderAt reads a blob of known size and sha256 at offsets and
// checks the bytes against the sha256 as reads go from start to end: the
// read that would hand out the last byte fails instead when the bytes read
// so far do not hash to it, so a consumer that sends bytes on in order
// (an upload in chunks) never sends a last byte of the wrong content.
// Reading again from offset 0 starts the check afresh (an upload starting
// over); a read that skips ahead leaves the rest unchecked, and the last
// byte is then refused too.
type CheckedReaderAt struct {
	r    io.ReaderAt
	size int64
	want [sha256.Size]byte

	mu       sync.Mutex
	h        hash.Hash
	next     int64 // bytes hashed, from 0
	gap      bool  // a read skipped ahead of next
	verified bool  // the last byte was handed out, checked
}

// NewCheckedReaderAt checks reads of r, which holds size bytes with the
// sha256 want (hex, with or without "sha256:").
func NewCheckedReaderAt(r io.ReaderAt, size int64, want string) (*CheckedReaderAt, error) {
	sum, err := Parse(want)
	if err != nil {
		return nil, err
	}
	return &CheckedReaderAt{r: r, size: size, want: sum, h: sha256.New()}, nil
}

// Size is the blob's size.
func (c *CheckedReaderAt) Size() int64 { return c.size }

// ReadAt implements io.ReaderAt.
func (c *CheckedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at negative offset %d", off)
	}
	if off >= c.size {
		return 0, io.EOF
	}
	if rest := c.size - off; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.ReadAt(p, off)
	if err == io.EOF {
		err = nil
		if off+int64(n) < c.size {
			err = fmt.Errorf("the content ends at byte %d, expected %d: %w (%w)", off+int64(n), c.size, io.ErrUnexpectedEOF, ErrMismatch)
		}
	}
	if err != nil {
		return n, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if off == 0 {
		c.h.Reset()
		c.next, c.gap, c.verified = 0, false, false
	}
	end := off + int64(n)
	switch {
	case off > c.next:
		c.gap = true
	case end > c.next:
		c.h.Write(p[c.next-off : n])
		c.next = end
	}
	if end < c.size {
		return n, nil
	}
	if c.gap || c.next != c.size {
		return 0, fmt.Errorf("the last bytes were asked for before the ones before them were read: the content is unchecked against sha256 %x", c.want)
	}
	var got [sha256.Size]byte
	c.h.Sum(got[:0])
	if got != c.want {
		return 0, fmt.Errorf("the content has sha256 %x, expected %x: refusing its last bytes: %w", got, c.want, ErrMismatch)
	}
	c.verified = true
	return n, nil
}

// Verified reports whether a read handed out the last byte: every byte
// read in order since the last read from offset 0, and all of them hashed
// to the sha256.
func (c *CheckedReaderAt) Verified() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verified
}
