package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
)

// The documentation's examples are tested: every imagectl line in a code
// block of README.md and docs/*.md, and every line of the commands' --help
// examples, names a command, flags and an argument count that exist
// (cobra's Find, ParseFlags and argument validation, without running it).
// A line that needs no network, appliance or file outside the checkout is
// run besides, and must exit 0. A --flag the documents' prose names must
// be a flag of some imagectl command.

// docLine is one imagectl command line of a document.
type docLine struct {
	where string   // file:line
	env   []string // NAME=value words before imagectl
	args  []string // the words after imagectl
}

// TestDocsExamples checks every imagectl line of README.md and docs/.
func TestDocsExamples(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md"}, files...)
	ran, parsed := 0, 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownCommands(f, string(text)) {
			run, err := checkDocLine(t, l)
			switch {
			case err != nil:
				t.Errorf("%s: imagectl %s: %v", l.where, strings.Join(l.args, " "), err)
			case run:
				t.Logf("ran    %s", l.where)
				ran++
			default:
				t.Logf("parsed %s", l.where)
				parsed++
			}
		}
	}
	t.Logf("%d documented imagectl lines run, %d parsed only", ran, parsed)
	if ran == 0 || parsed == 0 {
		t.Errorf("%d lines run and %d parsed: the extraction finds nothing", ran, parsed)
	}
}

// TestDocsFlagsExist: every --flag the documents' prose names is a flag of
// an imagectl command, unless it is one of the other tools' flags the
// documents quote.
func TestDocsFlagsExist(t *testing.T) {
	others := map[string]bool{
		"format": true, "query-gpu": true, // nvidia-smi
		"target":     true,                        // grub-install
		"wait":       true,                        // systemctl is-system-running
		"xattrs":     true,                        // tar
		"print-uris": true, "download-only": true, // apt-get
		"json": true, // the image's validation script
		"help": true, // cobra's, on every command
	}
	root := newRootCmd(streams{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}}, nil)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var isFlag func(c *cobra.Command, name string) bool
	isFlag = func(c *cobra.Command, name string) bool {
		if c.Flags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil {
			return true
		}
		return slices.ContainsFunc(c.Commands(), func(sub *cobra.Command) bool { return isFlag(sub, name) })
	}
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range append([]string{"README.md"}, files...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range markdownProse(string(text)) {
			for _, m := range proseFlag.FindAllStringSubmatch(l, -1) {
				n++
				if !others[m[1]] && !isFlag(root, m[1]) {
					t.Errorf("%s:%d: --%s is no flag of any imagectl command", f, i+1, m[1])
				}
			}
		}
	}
	if n == 0 {
		t.Error("no flag found in the documents' prose")
	}
}

// proseFlag is a --flag written in prose.
var proseFlag = regexp.MustCompile(`(?:^|[^\w-])--([a-z][a-z0-9-]*)`)

// markdownProse returns a document's lines with its code lines emptied.
func markdownProse(text string) []string {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, l := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		if fence {
			fenced = !fenced
		}
		if fence || fenced || strings.HasPrefix(l, "    ") {
			lines[i] = ""
		}
	}
	return lines
}

// TestDocsLinks: every relative link of the documents names a file of the
// checkout and, into a document, one of its headings.
func TestDocsLinks(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md"}, files...)
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markdownLink.FindAllStringSubmatch(strings.Join(markdownProse(string(text)), "\n"), -1) {
			link := m[1]
			if strings.Contains(link, "://") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
			}
			doc, err := os.ReadFile(target)
			if err != nil {
				t.Errorf("%s: link %s: %v", f, link, err)
				continue
			}
			if anchor != "" && !slices.Contains(headingAnchors(string(doc)), anchor) {
				t.Errorf("%s: link %s: %s has no such heading", f, link, target)
			}
		}
	}
}

// markdownLink is the target of a Markdown link.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingAnchors are the anchors GitHub gives a document's headings:
// lower case, spaces as dashes, punctuation but dashes and underscores
// dropped.
func headingAnchors(doc string) []string {
	var out []string
	for _, l := range markdownProse(doc) {
		h := strings.TrimLeft(l, "#")
		if h == l || !strings.HasPrefix(h, " ") {
			continue
		}
		var a strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		out = append(out, a.String())
	}
	return out
}

// TestHelpExamples checks the Example lines of every command's --help.
func TestHelpExamples(t *testing.T) {
	root := newRootCmd(streams{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}}, nil)
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, l := range codeCommands(c.CommandPath()+" --help", strings.Split(c.Example, "\n")) {
			n++
			if err := parseDocLine(l); err != nil {
				t.Errorf("%s: imagectl %s: %v", l.where, strings.Join(l.args, " "), err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 20 {
		t.Errorf("only %d help examples found", n)
	}
}

// TestDocsCheckFails shows that the check catches a broken line: each of
// these fails it, and the good ones pass.
func TestDocsCheckFails(t *testing.T) {
	for _, tc := range []struct {
		line    string
		wantRun bool
		wantErr string // "" for a line that passes
	}{
		{"imagectl build recipes/h200.hcl --dry-run", true, ""},
		{"imagectl promote gpuaas-h200-host-ubuntu2404 1.4.0 --site maas280 --key cosign.pub", false, ""},
		{"imagectl biuld recipes/h200.hcl --dry-run", false, "unknown command"},
		{"imagectl build recipes/h200.hcl --dry-rn", false, "unknown flag: --dry-rn"},
		{"imagectl build recipes/a.hcl recipes/b.hcl --dry-run", false, "accepts 1 arg"},
		{"imagectl cache lss", false, "not a command that runs"},
		{"imagectl build recipes/h200.hcl --dry-run -var no_such_variable=1", true, "exit status 1"},
		{"imagectl fmt --check no-such-directory", true, "exit status"},
	} {
		lines := codeCommands("case", []string{tc.line})
		if len(lines) != 1 {
			t.Fatalf("%q: %d command lines", tc.line, len(lines))
		}
		ran, err := checkDocLine(t, lines[0])
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.line, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want one with %q", tc.line, err, tc.wantErr)
		case ran != tc.wantRun:
			t.Errorf("%q: run %v, want %v", tc.line, ran, tc.wantRun)
		}
	}
}

// TestMarkdownCommands: what counts as a command line of a document.
func TestMarkdownCommands(t *testing.T) {
	doc := "Prose: imagectl build x.hcl is not code.\n\n" +
		"    make test    # an indented block\n    imagectl version\n\n" +
		"```sh\n# a comment\nCOSIGN_PASSWORD=... imagectl keygen   # cosign.key + cosign.pub\n" +
		"imagectl promote a 1 --site s \\\n    --reason \"CUDA 12.8\"   # continued\n" +
		"imagectl build r.hcl --dry-run -o json > plan.json\ncosign verify-blob x\n```\n" +
		"- a list\n\n  ```sh\n  bin/imagectl diff a b | less\n  ```\n"
	var got []string
	for _, l := range markdownCommands("doc.md", doc) {
		got = append(got, fmt.Sprintf("%s %q %q", l.where, l.env, l.args))
	}
	want := []string{
		`doc.md:4 [] ["version"]`,
		`doc.md:8 ["COSIGN_PASSWORD=..."] ["keygen"]`,
		`doc.md:9 [] ["promote" "a" "1" "--site" "s" "--reason" "CUDA 12.8"]`,
		`doc.md:11 [] ["build" "r.hcl" "--dry-run" "-o" "json"]`,
		`doc.md:17 [] ["diff" "a" "b"]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// markdownCommands returns the imagectl lines of a Markdown document's code:
// fenced blocks, and lines indented by four spaces or more outside them.
func markdownCommands(name, text string) []docLine {
	var code []string // the document's lines, "" where not code
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		switch trimmed := strings.TrimSpace(l); {
		case strings.HasPrefix(trimmed, "```"):
			fenced = !fenced
			code = append(code, "")
		case fenced || strings.HasPrefix(l, "    "):
			code = append(code, l)
		default:
			code = append(code, "")
		}
	}
	return codeCommands(name, code)
}

// codeCommands returns the imagectl lines of code lines: a line ending in a
// backslash continues on the next; comments, redirections and what follows
// a pipe or a list operator are dropped; NAME=value words before the
// command are its environment.
func codeCommands(name string, lines []string) []docLine {
	var out []docLine
	for i := 0; i < len(lines); i++ {
		start, l := i, strings.TrimSpace(lines[i])
		for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, `\`) + " " + strings.TrimSpace(lines[i])
		}
		words := shellWords(l)
		var env []string
		for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
			env, words = append(env, words[0]), words[1:]
		}
		if len(words) == 0 || (words[0] != "imagectl" && words[0] != "bin/imagectl") {
			continue
		}
		out = append(out, docLine{where: fmt.Sprintf("%s:%d", name, start+1), env: env, args: words[1:]})
	}
	return out
}

// shellWords splits a shell line into words, with quotes, as far as a
// comment, a redirection, a pipe or a list operator.
func shellWords(l string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case (r == '#' && !inWord) || r == '>' || r == '<' || r == '|' || r == ';' || r == '&':
			if inWord && r != '#' && !strings.HasSuffix(w.String(), "2") {
				words = append(words, w.String())
			}
			return words
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// parseDocLine checks that a line names a command that runs, flags it has
// and as many arguments as it takes, without running it.
func parseDocLine(l docLine) error {
	root := newRootCmd(streams{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}}, nil)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	args := normalizeArgs(l.args)
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if !cmd.Runnable() {
		return fmt.Errorf("%q is not a command that runs", cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if help, _ := cmd.Flags().GetBool("help"); help {
		return nil
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err
	}
	return cmd.ValidateRequiredFlags()
}

// offline are the commands a documented line may be run with: those that
// read only local files and start no appliance.
func offline(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "build":
		return slices.Contains(args, "--dry-run")
	case "fmt":
		return slices.Contains(args, "--check") || slices.Contains(args, "-check")
	case "validate", "validate-script", "firstboot", "version", "completion", "help":
		return true
	}
	return false
}

// checkDocLine parses l, then runs it when it is offline and every path it
// names (a word with a slash or a file extension, a -var value too) exists
// in the checkout: a path of the reader's own machine is an example. An
// --out file goes to a temporary directory.
func checkDocLine(t *testing.T, l docLine) (ran bool, err error) {
	t.Helper()
	if err := parseDocLine(l); err != nil {
		return false, err
	}
	if !offline(l.args) {
		return false, nil
	}
	args := slices.Clone(l.args)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if (a == "--out" || a == "-out") && i+1 < len(args) {
			args[i+1] = filepath.Join(t.TempDir(), filepath.Base(args[i+1]))
			i++
			continue
		}
		_, v, ok := strings.Cut(a, "=")
		if !ok || strings.HasPrefix(a, "-") {
			v = a
		}
		if strings.Contains(v, "://") {
			return false, nil
		}
		if pathLike(v) {
			if _, err := os.Stat(v); err != nil {
				return false, nil
			}
		}
	}
	cache := t.TempDir()
	env := append([]string{"XDG_CACHE_HOME=" + cache, "IMAGECTL_CACHE_DIR=" + cache, "HOME=" + cache}, l.env...)
	var out, errb bytes.Buffer
	code := run(context.Background(), args, streams{in: strings.NewReader(""), out: &out, err: &errb}, env)
	if code != 0 {
		return true, fmt.Errorf("exit status %d: %s", code, strings.TrimSpace(errb.String()))
	}
	return true, nil
}

// pathLike says whether a word names a file: it holds a slash, or ends in
// one of the extensions imagectl's files have.
func pathLike(v string) bool {
	if strings.HasPrefix(v, "-") {
		return false
	}
	if strings.Contains(v, "/") {
		return true
	}
	for _, ext := range []string{".hcl", ".json", ".tgz", ".key", ".pub", ".sh"} {
		if strings.HasSuffix(v, ext) {
			return true
		}
	}
	return false
}
