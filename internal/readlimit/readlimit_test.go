package readlimit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 10), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := File(p, 10); err != nil || len(b) != 10 {
		t.Errorf("at the limit: %d bytes, %v", len(b), err)
	}
	if _, err := File(p, 9); !errors.Is(err, ErrTooLarge) {
		t.Errorf("past the limit: %v", err)
	}
	if _, err := File(filepath.Join(t.TempDir(), "none"), 9); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}
