package sites

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/manifest"
)

// Group is a named set of sites (a group block of the sites file), which a
// rollout (imagectl promote --site GROUP) promotes to together.
type Group struct {
	Name  string
	Sites []string
	// Policy is the group's policy block, nil for none: every site of the
	// group is held to it (Site.Policies).
	Policy *Policy
	// DeclRange is the block's header, for diagnostics.
	DeclRange hcl.Range
}

var groupBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "sites", Required: true}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "policy"}},
}

// decodeGroup decodes a group block; its sites must be sites of ss, and
// its policy may count evidence at the sites declared (sorted).
func decodeGroup(b *hcl.Block, ss *File, declared []string) (*Group, hcl.Diagnostics) {
	g := &Group{Name: b.Labels[0], DeclRange: b.DefRange}
	var diags hcl.Diagnostics
	if !manifest.ValidName(g.Name) {
		diags = append(diags, hclkit.ErrorAt(b.LabelRanges[0], "Invalid group name",
			fmt.Sprintf("%q: a group name is lowercase letters, digits, '.', '_' and '-', as a site name.", g.Name)))
	}
	content, d := b.Body.Content(groupBodySchema)
	diags = append(diags, d...)
	g.Policy, d = decodePolicies(fmt.Sprintf("group %q", g.Name), content.Blocks, declared)
	diags = append(diags, d...)
	at := &attrs{content: content}
	a, v, ok := at.value("sites")
	diags = append(diags, at.diags...)
	if !ok {
		return nil, diags
	}
	if v.IsNull() || !v.IsKnown() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
		return nil, append(diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid sites",
			`A group's sites are a list of site names, such as ["maas280", "maas281"].`))
	}
	known := map[string]bool{}
	var names []string
	for _, s := range ss.Sites {
		known[s.Name] = true
		names = append(names, s.Name)
	}
	sort.Strings(names)
	inGroup := map[string]bool{}
	for _, e := range v.AsValueSlice() {
		if e.IsNull() || e.Type() != cty.String {
			diags = append(diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid sites",
				fmt.Sprintf("Group %q: every site is a name in quotes.", g.Name)))
			continue
		}
		n := e.AsString()
		switch {
		case !known[n]:
			diags = append(diags, hclkit.ErrorAt(a.Expr.Range(), "Unknown site in group",
				fmt.Sprintf("Group %q names site %q, which the sites file does not declare (sites: %s).%s", g.Name, n, strings.Join(names, ", "), closest(n, names))))
		case inGroup[n]:
			diags = append(diags, hclkit.ErrorAt(a.Expr.Range(), "Duplicate site in group",
				fmt.Sprintf("Group %q names site %q twice.", g.Name, n)))
		default:
			inGroup[n] = true
			g.Sites = append(g.Sites, n)
		}
	}
	if len(g.Sites) == 0 && !diags.HasErrors() {
		diags = append(diags, hclkit.ErrorAt(a.Expr.Range(), "Empty group",
			fmt.Sprintf("Group %q names no site.", g.Name)))
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return g, diags
}
