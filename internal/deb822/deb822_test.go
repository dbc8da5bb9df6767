package deb822

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	var got []string
	in := "a\r\n" + strings.Repeat("x", 40) + "\nb\n\n" + strings.Repeat("y", 16) + "\nc"
	err := Lines(strings.NewReader(in), 16, func(l string) error { got = append(got, l); return nil })
	if err != nil {
		t.Fatal(err)
	}
	// "y"*16 plus its newline is 17 bytes: over a 16-byte buffer.
	if want := []string{"a", "b", "", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}

func TestParagraphs(t *testing.T) {
	in := "Package: a\nDescription: one\n more\n\tand more\nPackage: again\n" +
		"# not a comment here\n" + strings.Repeat("x", 80) + "\n" +
		" \n\n\n" +
		"# a comment: here\nTypes: deb\nURIs:  http://deb.example  \nno colon\n continued nowhere\n"
	for _, tc := range []struct {
		name     string
		comments bool
		want     []map[string]string
	}{
		{"without comments", false, []map[string]string{
			{"package": "a", "description": "one\nmore\nand more"},
			{"# a comment": "here", "types": "deb", "uris": "http://deb.example"},
		}},
		{"with comments", true, []map[string]string{
			{"package": "a", "description": "one\nmore\nand more"},
			{"types": "deb", "uris": "http://deb.example"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []map[string]string
			err := Paragraphs(strings.NewReader(in), tc.comments, 64, func(f map[string]string) error {
				got = append(got, f)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("paragraphs\n got %q\nwant %q", got, tc.want)
			}
		})
	}
	stop := errors.New("stop")
	n := 0
	if err := Paragraphs(strings.NewReader(in), true, 64, func(map[string]string) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("fn's error: %v after %d paragraphs", err, n)
	}
}

// TestOverlongLineEndsItsField: the continuation lines after a skipped
// overlong line are not appended to the field before it.
func TestOverlongLineEndsItsField(t *testing.T) {
	in := "Package: a\nDescription: short\nFilename: " + strings.Repeat("x", 64) + "\n more\nSize: 3\n"
	var got []map[string]string
	if err := Paragraphs(strings.NewReader(in), false, 32, func(f map[string]string) error {
		got = append(got, f)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{{"package": "a", "description": "short", "size": "3"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paragraphs %q, want %q", got, want)
	}
}
