package recipes

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/shell"
	"github.com/gpuaas/imagectl/manifest"
)

// The validation block: what the on-host validation script checks beyond
// what the build derives, for each deploy profile (bare-metal, slice) and
// stage (image: right after deploy; converged: after the site bootstrap).

// DefaultCollectorWait bounds the wait for Netdata collectors' charts.
const DefaultCollectorWait = 60 * time.Second

var (
	// A shell glob of interface names, as ip(8) prints them: "ibp*".
	interfacePatternRE = regexp.MustCompile(`^[A-Za-z0-9_.:*?-]{1,15}$`)
	// A Linux interface name.
	interfaceNameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,15}$`)
	// An NVIDIA driver branch: "580", or "580.95".
	driverBranchRE = regexp.MustCompile(`^[0-9]{3}(\.[0-9]+)*$`)
)

func decodeValidation(v *Validation, b *hcl.Block, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	content, a := decodeBody(b.Body, validationSchema, ctx, &diags)
	v.Script = a.str("script", v.Script)
	if msg := checkImagePath(v.Script); msg != "" {
		a.errorAt("script", "Invalid script path", msg)
	}
	v.DefaultProfile = a.str("default_profile", manifest.ProfileBareMetal)
	if !slices.Contains(manifest.Profiles, v.DefaultProfile) {
		a.errorAt("default_profile", "Unknown profile", oneOf("profile", v.DefaultProfile, manifest.Profiles))
	}
	v.DefaultStage = a.str("default_stage", manifest.StageImage)
	if !slices.Contains(manifest.Stages, v.DefaultStage) {
		a.errorAt("default_stage", "Unknown stage", oneOf("stage", v.DefaultStage, manifest.Stages))
	}
	v.CollectorWait = DefaultCollectorWait
	if a.has("collector_wait") {
		if dur, ok := a.duration("collector_wait"); ok {
			if dur < time.Second || dur > 30*time.Minute {
				a.errorAt("collector_wait", "Invalid wait", "Give a whole number of seconds from 1s to 30m.")
			} else {
				v.CollectorWait = dur
			}
		}
	}
	v.ServicesActive = checkedUnits(a, "services_active")
	v.FilesExist = checkedPaths(a, "files_exist")
	names := newLabels("Check", "")
	profiles := newLabels("Profile", "")
	for _, cb := range content.Blocks {
		switch cb.Type {
		case "check":
			name := cb.Labels[0]
			if msg := checkName("check", name); msg != "" {
				diags = append(diags, hclkit.ErrorAt(cb.LabelRanges[0], "Invalid check name", msg))
			}
			if !names.add(cb, &diags) {
				continue
			}
			_, ca := decodeBody(cb.Body, checkSchema, ctx, &diags)
			cmd := ca.nonBlank("command", "Empty command", "A check's command is empty.")
			v.Commands = append(v.Commands, manifest.Check{Name: name, Command: cmd})
		case "profile":
			name := cb.Labels[0]
			if !slices.Contains(manifest.Profiles, name) {
				diags = append(diags, hclkit.ErrorAt(cb.LabelRanges[0], "Unknown profile", oneOf("profile", name, manifest.Profiles)))
				continue
			}
			decodeLabeled(&v.Profiles, profiles, cb, &diags, func() (manifest.Profile, hcl.Diagnostics) { return decodeProfile(name, cb, ctx) })
		}
	}
	if len(v.Profiles) > 0 && slices.Contains(manifest.Profiles, v.DefaultProfile) {
		var declared []string
		for _, p := range v.Profiles {
			declared = append(declared, p.Name)
		}
		if !slices.Contains(declared, v.DefaultProfile) {
			detail := fmt.Sprintf("The default profile is %q, but the validation block declares only %s: set default_profile to one of them, or add a profile %q block.",
				v.DefaultProfile, strings.Join(declared, ", "), v.DefaultProfile)
			if a.has("default_profile") {
				a.errorAt("default_profile", "Default profile not declared", detail)
			} else {
				diags = append(diags, hclkit.ErrorAt(b.DefRange, "Default profile not declared", detail))
			}
		}
	}
	if gb := singleBlock(content.Blocks, "gpu", &diags); gb != nil {
		v.GPU = &manifest.GPU{}
		diags = append(diags, decodeGPU(v.GPU, gb, ctx)...)
	}
	return diags
}

func decodeGPU(g *manifest.GPU, b *hcl.Block, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	_, a := decodeBody(b.Body, gpuSchema, ctx, &diags)
	g.Model = a.nonBlank("model", "Empty GPU model", `Give the part of nvidia-smi's name every GPU must have, such as "H200".`)
	if strings.ContainsAny(g.Model, ",\n") {
		a.errorAt("model", "Invalid GPU model", "nvidia-smi's CSV output cannot hold a comma or newline in a name.")
	}
	g.Count = a.integer("count", 0)
	if a.ok("count") && (g.Count < 1 || g.Count > 64) {
		a.errorAt("count", "Invalid GPU count", fmt.Sprintf("count is %d; give the number of GPUs a host has, 1 to 64.", g.Count))
	}
	g.DriverBranch = a.str("driver_branch", "")
	if g.DriverBranch != "" && !driverBranchRE.MatchString(g.DriverBranch) {
		a.errorAt("driver_branch", "Invalid driver branch", fmt.Sprintf("%q is not an NVIDIA driver branch such as \"580\".", g.DriverBranch))
	}
	g.PersistenceMode = a.boolean("persistence_mode", true)
	g.ECC = a.boolean("ecc", true)
	g.PCIeGen = a.integer("pcie_gen", 0)
	if g.PCIeGen < 0 || g.PCIeGen > 7 {
		a.errorAt("pcie_gen", "Invalid PCIe generation", fmt.Sprintf("pcie_gen is %d; give 1 to 7, or leave it out to require each GPU's maximum.", g.PCIeGen))
	}
	g.PCIeWidth = a.integer("pcie_width", 0)
	if g.PCIeWidth != 0 && !slices.Contains([]int{1, 2, 4, 8, 16, 32}, g.PCIeWidth) {
		a.errorAt("pcie_width", "Invalid PCIe width", fmt.Sprintf("pcie_width is %d; give 1, 2, 4, 8, 16 or 32, or leave it out to require each GPU's maximum.", g.PCIeWidth))
	}
	g.NVSwitch = a.boolean("nvswitch", false)
	return diags
}

func decodeProfile(name string, b *hcl.Block, ctx *hcl.EvalContext) (manifest.Profile, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	p := manifest.Profile{Name: name}
	content, a := decodeBody(b.Body, profileSchema, ctx, &diags)
	p.ServicesActive = checkedUnits(a, "services_active")
	p.VFIOModules = a.checkedList("vfio_modules", "Invalid module name", func(m string) string {
		if !manifest.ValidName(m) {
			return fmt.Sprintf("%q is not a kernel module name.", m)
		}
		return ""
	})
	p.Bootstrap = a.str("bootstrap", "")
	if env, ok := a.anyMap("bootstrap_env"); ok {
		p.BootstrapEnv = map[string]string{}
		for k, val := range env {
			val, _ := val.UnmarkDeep()
			switch {
			case !shell.IsName(k):
				a.errorAt("bootstrap_env", "Invalid environment variable", fmt.Sprintf("%q is not an environment variable name.", k))
			case val.IsNull() || !val.IsKnown() || val.Type() != cty.String:
				a.errorAt("bootstrap_env", "Invalid environment value", fmt.Sprintf("The value of %s must be a string.", k))
			default:
				p.BootstrapEnv[k] = val.AsString()
			}
		}
	}
	if cb := singleBlock(content.Blocks, "converged", &diags); cb != nil {
		p.Converged = &manifest.Converged{}
		diags = append(diags, decodeConverged(p.Converged, cb, ctx)...)
	}
	return p, diags
}

func decodeConverged(c *manifest.Converged, b *hcl.Block, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	content, a := decodeBody(b.Body, convergedSchema, ctx, &diags)
	c.ServicesActive = checkedUnits(a, "services_active")
	c.FilesExist = checkedPaths(a, "files_exist")
	c.DoneMarkers = checkedPaths(a, "done_markers")
	if fb := singleBlock(content.Blocks, "fabric", &diags); fb != nil {
		c.Fabric = &manifest.Fabric{}
		_, fa := decodeBody(fb.Body, fabricSchema, ctx, &diags)
		c.Fabric.Interface = fa.str("interface", "")
		if fa.ok("interface") && !interfacePatternRE.MatchString(c.Fabric.Interface) {
			fa.errorAt("interface", "Invalid interface pattern", fmt.Sprintf("%q is not an interface name or shell pattern such as \"ibp*\".", c.Fabric.Interface))
		}
		c.Fabric.Subnet = fa.str("subnet", "")
		if fa.ok("subnet") {
			if msg := checkPrefix(c.Fabric.Subnet, false); msg != "" {
				fa.errorAt("subnet", "Invalid subnet", msg)
			}
		}
		c.Fabric.Netplan = fa.str("netplan", "")
		if c.Fabric.Netplan != "" {
			if msg := checkImagePath(c.Fabric.Netplan); msg != "" {
				fa.errorAt("netplan", "Invalid path", msg)
			}
		}
	}
	for _, bb := range content.Blocks {
		if bb.Type != "bridge" {
			continue
		}
		_, ba := decodeBody(bb.Body, bridgeSchema, ctx, &diags)
		br := manifest.Bridge{Name: ba.str("name", "")}
		if ba.ok("name") {
			if !interfaceNameRE.MatchString(br.Name) {
				ba.errorAt("name", "Invalid bridge name", fmt.Sprintf("%q is not an interface name (at most 15 letters, digits, '.', '_', '-').", br.Name))
			}
			for _, other := range c.Bridges {
				if other.Name == br.Name {
					ba.errorAt("name", "Duplicate bridge", fmt.Sprintf("Bridge %q is already checked in this block.", br.Name))
				}
			}
		}
		br.Address = ba.str("address", "")
		if ba.ok("address") {
			if msg := checkPrefix(br.Address, true); msg != "" {
				ba.errorAt("address", "Invalid bridge address", msg)
			}
		}
		c.Bridges = append(c.Bridges, br)
	}
	if db := singleBlock(content.Blocks, "dhcp", &diags); db != nil {
		c.DHCP = &manifest.DHCP{}
		_, da := decodeBody(db.Body, dhcpSchema, ctx, &diags)
		c.DHCP.Service = da.str("service", "dnsmasq")
		if msg := checkUnit(c.DHCP.Service); msg != "" {
			da.errorAt("service", "Invalid service name", msg)
		}
		c.DHCP.SubnetFile = da.str("subnet_file", "")
		if da.ok("subnet_file") {
			if msg := checkImagePath(c.DHCP.SubnetFile); msg != "" {
				da.errorAt("subnet_file", "Invalid path", msg)
			}
		}
	}
	return diags
}

// checkBootstraps checks that each profile's bootstrap names a bundle of
// the image, and that bundle has an entrypoint to run.
func checkBootstraps(img *Image) hcl.Diagnostics {
	var diags hcl.Diagnostics
	var names []string
	for _, b := range img.Bundles {
		names = append(names, b.Name)
	}
	for _, p := range img.Validation.Profiles {
		if p.Bootstrap == "" || slices.Contains(names, p.Bootstrap) {
			continue
		}
		detail := fmt.Sprintf("Profile %q's bootstrap is %q, but the image has no bundle of that name", p.Name, p.Bootstrap)
		if s := suggest(p.Bootstrap, names); s != "" {
			detail += fmt.Sprintf(". Did you mean %q?", s)
		} else if len(names) > 0 {
			detail += "; its bundles are " + strings.Join(names, ", ") + "."
		} else {
			detail += "; add a bundle block for it."
		}
		diags = append(diags, hclkit.ErrorAt(img.DeclRange, "Unknown bootstrap bundle", detail))
	}
	return diags
}

func checkedPaths(a attrs, name string) []string {
	return a.checkedList(name, "Invalid path", checkImagePath)
}

// checkPrefix checks an IPv4 prefix: a subnet ("192.168.0.0/16", host bits
// zero) or, with host set, an interface address ("10.100.0.1/24").
func checkPrefix(s string, host bool) string {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil || !p.Addr().Is4():
		if host {
			return fmt.Sprintf("%q is not an IPv4 address with its prefix length, such as \"10.100.0.1/24\".", s)
		}
		return fmt.Sprintf("%q is not an IPv4 subnet such as \"192.168.0.0/16\".", s)
	case !host && p.Masked() != p:
		return fmt.Sprintf("%q has host bits set; the subnet is %q.", s, p.Masked().String())
	}
	return ""
}

// checkEntrypoint checks a bundle entrypoint: a relative, clean path.
func checkEntrypoint(e string) string {
	switch {
	case e == "":
		return `The entrypoint is empty: name the bundle's executable, such as "bootstrap.sh".`
	case strings.HasPrefix(e, "/"):
		return fmt.Sprintf("%q is absolute: give the path inside the bundle, such as \"bootstrap.sh\".", e)
	case path.Clean(e) != e || e == "." || e == ".." || strings.HasPrefix(e, "../"):
		return fmt.Sprintf("%q is not a clean path inside the bundle.", e)
	}
	return ""
}

// checkEntrypointEntry says why the bundle's entrypoint is not an
// executable file in it ("" when it is).
func (b *Bundle) checkEntrypointEntry() string {
	for _, e := range b.Entries {
		if e.Path != b.Entrypoint {
			continue
		}
		switch {
		case e.Type != "file":
			return fmt.Sprintf("Bundle %q's entrypoint %s is a %s, not a file.", b.Name, b.Entrypoint, e.Type)
		case e.Mode&0o111 == 0:
			return fmt.Sprintf("Bundle %q's entrypoint %s is not executable (mode %04o): chmod +x it in the bundle.", b.Name, b.Entrypoint, e.Mode.Perm())
		}
		return ""
	}
	var files []string
	for _, e := range b.Entries {
		if e.Type == "file" && e.Mode&0o111 != 0 {
			files = append(files, e.Path)
		}
	}
	sort.Strings(files)
	detail := fmt.Sprintf("Bundle %q (%s) has no %s: the site bootstrap would have nothing to run.", b.Name, b.Source, b.Entrypoint)
	if s := suggest(b.Entrypoint, files); s != "" {
		detail += fmt.Sprintf(" Did you mean %q?", s)
	} else if len(files) > 0 && len(files) <= 5 {
		detail += " Its executables: " + strings.Join(files, ", ") + "."
	}
	return detail
}

func oneOf(kind, got string, names []string) string {
	return fmt.Sprintf("%q is not a %s: use %s.", got, kind, strings.Join(names, " or "))
}
