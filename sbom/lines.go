package sbom

import (
	"bufio"
	"errors"
	"io"
	"strings"
)

// Bounds on what Scan reads of one file. Variables, not constants, so that
// tests can make them small.
var (
	// statusLimit is the largest dpkg status file Scan reads; a larger one
	// is refused.
	statusLimit int64 = 64 << 20
	// textLimit is how much of a copyright, os-release or apt sources file
	// Scan reads; the rest is not read.
	textLimit int64 = 1 << 20
	// lineLimit is the longest line Scan parses; a longer one is skipped.
	lineLimit = 64 << 10
)

// eachLine calls fn with each line of r, without its line ending. A line
// longer than max bytes is skipped whole, never buffered.
func eachLine(r io.Reader, max int, fn func(line string) error) error {
	br := bufio.NewReaderSize(r, max)
	skipping := false
	for {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			skipping = true
			continue
		}
		if err != nil && err != io.EOF {
			return err
		}
		if skipping {
			// The tail of an overlong line.
			skipping = false
		} else if len(b) > 0 {
			if ferr := fn(strings.TrimRight(string(b), "\r\n")); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// stanzas calls fn with the fields of each RFC 822 style stanza of r (dpkg
// status, deb822 sources): field names lowercased, continuation lines
// (those starting with a space or tab) joined to their field's value with
// a newline. Lines starting with '#' are comments when comments is true.
// Stanzas are separated by blank lines.
func stanzas(r io.Reader, comments bool, fn func(fields map[string]string) error) error {
	fields := map[string]string{}
	last := ""
	flush := func() error {
		if len(fields) == 0 {
			return nil
		}
		err := fn(fields)
		fields, last = map[string]string{}, ""
		return err
	}
	err := eachLine(r, lineLimit, func(line string) error {
		switch {
		case strings.TrimSpace(line) == "":
			return flush()
		case comments && line[0] == '#':
			return nil
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				fields[last] += "\n" + strings.TrimSpace(line)
			}
			return nil
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			last = ""
			return nil
		}
		last = strings.ToLower(strings.TrimSpace(name))
		if _, seen := fields[last]; seen {
			// dpkg keeps the first; so do we.
			last = ""
			return nil
		}
		fields[last] = strings.TrimSpace(value)
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
