package shell

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// hostile are values an attacker or a careless user could put into
// generated shell.
var hostile = []string{
	"", "plain", "it's", "'", "''", `\'`, "a b", "$(touch pwned)", "`touch pwned`", "${HOME}",
	"x; touch pwned", "a\ntouch pwned", "*", "~", "#not a comment", "\"", `\`, "-n", "a|b&c>d<e",
	"\t\r\x1b[2J", "ünï\u202ecode",
}

// TestQuoteIsData sources each quoted value in /bin/sh: it prints back
// exactly the value and runs nothing (no file appears).
func TestQuoteIsData(t *testing.T) {
	dir := t.TempDir()
	var script strings.Builder
	for _, v := range hostile {
		script.WriteString("printf '%s\\0' " + Quote(v) + "\n")
	}
	script.WriteString("set -- " + Join(hostile) + "\nprintf '%s\\0' \"$#\"\n")
	cmd := exec.Command("/bin/sh", "-c", script.String())
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, script.String())
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	n := strconv.Itoa(len(hostile))
	want := append(append([]string{}, hostile...), n)
	if len(got) != len(want) {
		t.Fatalf("got %d values, want %d: %q", len(got), len(want), got)
	}
	for i := range hostile {
		if got[i] != want[i] {
			t.Errorf("value %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if got[len(got)-1] != n {
		t.Errorf("Join made %s words of %d values", got[len(got)-1], len(hostile))
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("quoted values ran a command: %s appeared", entries[0].Name())
	}
}

func TestComment(t *testing.T) {
	for in, want := range map[string]string{
		"demo 0.1.0":           "demo 0.1.0",
		"0.1\ntouch x":         `0.1\ntouch x`,
		"a\rb\x1b[2J\x00":      `a\rb\x1b[2J\x00`,
		"bidi\u202eoverride é": `bidi\u202eoverride é`,
		"bad \xff utf-8":       `bad \xff utf-8`,
		"\u2028line separator": `\u2028line separator`,
	} {
		if got := Comment(in); got != want {
			t.Errorf("Comment(%q) = %q, want %q", in, got, want)
		}
	}
}
