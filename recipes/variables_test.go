package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/redact"
)

const varsRecipe = `
variable "size" {
  type    = string
  default = "80G"
}
variable "packages" {
  type    = list(string)
  default = []
}
variable "netdata" {
  type    = bool
  default = true
}
variable "retention" {
  type    = number
  default = 256
}
image "v" {
  title = "Vars ${var.size}"
  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
    size     = var.size
  }
  layer "l" {
    packages = var.packages
    enabled  = var.netdata
  }
  netdata {
    retention_mb = var.retention
  }
}
`

func loadString(t *testing.T, src string, in Inputs) (*Recipe, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "r.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p := NewParser()
	r, diags := p.LoadFile(path, Options{Inputs: in})
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, d.Summary+": "+d.Detail)
	}
	return r, strings.Join(msgs, "\n")
}

func varValue(r *Recipe, name string) (cty.Value, string) {
	for _, v := range r.Variables {
		if v.Name == name {
			return v.Value, v.Source
		}
	}
	return cty.NilVal, ""
}

func TestVariablePrecedence(t *testing.T) {
	dir := t.TempDir()
	varFile := filepath.Join(dir, "site.hcl")
	if err := os.WriteFile(varFile, []byte("size = \"100G\"\nretention = 512\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, msgs := loadString(t, varsRecipe, Inputs{
		Env:   []string{"IMAGECTL_VAR_size=90G", "IMAGECTL_VAR_packages=jq, curl ,", "IMAGECTL_VAR_netdata=0", "HOME=/root"},
		Files: []string{varFile},
		Flags: []string{"size=120G"},
	})
	if r == nil {
		t.Fatalf("load failed: %s", msgs)
	}
	cases := []struct {
		name, want, source string
	}{
		{"size", `"120G"`, "-var"},
		{"retention", "512", "var-file " + varFile},
		{"packages", `["jq","curl"]`, "env IMAGECTL_VAR_packages"},
		{"netdata", "false", "env IMAGECTL_VAR_netdata"},
	}
	for _, tc := range cases {
		v, src := varValue(r, tc.name)
		if got := jsonOf(t, v); got != tc.want || src != tc.source {
			t.Errorf("%s = %s from %q, want %s from %q", tc.name, got, src, tc.want, tc.source)
		}
	}
	if r.Image.Base.Size != 120<<30 || r.Image.Title != "Vars 120G" {
		t.Errorf("size not applied: %d %q", r.Image.Base.Size, r.Image.Title)
	}
	if r.Image.Layers[0].Enabled {
		t.Error("IMAGECTL_VAR_netdata=0 did not disable the layer")
	}
	if got := r.Image.Layers[0].Packages; strings.Join(got, ",") != "jq,curl" {
		t.Errorf("packages = %v", got)
	}
}

func TestVariableErrors(t *testing.T) {
	dir := t.TempDir()
	varFile := filepath.Join(dir, "bad.hcl")
	if err := os.WriteFile(varFile, []byte("sise = \"1G\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   Inputs
		want string
	}{
		{"undeclared flag", Inputs{Flags: []string{"sise=1G"}}, `The recipe declares no variable "sise". Did you mean "size"?`},
		{"no equals", Inputs{Flags: []string{"size"}}, `"size" is not of the form name=value`},
		{"bad bool", Inputs{Flags: []string{"netdata=perhaps"}}, `"perhaps" is not true or false (accepted, in any case: true, false, 1, 0, yes, no, on, off)`},
		{"bad number", Inputs{Env: []string{"IMAGECTL_VAR_retention=lots"}}, `The value for "retention" from env IMAGECTL_VAR_retention is not a valid number: "lots" is not a number (such as 512 or 1.5).`},
		{"undeclared in var file", Inputs{Files: []string{varFile}}, `Did you mean "size"?`},
		{"missing var file", Inputs{Files: []string{filepath.Join(dir, "nope.hcl")}}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, msgs := loadString(t, varsRecipe, tc.in)
			if r != nil {
				t.Fatal("loaded despite bad input")
			}
			if !strings.Contains(msgs, tc.want) {
				t.Errorf("diagnostics %q lack %q", msgs, tc.want)
			}
		})
	}
}

func TestMissingVariableNamesIt(t *testing.T) {
	_, msgs := loadString(t, `variable "checksum" {}
image "x" {
  title = "x"
  base {
    source   = "b.qcow2"
    checksum = var.checksum
  }
}`, Inputs{})
	if !strings.Contains(msgs, `No value for variable "checksum"`) || !strings.Contains(msgs, "IMAGECTL_VAR_checksum") {
		t.Errorf("diagnostics: %s", msgs)
	}
	if strings.Count(msgs, "\n") != 0 {
		t.Errorf("the missing variable caused more than one diagnostic:\n%s", msgs)
	}
}

func TestParseVarString(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		ty   cty.Type
		want string
	}{
		{"a,b", cty.String, `"a,b"`},
		{"a, b", cty.List(cty.String), `["a","b"]`},
		{`["a", "b"]`, cty.List(cty.String), `["a","b"]`},
		{"", cty.List(cty.String), `[]`},
		{"yes", cty.Bool, "true"},
		{"42", cty.Number, "42"},
		{`{a = 1}`, cty.Map(cty.Number), `{"a":1}`},
		{"plain words", cty.DynamicPseudoType, `"plain words"`},
	} {
		v, err := parseVarString(tc.raw, tc.ty)
		if err != nil {
			t.Errorf("parseVarString(%q): %v", tc.raw, err)
			continue
		}
		if got := jsonOf(t, v); got != tc.want {
			t.Errorf("parseVarString(%q) = %s, want %s", tc.raw, got, tc.want)
		}
	}
}

// TestSensitiveValueNotShown: a sensitive variable's value, interpolated
// into its validation's error_message, is not in the diagnostic; it is
// registered with redact, from -var and the environment alike, so no
// output shows it.
func TestSensitiveValueNotShown(t *testing.T) {
	src := strings.Replace(varsRecipe, `variable "size" {`, `variable "token" {
  type      = string
  sensitive = true
  validation {
    condition     = length(var.token) < 4
    error_message = "token ${var.token} is too long."
  }
}
variable "pin" {
  type      = number
  sensitive = true
  default   = 1
}
variable "size" {`, 1)
	const secret = "Sens1tive-Planted-Value"
	for _, in := range []Inputs{
		{Flags: []string{"token=" + secret}},
		{Env: []string{EnvPrefix + "token=" + secret}},
	} {
		_, msgs := loadString(t, src, in)
		if !strings.Contains(msgs, "Invalid value for variable \"token\"") || strings.Contains(msgs, secret) {
			t.Errorf("diagnostics:\n%s", msgs)
		}
		if got := redact.Known("x " + secret); strings.Contains(got, secret) {
			t.Errorf("the value is not registered: %s", got)
		}
	}
	// A value its type refuses is registered too (its diagnostic quotes
	// it, the CLI's output streams replace it).
	_, _ = loadString(t, src, Inputs{Flags: []string{"token=abc", "pin=N0t-a-Number-Sensitive"}})
	if got := redact.Known("N0t-a-Number-Sensitive"); got != redact.Mask {
		t.Errorf("a refused sensitive value is not registered: %s", got)
	}
}
