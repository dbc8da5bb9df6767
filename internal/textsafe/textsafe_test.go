package textsafe

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTerminal(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, ünïcödé → ok", "plain text, ünïcödé → ok"},
		{"\x1b]0;owned\x07\x1b[2J", `\x1b]0;owned\a\x1b[2J`},
		{"name\nerror: fake", `name\nerror: fake`},
		{"tab\there", `tab\there`},
		{"c1 \u009b31m bidi \u202e", `c1 \u009b31m bidi \u202e`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"replacement \ufffd", `replacement \ufffd`},
		{"del \x7f", `del \x7f`},
	} {
		if got := Terminal(c.in); got != c.want {
			t.Errorf("Terminal(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Escape("a\n\tb\x1b", "\n\t"); got != "a\n\tb\\x1b" {
		t.Errorf("Escape keeping newline and tab: %q", got)
	}
}

// Whatever the input, Terminal's output is valid UTF-8 of printable
// characters only.
func FuzzTerminal(f *testing.F) {
	f.Add("\x1b[31m\n\xff\u202e\u0085")
	f.Fuzz(func(t *testing.T, s string) {
		out := Terminal(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Terminal(%q) = %q: invalid UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == utf8.RuneError {
				t.Fatalf("Terminal(%q) = %q holds %U", s, out, r)
			}
		}
	})
}

func TestCut(t *testing.T) {
	if got := Cut("ääää", 2); got != "ää…" {
		t.Errorf("Cut = %q", got)
	}
	if got := Cut("abc", 3); got != "abc" {
		t.Errorf("Cut = %q", got)
	}
}

func TestMarkdownText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"gpuaas-h200-host 1.4.0", "gpuaas-h200-host 1.4.0"},
		{"x\n# Owned", `x\\n\# Owned`},
		{"[click](http://evil.example)", `\[click\](http://evil.example)`},
		{"<img src=x onerror=alert(1)>", `\<img src=x onerror=alert(1)\>`},
		{"a | b *c* _d_ ~~e~~ `f` &amp; $x$ !", `a \| b \*c\* \_d\_ \~\~e\~\~ \` + "`" + `f\` + "`" + ` \&amp; \$x\$ \!`},
		{"\x1b[2J", `\\x1b\[2J`},
	} {
		if got := MarkdownText(c.in); got != c.want {
			t.Errorf("MarkdownText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMarkdownCode(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"+ curl 8.5", "`+ curl 8.5`"},
		{"a`b", "``a`b``"},
		{"`x``", "``` `x`` ```"},
		{" both ", "`  both  `"},
		{"x\n# Owned <b>", "`x\\n# Owned <b>`"},
		{"", "`  `"},
	} {
		if got := MarkdownCode(c.in); got != c.want {
			t.Errorf("MarkdownCode(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

type kind string

func TestFprintf(t *testing.T) {
	var b strings.Builder
	Fprintf(&b, "%s|%v|%s|%d|%-6s|%q\n", "a\x1b", errors.New("e\nf"), kind("k\r"), 42, "pad", "q\x07")
	if got, want := b.String(), `a\x1b|e\nf|k\r|42|pad   |"q\\a"`+"\n"; got != want {
		t.Errorf("Fprintf wrote %q, want %q", got, want)
	}
}

type named string

func (n named) String() string { return "named:" + string(n) }

type profile struct{ id string }

func (p *profile) String() string { return p.id }

type mode uint32

func (m mode) String() string { return "mode" }

// What a Stringer prints is escaped too, unless it is a number that a
// verb may format as one.
func TestFprintfStringers(t *testing.T) {
	var b strings.Builder
	Fprintf(&b, "%s|%v|%d|%s\n", named("a\x1b"), &profile{"p\n# fake"}, mode(7), mode(7))
	if got, want := b.String(), `named:a\x1b|p\n# fake|7|mode`+"\n"; got != want {
		t.Errorf("Fprintf wrote %q, want %q", got, want)
	}
}
