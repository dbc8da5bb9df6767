package recipes

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/hclkit"
)

// stdFunctions are the functions that read nothing, as go-cty and HCL
// define them; recipes call them as pureFunctions.
var stdFunctions = map[string]function.Function{
	"abs":          stdlib.AbsoluteFunc,
	"base64decode": base64DecodeFunc,
	"base64encode": base64EncodeFunc,
	"basename":     basenameFunc,
	"can":          tryfunc.CanFunc,
	"ceil":         stdlib.CeilFunc,
	"chomp":        stdlib.ChompFunc,
	"coalesce":     stdlib.CoalesceFunc,
	"coalescelist": stdlib.CoalesceListFunc,
	"compact":      stdlib.CompactFunc,
	"concat":       stdlib.ConcatFunc,
	"contains":     stdlib.ContainsFunc,
	"csvdecode":    stdlib.CSVDecodeFunc,
	"dirname":      dirnameFunc,
	"distinct":     distinctFunc,
	"element":      selecting(stdlib.ElementFunc, 1),
	"flatten":      stdlib.FlattenFunc,
	"floor":        stdlib.FloorFunc,
	"format":       stdlib.FormatFunc,
	"formatlist":   stdlib.FormatListFunc,
	"indent":       stdlib.IndentFunc,
	"join":         stdlib.JoinFunc,
	"jsondecode":   stdlib.JSONDecodeFunc,
	"jsonencode":   stdlib.JSONEncodeFunc,
	"keys":         stdlib.KeysFunc,
	"length":       lengthFunc,
	"lookup":       selecting(stdlib.LookupFunc, 1),
	"lower":        stdlib.LowerFunc,
	"max":          stdlib.MaxFunc,
	"merge":        stdlib.MergeFunc,
	"min":          stdlib.MinFunc,
	"parseint":     stdlib.ParseIntFunc,
	"range":        stdlib.RangeFunc,
	"regex":        stdlib.RegexFunc,
	"regexall":     stdlib.RegexAllFunc,
	"replace":      stdlib.ReplaceFunc,
	"reverse":      stdlib.ReverseListFunc,
	"setunion":     stdlib.SetUnionFunc,
	"sha256":       sha256Func,
	"slice":        stdlib.SliceFunc,
	"sort":         stdlib.SortFunc,
	"split":        stdlib.SplitFunc,
	"substr":       stdlib.SubstrFunc,
	"title":        stdlib.TitleFunc,
	"tobool":       stdlib.MakeToFunc(cty.Bool),
	"tolist":       stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
	"tomap":        stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
	"tonumber":     stdlib.MakeToFunc(cty.Number),
	"toset":        stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
	"tostring":     stdlib.MakeToFunc(cty.String),
	"trim":         stdlib.TrimFunc,
	"trimprefix":   stdlib.TrimPrefixFunc,
	"trimspace":    stdlib.TrimSpaceFunc,
	"trimsuffix":   stdlib.TrimSuffixFunc,
	"try":          tryfunc.TryFunc,
	"upper":        stdlib.UpperFunc,
	"values":       stdlib.ValuesFunc,
	"zipmap":       stdlib.ZipmapFunc,
}

// pureFunctions are stdFunctions, each taking its collection arguments
// through convertValue (see linearArgs) and bounded in what it may
// produce (see bounded).
var pureFunctions = func() map[string]function.Function {
	fns := map[string]function.Function{}
	for name, f := range stdFunctions {
		switch name {
		case "tolist":
			f = linearArgs(f, cty.List(cty.DynamicPseudoType))
		case "toset":
			f = linearArgs(f, cty.Set(cty.DynamicPseudoType))
		case "tomap":
			f = linearArgs(f, cty.Map(cty.DynamicPseudoType))
		default:
			f = linearArgs(f, cty.NilType)
		}
		fns[name] = bounded(name, f)
	}
	return fns
}()

// functions returns the functions a recipe or layer file in baseDir may
// call. The set follows Packer and Terraform names. There is deliberately no
// env(): a recipe's inputs are its variables, so a build is reproducible from
// the recipe and the values the plan prints. File functions read only inside
// the tree (see tree).
func functions(t tree, baseDir string) map[string]function.Function {
	fns := make(map[string]function.Function, len(pureFunctions)+4)
	for k, v := range pureFunctions {
		fns[k] = v
	}
	fns["file"] = fileFunc(t, baseDir)
	fns["fileexists"] = fileExistsFunc(t, baseDir)
	fns["filesha256"] = fileSHA256Func(t, baseDir)
	// templatefile's own templates get every function but templatefile, so
	// a template cannot recurse into itself.
	inner := make(map[string]function.Function, len(fns))
	for k, v := range fns {
		inner[k] = v
	}
	fns["templatefile"] = templateFileFunc(t, baseDir, inner)
	return fns
}

// distinctFunc is stdlib's distinct in linear time for lists of known
// primitive values: stdlib compares each element with every one it kept
// before it. Other lists are left to it, up to maxUnify elements.
var distinctFunc = function.New(&function.Spec{
	Description: stdlib.DistinctFunc.Description(),
	Params:      []function.Parameter{{Name: "list", Type: cty.List(cty.DynamicPseudoType)}},
	Type:        func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		l := args[0]
		if !l.Type().ElementType().IsPrimitiveType() || !l.IsWhollyKnown() {
			if n := l.LengthInt(); n > maxUnify {
				return cty.NilVal, fmt.Errorf("distinct compares at most %d elements that are not strings, numbers or bools; this list has %d", maxUnify, n)
			}
			return stdlib.Distinct(l)
		}
		if l.LengthInt() == 0 {
			return l, nil
		}
		seen := map[string]bool{}
		var out []cty.Value
		for it := l.ElementIterator(); it.Next(); {
			_, v := it.Element()
			var key string
			switch {
			case v.IsNull():
				key = "null"
			case v.Type() == cty.String:
				key = "s" + v.AsString()
			case v.Type() == cty.Number:
				key = "n" + v.AsBigFloat().Text('g', -1)
			default:
				key = "b" + v.GoString()
			}
			if !seen[key] {
				seen[key] = true
				out = append(out, v)
			}
		}
		return cty.ListVal(out), nil
	},
})

var stringParam = []function.Parameter{{Name: "path", Type: cty.String}}

// pathParam is the path argument of a file function: it keeps its marks, so
// the function knows whether the user typed it (pathOf), and passes them on
// to its result.
var pathParam = function.Parameter{Name: "path", Type: cty.String, AllowMarked: true}

// fileFunc reads a file of the tree as a string, up to maxResultBytes.
func fileFunc(t tree, baseDir string) function.Function {
	return function.New(&function.Spec{
		Description: "Reads a file in the recipe's tree as a UTF-8 string.",
		Params:      []function.Parameter{pathParam},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, userPath := pathOf(args[0])
			b, _, err := t.readSource(baseDir, p, userPath, maxResultBytes)
			if err != nil {
				return cty.NilVal, err
			}
			return cty.StringVal(string(b)).WithMarks(args[0].Marks()), nil
		},
	})
}

// fileExistsFunc reports whether a regular file exists in the tree; it
// reads nothing.
func fileExistsFunc(t tree, baseDir string) function.Function {
	return function.New(&function.Spec{
		Description: "Reports whether a file exists in the recipe's tree.",
		Params:      []function.Parameter{pathParam},
		Type:        function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, userPath := pathOf(args[0])
			real, err := t.resolve(baseDir, p, userPath)
			if err != nil {
				return cty.False.WithMarks(args[0].Marks()), nil
			}
			st, err := os.Stat(real)
			return cty.BoolVal(err == nil && st.Mode().IsRegular()).WithMarks(args[0].Marks()), nil
		},
	})
}

// fileSHA256Func hashes a file of the tree as it reads it, whatever its
// size.
func fileSHA256Func(t tree, baseDir string) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the hex sha256 of a file in the recipe's tree.",
		Params:      []function.Parameter{pathParam},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, userPath := pathOf(args[0])
			real, err := t.resolve(baseDir, p, userPath)
			if err != nil {
				return cty.NilVal, err
			}
			if st, err := os.Stat(real); err != nil {
				return cty.NilVal, err
			} else if !st.Mode().IsRegular() {
				return cty.NilVal, fmt.Errorf("%s is not a regular file", p)
			}
			d, err := digest.File(context.Background(), real)
			if err != nil {
				return cty.NilVal, err
			}
			return cty.StringVal(d.Hex()).WithMarks(args[0].Marks()), nil
		},
	})
}

// lengthFunc is Terraform's length: collections, and strings in characters.
var lengthFunc = function.New(&function.Spec{
	Description: "Returns the number of elements of a collection or characters of a string.",
	Params:      []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true}},
	Type:        function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if args[0].Type() == cty.String {
			return stdlib.Strlen(args[0])
		}
		return stdlib.Length(args[0])
	},
})

var sha256Func = function.New(&function.Spec{
	Description: "Returns the hex sha256 of a string.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(digest.Bytes([]byte(args[0].AsString())).Hex()), nil
	},
})

var base64EncodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(args[0].AsString()))), nil
	},
})

var base64DecodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		b, err := base64.StdEncoding.DecodeString(args[0].AsString())
		if err != nil {
			return cty.NilVal, fmt.Errorf("invalid base64: %w", err)
		}
		return cty.StringVal(string(b)), nil
	},
})

var basenameFunc = function.New(&function.Spec{
	Params: stringParam,
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(path.Base(args[0].AsString())), nil
	},
})

var dirnameFunc = function.New(&function.Spec{
	Params: stringParam,
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(path.Dir(args[0].AsString())), nil
	},
})

func templateFileFunc(t tree, baseDir string, fns map[string]function.Function) function.Function {
	return function.New(&function.Spec{
		Description: "Renders a template file in the recipe's tree with the given variables.",
		Params: []function.Parameter{
			pathParam,
			{Name: "vars", Type: cty.DynamicPseudoType},
		},
		Type: function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, userPath := pathOf(args[0])
			v, err := renderTemplate(t, baseDir, p, userPath, args[1], fns)
			if err != nil {
				return cty.NilVal, err
			}
			return v.WithMarks(args[0].Marks()), nil
		},
	})
}

// renderTemplate renders the template file p (userPath: the user typed it)
// with vars (an object or map). The result carries no marks: it is content,
// not a path.
func renderTemplate(t tree, baseDir, p string, userPath bool, vars cty.Value, fns map[string]function.Function) (cty.Value, error) {
	src, real, err := t.readSource(baseDir, p, userPath, hclkit.MaxInputSize)
	if err != nil {
		return cty.NilVal, err
	}
	if !vars.IsNull() && !vars.Type().IsObjectType() && !vars.Type().IsMapType() {
		return cty.NilVal, fmt.Errorf("template variables must be an object, such as { name = value }")
	}
	expr, diags := hclkit.ParseTemplate(src, real)
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("parsing template %s: %s", p, diags.Error())
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: fns}
	if !vars.IsNull() {
		for k, v := range vars.AsValueMap() {
			ctx.Variables[k] = v
		}
	}
	for _, tr := range expr.Variables() {
		if _, ok := ctx.Variables[tr.RootName()]; !ok {
			return cty.NilVal, fmt.Errorf("template %s uses %q, which is not among the variables given to it", p, tr.RootName())
		}
	}
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("rendering template %s: %s", p, diags.Error())
	}
	v, _ = v.UnmarkDeep()
	sv, err := toString(v)
	if err != nil {
		return cty.NilVal, fmt.Errorf("rendering template %s: %w", p, err)
	}
	return sv, nil
}

func toString(v cty.Value) (cty.Value, error) {
	if v.IsNull() || !v.IsKnown() {
		return cty.NilVal, fmt.Errorf("the result is null or unknown")
	}
	if v.Type() != cty.String {
		return cty.NilVal, fmt.Errorf("the result is %s, not a string", v.Type().FriendlyName())
	}
	return v, nil
}
