package recipes

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/gpuaas/imagectl/internal/hclkit"
)

// Format returns src in canonical HCL formatting (hclwrite). A file with
// syntax errors, or beyond the input limits (hclkit.ParseConfig), is not
// formatted: its diagnostics are returned instead.
func Format(src []byte, filename string) ([]byte, hcl.Diagnostics) {
	if _, diags := hclkit.ParseConfig(src, filename); diags.HasErrors() {
		return nil, diags
	}
	return hclwrite.Format(src), nil
}
