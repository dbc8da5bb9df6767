package deb822

import (
	"bufio"
	"errors"
	"io"
	"strings"
)

// Lines calls fn with each line of r, without its line ending. A line
// longer than max bytes is skipped whole, never buffered.
func Lines(r io.Reader, max int, fn func(line string) error) error {
	return lines(r, max, fn, func() {})
}

// lines is Lines, calling skipped for each overlong line it skips.
func lines(r io.Reader, max int, fn func(line string) error, skipped func()) error {
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
			skipped()
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

// Paragraphs calls fn with the fields of each paragraph of r: field names
// lowercased, continuation lines (those starting with a space or tab)
// joined to their field's value with a newline; a field named twice keeps
// its first value, as dpkg does. Lines starting with '#' are comments when
// comments is true; lines longer than maxLine bytes are skipped (Lines).
// Paragraphs are separated by blank lines.
func Paragraphs(r io.Reader, comments bool, maxLine int, fn func(fields map[string]string) error) error {
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
	// An overlong line skipped ends the field it was in or began: the
	// continuation lines after it are not the previous field's.
	err := lines(r, maxLine, func(line string) error {
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
			last = ""
			return nil
		}
		fields[last] = strings.TrimSpace(value)
		return nil
	}, func() { last = "" })
	if err != nil {
		return err
	}
	return flush()
}
