package recipes

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/redact"
)

// registerSensitive registers with redact every value of a sensitive
// variable, as resolved and as given on the command line or in the
// environment (a value its type refused included), so that no output of
// the process shows it.
func registerSensitive(vars []*Variable, in Inputs) {
	byName := map[string]bool{}
	for _, v := range vars {
		if !v.Sensitive {
			continue
		}
		byName[v.Name] = true
		redact.Register(stringsOf(v.Value)...)
	}
	if len(byName) == 0 {
		return
	}
	for _, kv := range in.Env {
		if k, val, ok := strings.Cut(kv, "="); ok && byName[strings.TrimPrefix(k, EnvPrefix)] && strings.HasPrefix(k, EnvPrefix) {
			redact.Register(val)
		}
	}
	for _, f := range in.Flags {
		if k, val, ok := strings.Cut(f, "="); ok && byName[k] {
			redact.Register(val)
		}
	}
}

// stringsOf is every string in a known value (the value itself, or the
// elements of a collection, deeply).
func stringsOf(v cty.Value) []string {
	if v == cty.NilVal || !v.IsWhollyKnown() || v.IsNull() {
		return nil
	}
	var out []string
	_ = cty.Walk(v, func(_ cty.Path, e cty.Value) (bool, error) {
		if e.IsKnown() && !e.IsNull() && e.Type() == cty.String {
			out = append(out, e.AsString())
		}
		return true, nil
	})
	return out
}

// refersToSensitive reports whether expr uses a sensitive variable: a
// validation's error_message that does is not shown.
func refersToSensitive(expr hcl.Expression, vars []*Variable) bool {
	for _, tr := range expr.Variables() {
		if tr.RootName() != "var" || len(tr) < 2 {
			continue
		}
		at, ok := tr[1].(hcl.TraverseAttr)
		if !ok {
			return true // var["name"]: assume the worst
		}
		for _, v := range vars {
			if v.Name == at.Name && v.Sensitive {
				return true
			}
		}
	}
	return false
}
