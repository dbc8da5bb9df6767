package recipes

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/hclkit"
)

// attrs evaluates the attributes of one block. Every getter returns the
// given default when the attribute is absent, null, or not known (a value
// that depends on a variable that already failed: the failure has been
// reported once and is not reported again here). Type errors are collected
// in diags with the attribute's expression as subject.
//
// Values come back without marks; the marks of an attribute's value (where
// its parts came from, origin.go) are kept aside for path.
type attrs struct {
	m      hcl.Attributes
	ctx    *hcl.EvalContext
	diags  *hcl.Diagnostics
	failed map[string]bool
	marks  map[string]cty.ValueMarks
}

func newAttrs(content *hcl.BodyContent, ctx *hcl.EvalContext, diags *hcl.Diagnostics) attrs {
	return attrs{m: content.Attributes, ctx: ctx, diags: diags, failed: map[string]bool{}, marks: map[string]cty.ValueMarks{}}
}

// decodeBody decodes body against schema, adding what that reports to
// diags, and returns the body's content and its attributes, evaluated in
// ctx.
func decodeBody(body hcl.Body, schema *hcl.BodySchema, ctx *hcl.EvalContext, diags *hcl.Diagnostics) (*hcl.BodyContent, attrs) {
	content, d := body.Content(schema)
	*diags = append(*diags, d...)
	return content, newAttrs(content, ctx, diags)
}

// ok reports whether the attribute is written and evaluated to a usable
// value, so that checks on its value do not pile onto an error already
// reported for it.
func (a attrs) ok(name string) bool { return a.has(name) && !a.failed[name] }

// has reports whether the attribute is written in the block.
func (a attrs) has(name string) bool { _, ok := a.m[name]; return ok }

// rng is the range of the attribute's expression, or nil when absent.
func (a attrs) rng(name string) *hcl.Range {
	if at, ok := a.m[name]; ok {
		r := at.Expr.Range()
		return &r
	}
	return nil
}

// value evaluates and converts an attribute. ok is false when the attribute
// is absent, null, unknown or of the wrong type.
func (a attrs) value(name string, ty cty.Type) (cty.Value, bool) {
	at, ok := a.m[name]
	if !ok {
		return cty.NilVal, false
	}
	v, diags := at.Expr.Value(a.ctx)
	*a.diags = append(*a.diags, diags...)
	v, marks := v.UnmarkDeep()
	a.marks[name] = marks
	if diags.HasErrors() || !v.IsWhollyKnown() {
		a.failed[name] = true
		return cty.NilVal, false
	}
	if v.IsNull() {
		return cty.NilVal, false
	}
	cv, err := convertValue(v, ty)
	if err != nil {
		a.failed[name] = true
		r := at.Expr.Range()
		*a.diags = append(*a.diags, &hcl.Diagnostic{
			Severity:    hcl.DiagError,
			Summary:     "Incorrect attribute value type",
			Detail:      fmt.Sprintf("Inappropriate value for attribute %q: %s.", name, convertErrText(err, ty)),
			Subject:     &r,
			Expression:  at.Expr,
			EvalContext: a.ctx,
		})
		return cty.NilVal, false
	}
	if cv.IsNull() || !cv.IsWhollyKnown() {
		return cty.NilVal, false
	}
	return cv, true
}

func convertErrText(err error, ty cty.Type) string {
	switch {
	case ty == cty.String:
		return "a string is required"
	case ty == cty.Bool:
		return "a bool (true or false) is required"
	case ty == cty.Number:
		return "a number is required"
	case ty.IsListType() && ty.ElementType() == cty.String:
		return "a list of strings is required"
	}
	return err.Error()
}

// path reads a string attribute that names a file or directory, and
// whether the user typed it (-var, a var file, IMAGECTL_VAR_*: origin.go).
func (a attrs) path(name string) (string, bool) {
	p := a.str(name, "")
	return p, userTyped(p, a.marks[name])
}

func (a attrs) str(name, def string) string {
	v, ok := a.value(name, cty.String)
	if !ok {
		return def
	}
	return v.AsString()
}

// nonBlank reads a string attribute that, when written, must hold more than
// white space: a blank one is reported as summary and detail. Absent, it
// is "".
func (a attrs) nonBlank(name, summary, detail string) string {
	s := a.str(name, "")
	if a.ok(name) && strings.TrimSpace(s) == "" {
		a.errorAt(name, summary, detail)
	}
	return s
}

// checkedList reads a list of strings and reports each element that check
// finds wrong, at the element, as summary with check's message.
func (a attrs) checkedList(name, summary string, check func(string) string) []string {
	items, ranges := a.strList(name)
	for i, it := range items {
		if msg := check(it); msg != "" {
			*a.diags = append(*a.diags, hclkit.ErrorAt(ranges[i], summary, msg))
		}
	}
	return items
}

// duration reads a duration in whole seconds: a number of seconds or a
// string such as "30s" or "2m". ok is false when absent or invalid (an
// invalid one is reported).
func (a attrs) duration(name string) (time.Duration, bool) {
	v, ok := a.value(name, cty.DynamicPseudoType)
	if !ok {
		return 0, false
	}
	var dur time.Duration
	var err error
	switch v.Type() {
	case cty.Number:
		f, _ := v.AsBigFloat().Float64()
		dur = time.Duration(f * float64(time.Second))
	case cty.String:
		dur, err = time.ParseDuration(v.AsString())
	default:
		err = fmt.Errorf("a duration such as \"30s\" or a number of seconds is required")
	}
	switch {
	case err != nil:
		a.errorAt(name, "Invalid duration", err.Error()+".")
		return 0, false
	case dur%time.Second != 0:
		a.errorAt(name, "Invalid duration", "Give a whole number of seconds.")
		return 0, false
	}
	return dur, true
}

func (a attrs) boolean(name string, def bool) bool {
	v, ok := a.value(name, cty.Bool)
	if !ok {
		return def
	}
	return v.True()
}

// integer reads a whole number; a fraction is an error.
func (a attrs) integer(name string, def int) int {
	v, ok := a.value(name, cty.Number)
	if !ok {
		return def
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if acc != big.Exact || i > 1<<31 || i < -(1<<31) {
		a.failed[name] = true
		a.errorAt(name, "Invalid number", fmt.Sprintf("%q must be a whole number.", name))
		return def
	}
	return int(i)
}

// strList reads a list of strings and returns, beside it, the source range
// of each element: the element's own range when the list is written out
// literally, the whole expression's range otherwise.
func (a attrs) strList(name string) ([]string, []hcl.Range) {
	v, ok := a.value(name, cty.List(cty.String))
	if !ok {
		return nil, nil
	}
	at := a.m[name]
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		if ev.IsNull() {
			out = append(out, "")
			continue
		}
		out = append(out, ev.AsString())
	}
	ranges := make([]hcl.Range, len(out))
	exprs, diags := hcl.ExprList(at.Expr)
	for i := range ranges {
		if !diags.HasErrors() && len(exprs) == len(out) {
			ranges[i] = exprs[i].Range()
		} else {
			ranges[i] = at.Expr.Range()
		}
	}
	return out, ranges
}

// anyMap reads a map of any values (used for template and layer variables).
// Its values keep their marks (where they came from, origin.go), the map's
// own ones included: a layer file's paths made from them are the user's
// when theirs were.
func (a attrs) anyMap(name string) (map[string]cty.Value, bool) {
	at, ok := a.m[name]
	if !ok {
		return nil, false
	}
	v, diags := at.Expr.Value(a.ctx)
	*a.diags = append(*a.diags, diags...)
	v, marks := v.Unmark()
	if diags.HasErrors() || v.IsNull() || !v.IsWhollyKnown() {
		return nil, false
	}
	if !v.Type().IsObjectType() && !v.Type().IsMapType() {
		a.errorAt(name, "Incorrect attribute value type", fmt.Sprintf("%q must be an object, such as { name = value }.", name))
		return nil, false
	}
	m := v.AsValueMap()
	for k, ev := range m {
		m[k] = ev.WithMarks(marks)
	}
	return m, true
}

func (a attrs) errorAt(name, summary, detail string) {
	*a.diags = append(*a.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  a.rng(name),
	})
}

func (a attrs) warnAt(name, summary, detail string) {
	*a.diags = append(*a.diags, &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   detail,
		Subject:  a.rng(name),
	})
}

// labels tracks the labels of one kind of block in a scope; add reports a
// repeat, naming where the label was first used.
type labels struct {
	kind  string // "Layer", "file", ...
	scope string // " in this layer", or ""
	seen  map[string]hcl.Range
}

func newLabels(kind, scope string) labels {
	return labels{kind: kind, scope: scope, seen: map[string]hcl.Range{}}
}

func (l labels) add(b *hcl.Block, diags *hcl.Diagnostics) bool {
	name := b.Labels[0]
	if prev, dup := l.seen[name]; dup {
		*diags = append(*diags, hclkit.ErrorAt(b.LabelRanges[0], "Duplicate "+strings.ToLower(l.kind),
			fmt.Sprintf("%s %q is already defined%s at %s.", l.kind, name, l.scope, prev)))
		return false
	}
	l.seen[name] = b.DefRange
	return true
}

// decodeLabeled appends what decode makes of block b to *list, unless b's
// label repeats one that seen has (add reports it then).
func decodeLabeled[T any](list *[]T, seen labels, b *hcl.Block, diags *hcl.Diagnostics, decode func() (T, hcl.Diagnostics)) {
	if !seen.add(b, diags) {
		return
	}
	v, d := decode()
	*diags = append(*diags, d...)
	*list = append(*list, v)
}

// singleBlock returns the only block of a type, reporting any repeat.
func singleBlock(blocks hcl.Blocks, typ string, diags *hcl.Diagnostics) *hcl.Block {
	var first *hcl.Block
	for _, b := range blocks {
		if b.Type != typ {
			continue
		}
		if first != nil {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Duplicate %s block", typ),
				Detail:   fmt.Sprintf("Only one %s block is allowed here; the first is at %s.", typ, first.DefRange),
				Subject:  b.DefRange.Ptr(),
			})
			continue
		}
		first = b
	}
	return first
}
