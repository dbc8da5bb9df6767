// Package readlimit owns reading a whole file into memory within a bound:
// the file is refused once it passes the bound, without reading further,
// so a huge file (or a device, or a FIFO someone fills) named where a
// small one belongs costs no more than the bound. Recipes, templates and
// signature files are read through it.
package readlimit

import (
	"errors"
	"io"
	"os"
)

// ErrTooLarge is File's error for a file larger than its limit.
var ErrTooLarge = errors.New("file larger than its limit")

// File reads path whole, or fails with ErrTooLarge once it has read more
// than limit bytes.
func File(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, ErrTooLarge
	}
	return b, nil
}
