package recipes

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/shell"
)

// EnvPrefix prefixes the environment variables that set recipe variables:
// IMAGECTL_VAR_size=80G sets var.size.
const EnvPrefix = "IMAGECTL_VAR_"

// Inputs are the values given to a recipe's variables from outside it, from
// lowest to highest precedence: environment, var files in order, -var flags
// in order. Defaults are lower than all of them.
type Inputs struct {
	// Env is in os.Environ form; only IMAGECTL_VAR_* entries are read.
	Env []string
	// Files are var files: HCL files of name = value attributes.
	Files []string
	// Flags are -var arguments, "name=value".
	Flags []string
}

// decodeVariable decodes one variable block.
func decodeVariable(block *hcl.Block) (*Variable, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	v := &Variable{Name: block.Labels[0], DeclRange: block.DefRange, Type: cty.DynamicPseudoType}
	if !hclsyntax.ValidIdentifier(v.Name) {
		diags = append(diags, hclkit.ErrorAt(block.LabelRanges[0], "Invalid variable name",
			"A variable name must start with a letter or underscore and contain only letters, digits, underscores and dashes."))
	}
	content, a := decodeBody(block.Body, variableSchema, nil, &diags)
	defer func() { v.broken = diags.HasErrors() }()

	typeGiven := false
	if at, ok := content.Attributes["type"]; ok {
		ty, d := typeexpr.TypeConstraint(at.Expr)
		diags = append(diags, d...)
		if !d.HasErrors() {
			v.Type = ty
			typeGiven = true
		}
	}
	v.Description = a.str("description", "")
	v.Sensitive = a.boolean("sensitive", false)
	v.LegacyEnv = a.str("legacy_env", "")
	if v.LegacyEnv != "" && !shell.IsName(v.LegacyEnv) {
		a.errorAt("legacy_env", "Invalid environment variable name", fmt.Sprintf("%q is not an environment variable name.", v.LegacyEnv))
	}
	if at, ok := content.Attributes["default"]; ok {
		val, d := at.Expr.Value(nil)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if !typeGiven {
				v.Type = inferType(val)
			}
			cv, err := convertValue(val, v.Type)
			if err != nil {
				diags = append(diags, hclkit.ErrorAt(at.Expr.Range(), "Invalid default value for variable",
					fmt.Sprintf("The default of %q does not match its type %s: %s.", v.Name, typeexpr.TypeString(v.Type), err)))
			} else {
				v.hasDefault, v.defaultVal = true, cv
			}
		}
	}
	if !typeGiven && !v.hasDefault {
		v.Type = cty.String
	}
	for _, b := range content.Blocks {
		vc, d := b.Body.Content(variableValidationSchema)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		val := &variableValidation{DeclRange: b.DefRange}
		val.Condition = vc.Attributes["condition"].Expr
		val.ErrorMessage = vc.Attributes["error_message"].Expr
		for _, tr := range val.Condition.Variables() {
			if tr.RootName() != "var" || len(tr) < 2 {
				diags = append(diags, hclkit.ErrorAt(tr.SourceRange(), "Invalid validation condition",
					fmt.Sprintf("A validation condition may refer only to var.%s.", v.Name)))
				continue
			}
			if at, ok := tr[1].(hcl.TraverseAttr); ok && at.Name != v.Name {
				diags = append(diags, hclkit.ErrorAt(tr.SourceRange(), "Invalid validation condition",
					fmt.Sprintf("A validation condition may refer only to var.%s, not var.%s.", v.Name, at.Name)))
			}
		}
		v.validations = append(v.validations, val)
	}
	return v, diags
}

// inferType gives a variable without a type attribute the type of its
// default: primitives keep theirs, a list of strings is list(string) (so a
// comma-separated value from the environment works), anything else is any.
func inferType(v cty.Value) cty.Type {
	ty := v.Type()
	switch {
	case ty.IsPrimitiveType():
		return ty
	case ty.IsTupleType() || ty.IsListType() || ty.IsSetType():
		if _, err := convertValue(v, cty.List(cty.String)); err == nil {
			return cty.List(cty.String)
		}
	}
	return cty.DynamicPseudoType
}

// resolveVariables sets every variable's Value from its inputs. Variables
// that end up without a valid value get cty.DynamicVal so that expressions
// using them are skipped rather than reported a second time. A variable
// without a value that unset names (a dry run's, see Options.DryRun) is not
// an error here: it is left unknown, with Source "unset", for the caller.
func resolveVariables(ctx context.Context, p *Parser, vars []*Variable, in Inputs, unset map[string]bool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	byName, names := applyDefaults(vars)
	invalid := map[string]bool{}
	set := func(v *Variable, raw string, source string, rng *hcl.Range) {
		val, err := parseVarString(raw, v.Type)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for variable",
				Detail:   fmt.Sprintf("The value for %q from %s is not a valid %s: %s.", v.Name, source, typeexpr.TypeString(v.Type), err),
				Subject:  rng,
			})
			invalid[v.Name] = true
			return
		}
		v.Value, v.Source, v.origin = val, source, val.Mark(typed{v})
		delete(invalid, v.Name)
	}

	envs := append([]string(nil), in.Env...)
	sort.Strings(envs)
	for _, kv := range envs {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		name := strings.TrimPrefix(k, EnvPrefix)
		if v := byName[name]; v != nil {
			set(v, val, "env "+k, nil)
		} else {
			d := undeclared(name, names, nil)
			d.Detail = fmt.Sprintf("%s is set, but the recipe declares no variable %q.", k, name)
			if s := suggest(name, names); s != "" {
				d.Detail += fmt.Sprintf(" Did you mean %s%s?", EnvPrefix, s)
			}
			diags = append(diags, d)
		}
	}
	diags = append(diags, legacyEnv(vars, in.Env)...)

	for _, f := range in.Files {
		if d := interrupted(ctx); d != nil {
			return append(diags, d...)
		}
		src, err := hclkit.ReadInput(f)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read var file", Detail: err.Error() + "."})
			continue
		}
		file, d := p.parseFile(src, f)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		attrs, d := file.Body.JustAttributes()
		diags = append(diags, d...)
		for _, at := range inFileOrder(attrs) {
			v := byName[at.Name]
			if v == nil {
				diags = append(diags, undeclared(at.Name, names, at.NameRange.Ptr()))
				continue
			}
			val, d := at.Expr.Value(nil)
			diags = append(diags, d...)
			if d.HasErrors() {
				invalid[v.Name] = true
				continue
			}
			cv, err := convertValue(val, v.Type)
			if err != nil {
				diags = append(diags, hclkit.ErrorAt(at.Expr.Range(), "Invalid value for variable",
					fmt.Sprintf("The value for %q is not a valid %s: %s.", v.Name, typeexpr.TypeString(v.Type), err)))
				invalid[v.Name] = true
				continue
			}
			v.Value, v.Source, v.origin = cv, "var-file "+f, cv.Mark(typed{v})
			delete(invalid, v.Name)
		}
	}

	for _, flag := range in.Flags {
		k, val, ok := strings.Cut(flag, "=")
		if !ok || k == "" {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid -var argument",
				Detail: fmt.Sprintf("%q is not of the form name=value.", flag)})
			continue
		}
		v := byName[k]
		if v == nil {
			diags = append(diags, undeclared(k, names, nil))
			continue
		}
		set(v, val, "-var", nil)
	}

	for _, v := range vars {
		if invalid[v.Name] {
			v.Value, v.origin = cty.DynamicVal, cty.NilVal
		}
	}
	return append(diags, requireValues(vars, func(v *Variable) *hcl.Diagnostic {
		if unset[v.Name] {
			v.Source = "unset"
			return nil
		}
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("No value for variable %q", v.Name),
			Detail: fmt.Sprintf("Variable %q has no default. Set it with -var %s=..., in a -var-file, or with the environment variable %s%s.",
				v.Name, v.Name, EnvPrefix, v.Name),
			Subject: v.DeclRange.Ptr(),
		}
	})...)
}

// applyDefaults gives every variable its default and indexes them by name.
func applyDefaults(vars []*Variable) (map[string]*Variable, []string) {
	byName := map[string]*Variable{}
	names := make([]string, 0, len(vars))
	for _, v := range vars {
		byName[v.Name] = v
		names = append(names, v.Name)
		if v.hasDefault {
			v.Value, v.Source, v.origin = v.defaultVal, "default", cty.NilVal
		}
	}
	return byName, names
}

// requireValues reports each variable still without a value (unless its
// declaration already failed, or missing returns nil) and marks it unknown
// so nothing that uses it is reported again.
func requireValues(vars []*Variable, missing func(*Variable) *hcl.Diagnostic) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, v := range vars {
		if v.Value != cty.NilVal {
			continue
		}
		if !v.broken {
			if d := missing(v); d != nil {
				diags = append(diags, d)
			}
		}
		v.Value, v.origin = cty.DynamicVal, cty.NilVal
	}
	return diags
}

func undeclared(name string, names []string, rng *hcl.Range) *hcl.Diagnostic {
	detail := fmt.Sprintf("The recipe declares no variable %q.", name)
	if s := suggest(name, names); s != "" {
		detail += fmt.Sprintf(" Did you mean %q?", s)
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Undeclared variable", Detail: detail, Subject: rng}
}

// suggest returns the candidate closest to given, if any is close enough
// (two edits) to be what the user meant.
func suggest(given string, candidates []string) string { return hclkit.Suggest(given, candidates, 2) }

// parseVarString turns a value given as text (-var, environment) into a
// value of type ty. Strings are taken literally; bools also accept 1/0,
// yes/no and on/off (the old pipeline's =0/=1 overrides); numbers are
// decimal; a list or set of strings may be written comma-separated;
// everything else is parsed as an HCL expression, as in a var file. Errors
// say what was expected, never how HCL failed to read it.
func parseVarString(raw string, ty cty.Type) (cty.Value, error) {
	switch {
	case ty == cty.String:
		return cty.StringVal(raw), nil
	case ty == cty.Bool:
		switch strings.ToLower(strings.TrimSpace(raw)) {
		case "1", "true", "yes", "on":
			return cty.True, nil
		case "0", "false", "no", "off":
			return cty.False, nil
		}
		return cty.NilVal, fmt.Errorf("%s is not true or false (accepted, in any case: true, false, 1, 0, yes, no, on, off)", shortQuote(raw))
	case ty == cty.Number:
		// (ParseNumberVal also reads "Inf", which no setting means.)
		if v, err := cty.ParseNumberVal(strings.TrimSpace(raw)); err == nil && !v.AsBigFloat().IsInf() {
			return v, nil
		}
		// An HCL expression of a number ("512" in quotes) still is one.
		if expr, diags := hclkit.ParseExpression([]byte(raw), "<value>"); !diags.HasErrors() {
			if v, diags := expr.Value(nil); !diags.HasErrors() {
				if cv, err := convertValue(v, ty); err == nil && cv.IsKnown() && !cv.IsNull() && !cv.AsBigFloat().IsInf() {
					return cv, nil
				}
			}
		}
		return cty.NilVal, fmt.Errorf("%s is not a number (such as 512 or 1.5)", shortQuote(raw))
	case (ty.IsListType() || ty.IsSetType()) && ty.ElementType() == cty.String && !strings.HasPrefix(strings.TrimSpace(raw), "["):
		var elems []cty.Value
		for _, s := range strings.Split(raw, ",") {
			if s = strings.TrimSpace(s); s != "" {
				elems = append(elems, cty.StringVal(s))
			}
		}
		if len(elems) == 0 {
			if ty.IsSetType() {
				return cty.SetValEmpty(cty.String), nil
			}
			return cty.ListValEmpty(cty.String), nil
		}
		if ty.IsSetType() {
			return cty.SetVal(elems), nil
		}
		return cty.ListVal(elems), nil
	}
	expected := fmt.Errorf("%s is not a %s written in HCL, such as %s (strings in double quotes)", shortQuote(raw), typeexpr.TypeString(ty), valueExample(ty))
	expr, diags := hclkit.ParseExpression([]byte(raw), "<value>")
	if diags.HasErrors() {
		if ty == cty.DynamicPseudoType {
			return cty.StringVal(raw), nil
		}
		if diags[0].Summary == hclkit.SummaryTooDeep {
			return cty.NilVal, fmt.Errorf("%s is nested more than %d levels deep", shortQuote(raw), hclkit.MaxNesting)
		}
		return cty.NilVal, expected
	}
	val, diags := expr.Value(nil)
	if diags.HasErrors() {
		if ty == cty.DynamicPseudoType {
			return cty.StringVal(raw), nil
		}
		return cty.NilVal, expected
	}
	cv, err := convertValue(val, ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("%s: %s", shortQuote(raw), convertErrText(err, ty))
	}
	return cv, nil
}

// valueExample is an HCL value of ty's shape, for messages.
func valueExample(ty cty.Type) string {
	switch {
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		return `["a", "b"]`
	case ty.IsMapType() || ty.IsObjectType():
		return `{ name = "value" }`
	case ty == cty.Number:
		return "512"
	case ty == cty.Bool:
		return "true"
	}
	return `"text"`
}

// shortQuote quotes a value given from outside for a message, shortened
// when long: a -var value may be a megabyte.
func shortQuote(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// checkValidations runs each variable's validation blocks.
func checkValidations(vars []*Variable, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, v := range vars {
		if !v.Value.IsWhollyKnown() {
			continue
		}
		for _, val := range v.validations {
			res, d := val.Condition.Value(ctx)
			diags = append(diags, d...)
			if d.HasErrors() || !res.IsWhollyKnown() {
				continue
			}
			res, err := convertValue(res, cty.Bool)
			if err != nil || res.IsNull() {
				diags = append(diags, hclkit.ErrorAt(val.Condition.Range(), "Invalid validation condition", "The condition must be true or false."))
				continue
			}
			if res.True() {
				continue
			}
			msg := "The value is not valid."
			if mv, d := val.ErrorMessage.Value(ctx); !d.HasErrors() && mv.Type() == cty.String && mv.IsKnown() && !mv.IsNull() {
				msg = mv.AsString()
			}
			if refersToSensitive(val.ErrorMessage, vars) {
				msg = "The value is not valid; the error message uses a sensitive variable, so it is not shown."
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Invalid value for variable %q", v.Name),
				Detail:   fmt.Sprintf("%s (value from %s)", msg, v.Source),
				Subject:  val.Condition.Range().Ptr(),
			})
		}
	}
	return diags
}

// inFileOrder returns attributes in the order they are written, so that
// diagnostics and evaluation follow the file rather than map order.
func inFileOrder(attrs hcl.Attributes) []*hcl.Attribute {
	sorted := make([]*hcl.Attribute, 0, len(attrs))
	for _, at := range attrs {
		sorted = append(sorted, at)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Range.Start.Byte < sorted[j].Range.Start.Byte })
	return sorted
}

// varsObject is the var.* object of an evaluation context. With origins,
// each value carries the marks of where its parts came from (origin.go), for
// the expressions of the recipe's body; without, the values are plain, for
// validation blocks.
func varsObject(vars []*Variable, origins bool) cty.Value {
	m := map[string]cty.Value{}
	for _, v := range vars {
		m[v.Name] = v.Value
		if origins && v.origin != cty.NilVal {
			m[v.Name] = v.origin
		}
	}
	return cty.ObjectVal(m)
}

// decodeLocals evaluates locals blocks in dependency order; base is the
// context with var.* and functions. It returns the local.* object.
func decodeLocals(blocks hcl.Blocks, base *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	pending := map[string]*hcl.Attribute{}
	var order []string
	for _, b := range blocks {
		attrs, d := b.Body.JustAttributes()
		diags = append(diags, d...)
		for _, at := range inFileOrder(attrs) {
			if prev, dup := pending[at.Name]; dup {
				diags = append(diags, hclkit.ErrorAt(at.NameRange, "Duplicate local value",
					fmt.Sprintf("local.%s is already defined at %s.", at.Name, prev.NameRange)))
				continue
			}
			pending[at.Name] = at
			order = append(order, at.Name)
		}
	}
	done := map[string]cty.Value{}
	for len(pending) > 0 {
		progress := false
		for _, name := range order {
			at, ok := pending[name]
			if !ok {
				continue
			}
			ready := true
			for _, tr := range at.Expr.Variables() {
				if tr.RootName() != "local" || len(tr) < 2 {
					continue
				}
				if ref, ok := tr[1].(hcl.TraverseAttr); ok {
					if _, waiting := pending[ref.Name]; waiting {
						ready = false
					}
				}
			}
			if !ready {
				continue
			}
			ctx := base.NewChild()
			ctx.Variables = map[string]cty.Value{"local": cty.ObjectVal(done)}
			v, d := at.Expr.Value(ctx)
			diags = append(diags, d...)
			if d.HasErrors() {
				v = cty.DynamicVal
			}
			done[name] = v
			delete(pending, name)
			progress = true
		}
		if !progress {
			for _, name := range order {
				if at, ok := pending[name]; ok {
					diags = append(diags, hclkit.ErrorAt(at.NameRange, "Circular local value",
						fmt.Sprintf("local.%s depends, directly or not, on itself.", name)))
					done[name] = cty.DynamicVal
					delete(pending, name)
				}
			}
		}
	}
	return cty.ObjectVal(done), diags
}
