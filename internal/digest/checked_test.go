package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

func readChunks(r io.ReaderAt, size, chunk int64) ([]byte, error) {
	var out bytes.Buffer
	for off := int64(0); off < size; off += chunk {
		n := min(chunk, size-off)
		if _, err := io.Copy(&out, io.NewSectionReader(r, off, n)); err != nil {
			return out.Bytes(), err
		}
	}
	return out.Bytes(), nil
}

func TestCheckedReaderAt(t *testing.T) {
	data := bytes.Repeat([]byte("imagectl checked reads "), 5000)
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	size := int64(len(data))

	t.Run("in order, twice, with a chunk read again", func(t *testing.T) {
		c, err := NewCheckedReaderAt(bytes.NewReader(data), size, want)
		if err != nil {
			t.Fatal(err)
		}
		if c.Verified() {
			t.Fatal("verified before a read")
		}
		for range 2 { // an upload that starts over reads from 0 again
			got, err := readChunks(c, size, 7000)
			if err != nil || !bytes.Equal(got, data) || !c.Verified() {
				t.Fatalf("read %d bytes, err %v, verified %v", len(got), err, c.Verified())
			}
		}
		// A retried chunk re-reads bytes already hashed; from offset 0,
		// it starts the check over.
		if _, err := io.Copy(io.Discard, io.NewSectionReader(c, 0, 7000)); err != nil {
			t.Fatal(err)
		}
		if c.Verified() {
			t.Fatal("still verified after a read from 0 started over")
		}
		if _, err := io.Copy(io.Discard, io.NewSectionReader(c, 0, 7000)); err != nil {
			t.Fatal(err)
		}
		if _, err := readChunks(c, size, 7000); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("other content: the last bytes are refused", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[100] ^= 1
		c, _ := NewCheckedReaderAt(bytes.NewReader(bad), size, want)
		got, err := readChunks(c, size, 7000)
		if err == nil || !strings.Contains(err.Error(), "refusing its last bytes") || !errors.Is(err, ErrMismatch) {
			t.Fatalf("err = %v", err)
		}
		if int64(len(got)) >= size || c.Verified() {
			t.Fatalf("handed out all %d bytes of the wrong content, or verified it: %v", len(got), c.Verified())
		}
	})

	t.Run("skipping ahead leaves the end unchecked", func(t *testing.T) {
		c, _ := NewCheckedReaderAt(bytes.NewReader(data), size, want)
		if _, err := io.Copy(io.Discard, io.NewSectionReader(c, size-10, 10)); err == nil || c.Verified() {
			t.Fatalf("the last bytes were handed out unchecked: %v, verified %v", err, c.Verified())
		}
	})

	t.Run("a short blob", func(t *testing.T) {
		c, _ := NewCheckedReaderAt(bytes.NewReader(data[:size-1]), size, want)
		if _, err := readChunks(c, size, 7000); err == nil || !errors.Is(err, ErrMismatch) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("a blob one byte short: %v", err)
		}
	})
}
