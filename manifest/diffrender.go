package manifest

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/textsafe"
)

// WriteText writes the diff for a terminal, grouped by what changed. What
// the manifests or SBOMs hold is escaped (textsafe.Terminal): it can
// neither drive the terminal nor start a line.
func (d *Diff) WriteText(w io.Writer) error {
	return d.write(w, diffStyle{
		heading: func(w io.Writer) {
			textsafe.Fprintf(w, "%s %s -> %s %s\n", d.A.Name, d.A.Version, d.B.Name, d.B.Version)
		},
		equal: "  no differences in content",
		title: "\n%s\n",
		line:  func(w io.Writer, l string) { textsafe.Fprintf(w, "  %s\n", l) },
	})
}

// WriteMarkdown writes the diff as a release-note section. What the
// manifests or SBOMs hold is Markdown's text, never its syntax: escaped in
// the heading (textsafe.MarkdownText), a code span in each change
// (textsafe.MarkdownCode), so that it adds no heading, link, table or HTML
// to the notes.
func (d *Diff) WriteMarkdown(w io.Writer) error {
	return d.write(w, diffStyle{
		heading: func(w io.Writer) {
			fmt.Fprintf(w, "## %s %s → %s\n", textsafe.MarkdownText(d.B.Name), textsafe.MarkdownText(d.A.Version), textsafe.MarkdownText(d.B.Version))
		},
		equal: "\nNo differences in content.",
		title: "\n### %s\n\n",
		line:  func(w io.Writer, l string) { fmt.Fprintf(w, "- %s\n", textsafe.MarkdownCode(l)) },
	})
}

// diffStyle is how write renders a diff: its heading, the line that says
// the contents are equal, a section's title (a format of the title) and
// each line of a section.
type diffStyle struct {
	heading func(w io.Writer)
	equal   string
	title   string
	line    func(w io.Writer, l string)
}

// write renders the diff in style s: the heading, then either the equal
// line or each non-empty section.
func (d *Diff) write(w io.Writer, s diffStyle) error {
	bw := bufio.NewWriter(w)
	s.heading(bw)
	if d.Equal {
		fmt.Fprintln(bw, s.equal)
		return bw.Flush()
	}
	d.sections(func(title string, lines []string) {
		fmt.Fprintf(bw, s.title, title)
		for _, l := range lines {
			s.line(bw, l)
		}
	})
	return bw.Flush()
}

// sections emits each non-empty group with one line per change.
func (d *Diff) sections(emit func(title string, lines []string)) {
	add := func(title string, lines []string) {
		if len(lines) > 0 {
			emit(title, lines)
		}
	}
	// A package of another architecture than most is written name:arch,
	// as dpkg writes a foreign package.
	name := func(n, arch string) string {
		if arch != "" && arch != "all" && arch != d.Packages.NativeArchitecture {
			return n + ":" + arch
		}
		return n
	}
	var pk []string
	for _, p := range d.Packages.Added {
		pk = append(pk, fmt.Sprintf("+ %s %s", name(p.Name, p.Architecture), p.Version))
	}
	for _, p := range d.Packages.Removed {
		pk = append(pk, fmt.Sprintf("- %s %s", name(p.Name, p.Architecture), p.Version))
	}
	for _, p := range d.Packages.Upgraded {
		pk = append(pk, fmt.Sprintf("↑ %s %s -> %s", name(p.Name, p.Architecture), p.From, p.To))
	}
	for _, p := range d.Packages.Downgraded {
		pk = append(pk, fmt.Sprintf("↓ %s %s -> %s", name(p.Name, p.Architecture), p.From, p.To))
	}
	add(fmt.Sprintf("Packages (%d added, %d removed, %d upgraded, %d downgraded)",
		len(d.Packages.Added), len(d.Packages.Removed), len(d.Packages.Upgraded), len(d.Packages.Downgraded)), pk)
	add("Kernel args", listLines(d.KernelArgs))
	add("Services enabled", listLines(d.Services))
	add("Layers", changeLines(d.Layers))
	add("Files", changeLines(d.Files))
	add("Bundles", changeLines(d.Bundles))
	add("Netdata", fieldLines(d.Netdata))
	add("Base image", fieldLines(d.Base))
	add("Artifact", fieldLines(d.Artifact))
}

func listLines(l ListChanges) []string {
	var out []string
	for _, x := range l.Added {
		out = append(out, "+ "+x)
	}
	for _, x := range l.Removed {
		out = append(out, "- "+x)
	}
	return out
}

func changeLines(cs []Change) []string {
	var out []string
	for _, c := range cs {
		switch c.Change {
		case "added":
			out = append(out, fmt.Sprintf("+ %s (%s)", c.Name, short(c.To)))
		case "removed":
			out = append(out, fmt.Sprintf("- %s (%s)", c.Name, short(c.From)))
		default:
			out = append(out, fmt.Sprintf("~ %s (%s -> %s)", c.Name, short(c.From), short(c.To)))
		}
	}
	return out
}

func fieldLines(fs []FieldChange) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("~ %s: %s -> %s", f.Field, f.From, f.To))
	}
	return out
}

// short abbreviates digests inside a change's value.
func short(s string) string {
	fields := strings.Fields(s)
	for i, f := range fields {
		f = strings.TrimPrefix(f, digest.Prefix)
		if len(f) == 64 {
			fields[i] = f[:12]
		}
	}
	return strings.Join(fields, " ")
}
