package recipes

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestParseSize: 80g was refused while 80GB worked, and a bare 80 meant
// 80 bytes. Units are now case-insensitive in every common form, and a
// number without one is an error that says to add it.
func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"80G", 80 << 30}, {"80g", 80 << 30}, {"80GB", 80 << 30}, {"80gb", 80 << 30}, {"80GiB", 80 << 30},
		{"80Gi", 80 << 30}, {"80 G", 80 << 30}, {"512M", 512 << 20}, {"512m", 512 << 20}, {"512MiB", 512 << 20},
		{"4k", 4 << 10}, {"2T", 2 << 40}, {"1P", 1 << 50}, {"1073741824B", 1 << 30}, {"1073741824b", 1 << 30},
	} {
		got, msg := parseSize(tc.in)
		if msg != "" || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %q; want %d", tc.in, got, msg, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"80", `"80" has no unit, which would make it 80 bytes: write a unit, such as "80G"`},
		{"80 gigs", `"80 gigs" has an unknown unit "gigs"`},
		{"80X", `unknown unit "X"`},
		{"G", `"G" is not a size`},
		{"-1G", `"-1G" is not a size`},
		{"0G", `"0G" is not a positive size`},
		{"9999999P", `is too large`},
	} {
		if _, msg := parseSize(tc.in); !strings.Contains(msg, tc.want) {
			t.Errorf("parseSize(%q): %q lacks %q", tc.in, msg, tc.want)
		}
	}
}

// TestVarStringMessages: a value from -var or the environment that is not
// of the variable's type says what was expected, not how HCL failed to
// read it ("Variables not allowed").
func TestVarStringMessages(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		ty   cty.Type
		want string
	}{
		{"abc", cty.Number, `"abc" is not a number (such as 512 or 1.5)`},
		{"80G", cty.Number, `"80G" is not a number`},
		{"Inf", cty.Number, `"Inf" is not a number`},
		{"-inf", cty.Number, `"-inf" is not a number`},
		{"perhaps", cty.Bool, `"perhaps" is not true or false (accepted, in any case: true, false, 1, 0, yes, no, on, off)`},
		{"[a, b]", cty.List(cty.Number), `"[a, b]" is not a list(number) written in HCL, such as ["a", "b"] (strings in double quotes)`},
		{"{a = b}", cty.Map(cty.String), `"{a = b}" is not a map(string) written in HCL, such as { name = "value" }`},
		{`["a"]`, cty.List(cty.Number), `"[\"a\"]": element 0: a number is required`},
		{strings.Repeat("x", 1000), cty.Number, `"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"... (1000 bytes) is not a number`},
	} {
		_, err := parseVarString(tc.raw, tc.ty)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "not allowed") {
			t.Errorf("parseVarString(%q, %s): %v; want %q", tc.raw, tc.ty.FriendlyName(), err, tc.want)
		}
	}
	for _, tc := range []struct {
		raw string
		ty  cty.Type
	}{{"YES", cty.Bool}, {" off ", cty.Bool}, {"1.5", cty.Number}, {" -3 ", cty.Number}, {"1e3", cty.Number}, {`"512"`, cty.Number}} {
		if _, err := parseVarString(tc.raw, tc.ty); err != nil {
			t.Errorf("parseVarString(%q): %v", tc.raw, err)
		}
	}
}

// TestLayerFileGivenAsRecipe: validating a layer file printed an error
// per layer attribute and "Missing image block"; now one diagnostic says
// what the file is.
func TestLayerFileGivenAsRecipe(t *testing.T) {
	r, diags := NewParser().LoadFile("../layers/docker.hcl", Options{})
	if r != nil || len(diags) != 1 || diags[0].Summary != "This is a layer file" ||
		!strings.Contains(diags[0].Detail, "Layer files are validated through the recipe that uses them") ||
		diags[0].Subject == nil || diags[0].Subject.Start.Line < 1 {
		t.Errorf("diagnostics: %v", diags)
	}
}
