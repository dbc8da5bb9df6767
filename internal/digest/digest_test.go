package digest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// sha256("hello\n"), as sha256sum prints it.
const helloHex = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"

func TestFileAndForms(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := File(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if d.Hex() != helloHex || d.String() != "sha256:"+helloHex || d.Size != 6 {
		t.Errorf("got %s, %d bytes", d, d.Size)
	}
	if d != Bytes([]byte("hello\n")) {
		t.Error("File and Bytes disagree")
	}
	for _, want := range []string{helloHex, "sha256:" + helloHex, strings.ToUpper(helloHex), "sha256:" + strings.ToUpper(helloHex)} {
		if !d.Matches(want) {
			t.Errorf("does not match %q", want)
		}
	}
	for _, other := range []string{"", "sha256:", helloHex[:63], strings.Repeat("0", 64), "md5:" + helloHex, "sha256:" + helloHex + "00"} {
		if d.Matches(other) {
			t.Errorf("matches %q", other)
		}
	}
	if !Equal("sha256:"+helloHex, strings.ToUpper(helloHex)) || Equal(helloHex, strings.Repeat("0", 64)) || Equal("x", "x") {
		t.Error("Equal")
	}
	var calls [][2]int64
	if d2, err := FileProgress(context.Background(), p, func(done, total int64) { calls = append(calls, [2]int64{done, total}) }); err != nil || d2 != d ||
		len(calls) != 1 || calls[0] != [2]int64{6, 6} {
		t.Errorf("FileProgress: %s %v, progress %v", d2, err, calls)
	}
	if _, err := File(context.Background(), filepath.Join(t.TempDir(), "none")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "hashing ") {
		t.Errorf("missing file: %v", err)
	}
}

func TestParse(t *testing.T) {
	sum, err := Parse("sha256:" + helloHex)
	if err != nil || sum != Bytes([]byte("hello\n")).Sum {
		t.Fatalf("%x %v", sum, err)
	}
	for _, bad := range []string{"", "abc", "sha256:" + strings.Repeat("g", 64), "sha512:" + helloHex} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), "is not a sha256: want 64 hex digits") {
			t.Errorf("Parse(%q): %v", bad, err)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Copy writes through, reports progress every ProgressEvery bytes and at
// the end, and stops when the context is cancelled.
func TestCopy(t *testing.T) {
	size := int64(ProgressEvery + 5)
	var out bytes.Buffer
	var calls []int64
	d, err := Copy(context.Background(), &out, io.LimitReader(zeros{}, size), func(done int64) { calls = append(calls, done) })
	if err != nil {
		t.Fatal(err)
	}
	if d.Size != size || int64(out.Len()) != size || d != Bytes(out.Bytes()) {
		t.Errorf("copied %d of %d bytes", out.Len(), d.Size)
	}
	if len(calls) != 2 || calls[0] != ProgressEvery || calls[1] != size {
		t.Errorf("progress %v", calls)
	}
	calls = nil
	if _, err := Copy(context.Background(), nil, strings.NewReader(""), func(done int64) { calls = append(calls, done) }); err != nil || len(calls) != 1 || calls[0] != 0 {
		t.Errorf("empty: progress %v, %v", calls, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Copy(ctx, nil, zeros{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, io.ErrShortWrite }

// A Writer hashes only what the writer behind it took.
func TestWriter(t *testing.T) {
	w := NewWriter(shortWriter{})
	n, err := w.Write([]byte("hello\nhello\n"))
	if n != 6 || !errors.Is(err, io.ErrShortWrite) || w.Digest() != Bytes([]byte("hello\n")) {
		t.Errorf("%d %v %s", n, err, w.Digest())
	}
	tee := NewWriter(nil)
	if _, err := io.Copy(io.Discard, io.TeeReader(strings.NewReader("hello\n"), tee)); err != nil || tee.Digest().Hex() != helloHex {
		t.Errorf("tee: %s %v", tee.Digest(), err)
	}
}

// Hashing a large file allocates a fixed buffer, not the file.
func TestFileMemoryFlat(t *testing.T) {
	const size = 256 << 20
	p := filepath.Join(t.TempDir(), "big")
	testenv.Sparse(t, p, size)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := File(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if d.Size != size {
		t.Fatalf("size %d", d.Size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("hashing %d MiB allocated %d bytes", size>>20, alloc)
	}
}
