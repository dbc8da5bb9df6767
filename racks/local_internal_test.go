package racks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// randomBytes is n bytes of a seeded random stream.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rnd := rand.New(rand.NewPCG(seed, seed+1))
	for i := range b {
		b[i] = byte(rnd.Uint32())
	}
	return b
}

// flipped is b with the bits of its byte at flipped.
func flipped(b []byte, at int) []byte {
	c := bytes.Clone(b)
	c[at] ^= 0xff
	return c
}

// localFile writes b to a file and opens it.
func localFile(tb testing.TB, b []byte) *os.File {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "x.tgz")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// A file of the version's size is mapped, window by window, and a stream
// compared with it is judged as one compared with the same bytes read:
// equal, or named by the digest of what it was, wherever it differs.
func TestMatchedWithAMappedCopy(t *testing.T) {
	defer func(w int64) { windowSize = w }(windowSize)
	windowSize = 16 << 10 // many windows, some reads across two
	const size = 300_007
	local := randomBytes(size, 3)
	rnd := rand.New(rand.NewPCG(3, 4))
	f := localFile(t, local)
	if lb := newLocalBytes(f, size); lb.fd < 0 {
		t.Fatal("a file of the version's size is not mapped")
	}
	if lb := newLocalBytes(f, size+1); lb.fd >= 0 {
		t.Fatal("a file shorter than the version is mapped")
	}
	for _, at := range []int{-1, 0, 16<<10 - 1, 16 << 10, 150_000, size - 1} {
		stream := local
		if at >= 0 {
			stream = flipped(local, at)
		}
		m := &matched{ctx: context.Background(), local: f, size: size}
		for rest := stream; len(rest) > 0; {
			n := min(len(rest), 1+rnd.IntN(40_000))
			if _, err := m.Write(rest[:n]); err != nil {
				t.Fatalf("difference at %d: %v", at, err)
			}
			rest = rest[n:]
		}
		if m.lb.fd < 0 {
			t.Fatalf("difference at %d: the copy was read, not mapped", at)
		}
		sum := sha256.Sum256(stream)
		got, err := m.sum()
		if err != nil || got != hex.EncodeToString(sum[:]) || m.same("") != (at < 0) {
			t.Errorf("difference at %d: same %v, sum %s, %v; want %x", at, m.same(""), got, err, sum)
		}
		m.close()
	}
}

// A copy that shrinks while it is mapped fails the comparison as the
// local copy's fault, never the rack's, and does not crash the process.
func TestMatchedCopyShrinksUnderItsMapping(t *testing.T) {
	local := bytes.Repeat([]byte("imagectl"), 64<<10) // 512 KiB
	f := localFile(t, local)
	m := &matched{ctx: context.Background(), local: f, size: int64(len(local))}
	if _, err := m.Write(local[:4096]); err != nil {
		t.Fatal(err)
	}
	// A hash (the copy's own, the convoy's) mapped before the shrink.
	mapped := newLocalBytes(f, int64(len(local)))
	defer mapped.close()
	if b, err := mapped.at(0, 10); err != nil || mapped.win == nil || !bytes.Equal(b, local[:10]) {
		t.Fatalf("mapping the copy: %q, %v", b, err)
	}
	if err := os.Truncate(f.Name(), 4096); err != nil {
		t.Fatal(err)
	}
	if n, err := mapped.hash(context.Background(), sha256.New(), 0, int64(len(local))); err == nil {
		t.Errorf("hashing a copy that shrank under its mapping read %d bytes and no error", n)
	}
	_, err := m.Write(local[4096 : 300<<10])
	var le *localError
	if !errors.As(err, &le) {
		t.Fatalf("%v, want a localError", err)
	}
	m.close()

	// The copy's own hash says the same.
	lb := newLocalBytes(f, int64(len(local)))
	defer lb.close()
	if lb.fd >= 0 {
		t.Fatal("a shrunk copy is mapped")
	}
	n, err := lb.hash(context.Background(), sha256.New(), 0, int64(len(local)))
	if n != 4096 || err != nil {
		t.Errorf("hashing the shrunk copy read %d bytes, %v; want 4096, nil (its end)", n, err)
	}
}

// BenchmarkCompareWithLocalCopy compares a 256 MiB stream with a local
// copy in the page cache, mapped (as the check does) and read into a
// buffer (the obvious way).
func BenchmarkCompareWithLocalCopy(b *testing.B) {
	const size = 256 << 20
	stream := randomBytes(size, 5)
	f := localFile(b, stream)
	for _, c := range []struct {
		name  string
		local io.ReaderAt
	}{{"mapped", f}, {"read", struct{ io.ReaderAt }{f}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				m := &matched{ctx: context.Background(), local: c.local, size: size}
				for off := 0; off < size; off += 256 << 10 {
					if _, err := m.Write(stream[off : off+256<<10]); err != nil {
						b.Fatal(err)
					}
				}
				m.close()
				if !m.same("") {
					b.Fatal("the stream differs from its copy")
				}
			}
		})
	}
}
