package recipes

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/gpuaas/imagectl/internal/hclkit"
)

// The bounds on what one function call in a recipe may produce. Input
// limits (limits.go) bound what a recipe says, not what its functions
// make of it: indent(1e9, s) and format("%1000000000d", 1) ask for
// gigabytes from a few bytes of input (go-cty's range stops at 1,024
// numbers itself).
// The functions whose result size an argument sets are refused before they
// run when the result would pass these bounds; every other function's
// result is measured after it runs, so chains of locals stop growing at the
// first call past them. Both are far above what a recipe needs (the largest
// value of the shipped recipes is a package list of a few KB).
const (
	// maxResultBytes bounds one function result: its strings' bytes, plus
	// eight per number, bool and element.
	maxResultBytes = 16 * hclkit.MaxInputSize
	// maxFormatWidth bounds a width or precision in a format verb.
	maxFormatWidth = 1 << 16
)

// bounded wraps f so that a call whose result would be, or is, larger
// than the bounds above fails with a message saying so.
func bounded(name string, f function.Function) function.Function {
	pre := preChecks[name]
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      f.Params(),
		VarParam:    f.VarParam(),
		Type:        func(args []cty.Value) (cty.Type, error) { return f.ReturnTypeForValues(args) },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if pre != nil {
				if err := pre(args); err != nil {
					return cty.NilVal, err
				}
			}
			v, err := f.Call(args)
			if err != nil {
				return v, err
			}
			if n := valueSize(v, maxResultBytes); n > maxResultBytes {
				return cty.NilVal, fmt.Errorf("the result of %s is larger than %d MiB, the most one function call may produce", name, maxResultBytes>>20)
			}
			return v, nil
		},
	})
}

// valueSize estimates the memory a value holds, stopping once it passes
// budget.
func valueSize(v cty.Value, budget int) int {
	v, _ = v.UnmarkDeep()
	if v.IsNull() || !v.IsKnown() {
		return 0
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		return len(v.AsString())
	case ty.IsPrimitiveType():
		return 8
	case ty.IsSetType():
		// Iterating a set sorts it (n log² n in go-cty); a set's elements
		// are its arguments', which were measured when they were made.
		return 8 * v.LengthInt()
	case ty.IsListType(), ty.IsMapType(), ty.IsTupleType(), ty.IsObjectType():
		n := 0
		for it := v.ElementIterator(); it.Next() && n <= budget; {
			k, e := it.Element()
			n += 8 + valueSize(e, budget-n)
			if ty.IsMapType() || ty.IsObjectType() {
				n += valueSize(k, budget-n)
			}
		}
		return n
	}
	return 0
}

// preChecks refuse, before the call, the calls whose result an argument
// makes large.
var preChecks = map[string]func(args []cty.Value) error{
	"indent":     checkIndent,
	"format":     checkFormat,
	"formatlist": checkFormat,
}

// checkIndent refuses an indent whose result would pass maxResultBytes.
func checkIndent(args []cty.Value) error {
	if len(args) != 2 {
		return nil
	}
	spaces, _ := args[0].Unmark()
	str, _ := args[1].Unmark()
	if !spaces.IsKnown() || spaces.IsNull() || !str.IsKnown() || str.IsNull() || str.Type() != cty.String {
		return nil
	}
	n, _ := spaces.AsBigFloat().Float64()
	s := str.AsString()
	if lines := float64(strings.Count(s, "\n")); n*lines+float64(len(s)) > maxResultBytes {
		return fmt.Errorf("indenting %d lines by %.0f spaces would make more than %d MiB", int(lines)+1, n, maxResultBytes>>20)
	}
	return nil
}

// formatWidth finds the widths and precisions of format verbs: %10d,
// %.3f, %[2]08.2f.
var formatWidth = regexp.MustCompile(`%[-+# 0]*(?:\[\d+\])?(\d*)(?:\.(\d*))?`)

// checkFormat refuses a format verb wider or more precise than
// maxFormatWidth.
func checkFormat(args []cty.Value) error {
	if len(args) == 0 {
		return nil
	}
	f, _ := args[0].Unmark()
	if !f.IsKnown() || f.IsNull() || f.Type() != cty.String {
		return nil
	}
	for _, m := range formatWidth.FindAllStringSubmatch(f.AsString(), -1) {
		for _, digits := range m[1:] {
			if digits == "" {
				continue
			}
			if n, err := strconv.Atoi(digits); err != nil || n > maxFormatWidth {
				return fmt.Errorf("the format's width or precision %s is larger than %d", digits, maxFormatWidth)
			}
		}
	}
	return nil
}
