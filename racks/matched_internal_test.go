package racks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"testing"
)

// A stream compared with the local copy is named by the sha256 of what it
// was, wherever it first differs, however it is cut into writes.
func TestMatchedNamesTheDigestOfWhatWasServed(t *testing.T) {
	const size = 700 << 10 // over two of matched's 256 KiB reads
	local := randomBytes(size, 1)
	rnd := rand.New(rand.NewPCG(1, 2))
	flip := func(at int) []byte { return flipped(local, at) }
	for _, c := range []struct {
		name   string
		stream []byte
		same   bool
	}{
		{"equal", local, true},
		{"first byte differs", flip(0), false},
		{"a middle byte differs", flip(300_001), false},
		{"the first byte of the second read differs", flip(256 << 10), false},
		{"the last byte differs", flip(size - 1), false},
		{"shorter", local[:size-5], true}, // equal as far as it goes: the count says the rest
		{"longer", append(bytes.Clone(local), 1, 2, 3), false},
		{"empty", nil, true},
	} {
		for _, cut := range []int{1 << 20, 4096, 77_777} {
			m := &matched{ctx: context.Background(), local: bytes.NewReader(local), size: size}
			for rest := c.stream; len(rest) > 0; {
				n := min(len(rest), 1+rnd.IntN(cut))
				if w, err := m.Write(rest[:n]); err != nil || w != n {
					t.Fatalf("%s, writes up to %d: wrote %d of %d: %v", c.name, cut, w, n, err)
				}
				rest = rest[n:]
			}
			sum := sha256.Sum256(c.stream)
			want := hex.EncodeToString(sum[:])
			got, err := m.sum()
			switch {
			case len(c.stream) > size:
				// More than the version: not hashed, never the version.
				if err == nil {
					t.Errorf("%s, writes up to %d: a digest %s of more than the size", c.name, cut, got)
				}
			case err != nil || got != want:
				t.Errorf("%s, writes up to %d: sum %s, %v; want %s", c.name, cut, got, err, want)
			}
			if m.same("") != c.same || m.off != int64(len(c.stream)) {
				t.Errorf("%s, writes up to %d: same %v, %d bytes counted of %d", c.name, cut, m.same(""), m.off, len(c.stream))
			}
		}
	}
}

// failingReaderAt fails every read.
type failingReaderAt struct{}

func (failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errors.New("disk gone") }

// A local copy that cannot be read says so, apart from the rack's bytes.
func TestMatchedLocalReadFailureIsNotTheRacks(t *testing.T) {
	m := &matched{ctx: context.Background(), local: failingReaderAt{}, size: 10}
	_, err := m.Write([]byte("abc"))
	var le *localError
	if !errors.As(err, &le) {
		t.Fatalf("%v, want a localError", err)
	}
}
