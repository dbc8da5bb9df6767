package sites

import (
	"fmt"
	"math/big"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/shell"
)

// attrs decodes a block's string attributes, collecting diagnostics.
type attrs struct {
	content *hcl.BodyContent
	diags   hcl.Diagnostics
}

// value evaluates the attribute, collecting its diagnostics: a is nil
// when the block does not set it, and ok is false then and when it did not
// evaluate.
func (at *attrs) value(name string) (a *hcl.Attribute, v cty.Value, ok bool) {
	a = at.content.Attributes[name]
	if a == nil {
		return nil, cty.NilVal, false
	}
	v, d := a.Expr.Value(nil)
	at.diags = append(at.diags, d...)
	return a, v, !d.HasErrors()
}

// typed is value for an attribute that must be a known value of type ty:
// one that is not is an error saying what it must be (detail), and not ok.
func (at *attrs) typed(name string, ty cty.Type, detail string) (a *hcl.Attribute, v cty.Value, ok bool) {
	a, v, ok = at.value(name)
	if ok && (v.IsNull() || !v.IsKnown() || !v.Type().Equals(ty)) {
		at.diags = append(at.diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid "+name, detail))
		return a, v, false
	}
	return a, v, ok
}

// str sets dst to the attribute's value when it is a string that check
// (which returns what is wrong, or "") accepts.
func (at *attrs) str(name string, dst *string, check func(string) string) {
	a, v, ok := at.typed(name, cty.String, name+" must be a string.")
	if !ok {
		return
	}
	if msg := check(v.AsString()); msg != "" {
		at.diags = append(at.diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid "+name, msg))
		return
	}
	*dst = v.AsString()
}

// boolean sets dst to the attribute's value when it is true or false.
func (at *attrs) boolean(name string, dst *bool) {
	if _, v, ok := at.typed(name, cty.Bool, name+" must be true or false (without quotes)."); ok {
		*dst = v.True()
	}
}

// port sets dst to the attribute's value when it is a TCP port number.
func (at *attrs) port(name string, dst *int) {
	a, v, ok := at.value(name)
	if !ok {
		return
	}
	bad := v.IsNull() || !v.IsKnown() || v.Type() != cty.Number
	var n int
	if !bad {
		bf := v.AsBigFloat()
		i, acc := bf.Int64()
		bad = acc != big.Exact || i < 1 || i > 65535
		n = int(i)
	}
	if bad {
		at.diags = append(at.diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid "+name, name+" must be a port number from 1 to 65535, such as 5248."))
		return
	}
	*dst = n
}

// dur sets dst to the attribute's value when it is a positive duration.
func (at *attrs) dur(name string, dst *time.Duration) {
	var raw string
	at.str(name, &raw, func(v string) string {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Sprintf("%q is not a positive duration such as \"60s\" or \"15m\".", v)
		}
		return ""
	})
	if raw != "" {
		*dst, _ = time.ParseDuration(raw)
	}
}

// file sets dst to the attribute's value, a path that must not be empty,
// resolved against dir (the sites file's directory) when it is relative.
func (at *attrs) file(name string, dst *string, dir string) {
	at.str(name, dst, func(v string) string {
		if v == "" {
			return name + " is empty."
		}
		return ""
	})
	if *dst != "" && !filepath.IsAbs(*dst) {
		*dst = filepath.Join(dir, *dst)
	}
}

// envName sets dst to the attribute's value, the name of an environment
// variable. The value is never quoted in a diagnostic: a secret put there
// by mistake must not be shown.
func (at *attrs) envName(name string, dst *string) {
	at.str(name, dst, func(v string) string {
		if !shell.IsName(v) {
			return name + " must name an environment variable (letters, digits and '_')."
		}
		return ""
	})
}

// closest is a " Did you mean …?" hint for a misspelt name (three edits
// at most), or "".
func closest(name string, names []string) string {
	if best := hclkit.Suggest(name, names, 3); best != "" {
		return fmt.Sprintf(" Did you mean %q?", best)
	}
	return ""
}
