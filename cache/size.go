package cache

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bound is the PruneOptions for a size ("" for none, else as ParseSize
// reads it) and an age (0 for none): with neither, everything not in use
// goes.
func Bound(maxSize string, olderThan time.Duration) (PruneOptions, error) {
	o := PruneOptions{OlderThan: olderThan}
	switch {
	case maxSize != "":
		n, err := ParseSize(maxSize)
		if err != nil {
			return PruneOptions{}, err
		}
		o.MaxBytes = n
	case olderThan == 0:
		o.MaxBytes = -1
	}
	return o, nil
}

// ParseSize reads sizes such as 800M, 50G or 1073741824: K, M, G and T are
// powers of 1024, and a B or iB after them is allowed.
func ParseSize(s string) (int64, error) {
	orig := s
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I"))
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size such as 800M or 50G", orig)
	}
	return n * mult, nil
}
