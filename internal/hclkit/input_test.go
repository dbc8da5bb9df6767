package hclkit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// nested returns an expression nested n levels deep in one of the ways
// hclsyntax recurses on.
func nested(kind string, n int) string {
	switch kind {
	case "brackets":
		return strings.Repeat("[", n) + strings.Repeat("]", n)
	case "braces":
		return strings.Repeat("{a = ", n) + "1" + strings.Repeat("}", n)
	case "parentheses":
		return strings.Repeat("(", n) + "1" + strings.Repeat(")", n)
	case "calls":
		return strings.Repeat("tolist(", n) + "[]" + strings.Repeat(")", n)
	case "interpolations":
		return strings.Repeat(`"${`, n) + "1" + strings.Repeat(`}"`, n)
	case "heredocs":
		return "<<EOT\n" + strings.Repeat("${<<EOT\n", n) + "x\n" + strings.Repeat("EOT\n}\n", n) + "EOT\n"
	case "directives":
		return `"` + strings.Repeat("%{if true}", n) + "x" + strings.Repeat("%{endif}", n) + `"`
	case "unary":
		return strings.Repeat("!", n) + "true"
	case "negation":
		return strings.Repeat("-", n) + "1"
	case "sums":
		return strings.Repeat("1 + ", n) + "1"
	case "sums over lines":
		return "(" + strings.Repeat("1 +\n", n) + "1)"
	case "conditionals":
		return strings.Repeat("true ? 1 : ", n) + "1"
	case "splats":
		return "[[1]]" + strings.Repeat("[*]", n)
	case "attribute splats":
		return "[{a = 1}]" + strings.Repeat(".*", n)
	}
	panic(kind)
}

var nestingKinds = []string{"brackets", "braces", "parentheses", "calls", "interpolations", "heredocs", "directives",
	"unary", "negation", "sums", "sums over lines", "conditionals", "splats", "attribute splats"}

// TestNestingLimit: each way of nesting is refused past MaxNesting with a
// diagnostic at the place, and each reads normally well within it. Before
// the limit, 60,000 brackets (120 KB) overflowed the stack.
func TestNestingLimit(t *testing.T) {
	for _, kind := range nestingKinds {
		t.Run(kind, func(t *testing.T) {
			src := "x = " + nested(kind, 20000) + "\n"
			diags := checkInput([]byte(src), "deep.hcl", hcl.InitialPos, configSyntax)
			if len(diags) != 1 || diags[0].Summary != "Nested too deeply" || diags[0].Subject == nil || diags[0].Subject.Start.Byte == 0 {
				t.Fatalf("20000 levels: %v", diags)
			}
			shallow := "x = " + nested(kind, 20) + "\n"
			if diags := checkInput([]byte(shallow), "ok.hcl", hcl.InitialPos, configSyntax); diags.HasErrors() {
				t.Errorf("20 levels refused: %v", diags)
			}
			// (HCL allows no splat inside an attribute splat.)
			if _, diags := ParseConfig([]byte(shallow), "ok.hcl"); diags.HasErrors() && kind != "attribute splats" {
				t.Errorf("20 levels do not parse: %v", diags)
			}
		})
	}
	// Operators count per expression: many short ones are fine.
	var many strings.Builder
	for range 1000 {
		many.WriteString("a = 1 + 2 * 3 - (4 / 5) == 6 ? !true : false\n")
	}
	many.WriteString("l = [" + strings.Repeat("1 + 1, ", 1000) + "]\n")
	// A line comment holds its line's newline (the lexer's token): lines
	// that end in one end their expressions too.
	for i := range 300 {
		fmt.Fprintf(&many, "c%d = 1 - 2 # note\n", i)
	}
	many.WriteString("o = {\n")
	for i := range 300 {
		fmt.Fprintf(&many, "  k%d = -1 // note\n", i)
	}
	many.WriteString("}\n")
	if diags := checkInput([]byte(many.String()), "flat.hcl", hcl.InitialPos, configSyntax); diags.HasErrors() {
		t.Errorf("short expressions refused: %v", diags)
	}
}
