package recipes

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

func jsonOf(t *testing.T, v cty.Value) string {
	t.Helper()
	if v == cty.NilVal {
		return "<nil>"
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
