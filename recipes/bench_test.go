package recipes

import (
	"fmt"
	"testing"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// BenchmarkLoadLongList loads recipes whose one layer lists many packages:
// the time per package must not grow with the list (it was quadratic:
// go-cty unified the list's element types pair by pair; see convertValue).
func BenchmarkLoadLongList(b *testing.B) {
	for _, n := range []int{1000, 16000, 64000} {
		src := longListRecipe(n, "literal")
		b.Run(fmt.Sprintf("packages=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, diags := NewParser().LoadSource("long.hcl", src, Options{}); diags.HasErrors() {
					b.Fatal(diags.Error())
				}
			}
		})
	}
}

// BenchmarkConvertList converts a tuple of n strings (what an HCL list
// literal evaluates to) to list(string): imagectl's convertValue side by
// side with go-cty's convert.Convert, the obvious alternative, which
// unifies the element types pair by pair.
func BenchmarkConvertList(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		elems := make([]cty.Value, n)
		for i := range elems {
			elems[i] = cty.StringVal(fmt.Sprintf("package-%d", i))
		}
		tuple := cty.TupleVal(elems)
		b.Run(fmt.Sprintf("imagectl/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := convertValue(tuple, cty.List(cty.String)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("go-cty/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := convert.Convert(tuple, cty.List(cty.String)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
