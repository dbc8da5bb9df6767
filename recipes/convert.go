package recipes

import (
	"fmt"
	"math/big"
	"strconv"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// maxUnify bounds the elements whose types are unified when a collection
// of mixed element types is converted: go-cty's unification compares every
// pair of element types.
const maxUnify = 4096

// convertValue is convert.Convert in time linear in the size of v. go-cty
// converts a tuple (every list written out in HCL is one) to a list or set,
// and an object to a map, by unifying the types of its elements, comparing
// each pair of them even when they are all strings already: 16,000
// packages took 1.7 s, 450,000 more than 9 minutes. Here the elements are
// converted one by one to the element type; when they then all have one
// type, that is the collection's. Only collections whose elements keep
// different types (a list(any) of numbers and strings) are left to go-cty,
// and those only up to maxUnify elements.
func convertValue(v cty.Value, want cty.Type) (cty.Value, error) {
	ty := v.Type()
	if ty.Equals(want.WithoutOptionalAttributesDeep()) {
		return v, nil
	}
	if ty == cty.Number && want == cty.String && v.IsKnown() && !v.IsNull() && !v.IsMarked() {
		// go-cty writes the number with big.Float's shortest formatting,
		// which takes 15 µs for a 1 (numbers parse with 512 bits): a
		// megabyte of them took 10 s. An integer reads the same either way.
		f := v.AsBigFloat()
		if i, acc := f.Int64(); acc == big.Exact && (i != 0 || !f.Signbit()) {
			return cty.StringVal(strconv.FormatInt(i, 10)), nil
		}
	}
	collection := want.IsListType() || want.IsSetType() || want.IsMapType()
	if !collection || v.IsNull() || !v.IsKnown() || v.IsMarked() {
		return convert.Convert(v, want)
	}
	var fromMap bool
	switch {
	case ty.IsTupleType() || ty.IsListType() || ty.IsSetType():
		if want.IsMapType() {
			return convert.Convert(v, want)
		}
	case ty.IsObjectType() || ty.IsMapType():
		if !want.IsMapType() {
			return convert.Convert(v, want)
		}
		fromMap = true
	default:
		return convert.Convert(v, want)
	}
	n := v.LengthInt()
	if n == 0 {
		return convert.Convert(v, want)
	}
	ety := want.ElementType()
	elems := make([]cty.Value, 0, n)
	var keys []string
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		ce, err := convertValue(e, ety)
		if err != nil {
			if fromMap {
				return cty.NilVal, fmt.Errorf("element %q: %w", k.AsString(), err)
			}
			return cty.NilVal, fmt.Errorf("element %d: %w", len(elems), err)
		}
		if want.IsSetType() && (ce.IsNull() || !ce.IsWhollyKnown()) {
			return convert.Convert(v, want)
		}
		elems = append(elems, ce)
		if fromMap {
			keys = append(keys, k.AsString())
		}
	}
	first := elems[0].Type()
	for _, e := range elems[1:] {
		if !e.Type().Equals(first) {
			if n > maxUnify {
				return cty.NilVal, fmt.Errorf("the %d elements have different types: imagectl finds a common type for at most %d (give the variable an exact type, such as list(string))", n, maxUnify)
			}
			return convert.Convert(v, want)
		}
	}
	switch {
	case want.IsSetType():
		return cty.SetVal(elems), nil
	case want.IsMapType():
		m := make(map[string]cty.Value, n)
		for i, k := range keys {
			m[k] = elems[i]
		}
		return cty.MapVal(m), nil
	}
	return cty.ListVal(elems), nil
}

// linearArgs wraps a function whose parameters are collections so that
// its arguments are converted by convertValue: HCL would convert them with
// convert.Convert before the call, in quadratic time. Other functions are
// returned as they are. to, when not cty.NilType, is the type the function
// converts its one dynamic argument to (tolist, toset, tomap): the argument
// is converted to it first, and the function finds it converted.
func linearArgs(f function.Function, to cty.Type) function.Function {
	params := f.Params()
	target := make([]cty.Type, len(params))
	wrap := false
	for i, p := range params {
		target[i] = p.Type
		if i == 0 && to != cty.NilType {
			target[i] = to
		}
		if target[i].IsCollectionType() {
			wrap = true
		}
	}
	var varTarget cty.Type
	vp := f.VarParam()
	if vp != nil {
		varTarget = vp.Type
		if varTarget.IsCollectionType() {
			wrap = true
		}
	}
	if !wrap {
		return f
	}
	dynamic := func(p function.Parameter, ty cty.Type) *function.Parameter {
		if ty.IsCollectionType() {
			p.Type = cty.DynamicPseudoType
			p.AllowDynamicType = true
		}
		return &p
	}
	spec := &function.Spec{Description: f.Description()}
	for i, p := range params {
		spec.Params = append(spec.Params, *dynamic(p, target[i]))
	}
	if vp != nil {
		spec.VarParam = dynamic(*vp, varTarget)
	}
	// convertArgs converts the arguments whose parameters are collections,
	// as HCL would have (an unknown value of unknown type becomes an
	// unknown collection), but the argument of a to-function that is not
	// known: that is for the function to deal with, as it would.
	convertArgs := func(args []cty.Value) ([]cty.Value, error) {
		out := make([]cty.Value, len(args))
		for i, a := range args {
			ty := varTarget
			if i < len(target) {
				ty = target[i]
			}
			out[i] = a
			if !ty.IsCollectionType() || (i == 0 && to != cty.NilType && !a.IsWhollyKnown()) {
				continue
			}
			cv, err := convertValue(a, ty)
			if err != nil {
				return nil, function.NewArgError(i, err)
			}
			out[i] = cv
		}
		return out, nil
	}
	spec.Type = func(args []cty.Value) (cty.Type, error) {
		args, err := convertArgs(args)
		if err != nil {
			return cty.NilType, err
		}
		return f.ReturnTypeForValues(args)
	}
	spec.Impl = func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		args, err := convertArgs(args)
		if err != nil {
			return cty.NilVal, err
		}
		return f.Call(args)
	}
	return function.New(spec)
}
