package recipes

import (
	"fmt"
	"testing"
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
