package recipes

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// The old H200 shell pipeline (shared/context 001) took its overrides as
// GPUAAS_MAAS_HOST_IMAGE_* environment variables. imagectl reads none of
// them: a build's inputs are the recipe, var files, -var and IMAGECTL_VAR_*,
// all recorded in the manifest. So that a habit does not silently do
// nothing, each one that is set is answered with a warning naming what
// replaces it: the -var of the variable that declares it as its legacy_env,
// or, for the pipeline's workflow switches, the imagectl command.

// LegacyEnvPrefix starts the old pipeline's environment variables.
const LegacyEnvPrefix = "GPUAAS_MAAS_HOST_IMAGE_"

// legacyWorkflow are the old pipeline's switches that are commands now.
var legacyWorkflow = map[string]string{
	"GPUAAS_MAAS_HOST_IMAGE_DRY_RUN":    "imagectl build RECIPE --dry-run prints the plan",
	"GPUAAS_MAAS_HOST_IMAGE_UPLOAD":     "imagectl build never uploads; imagectl upload (or promote) sends a built version to MAAS",
	"GPUAAS_MAAS_HOST_IMAGE_SKIP_BUILD": "imagectl upload IMAGE VERSION uploads an already-built version",
	"GPUAAS_MAAS_HOST_IMAGE_MAAS_PROFILE": "imagectl upload and promote take --site, from sites.hcl " +
		"(or the recipe's maas { site = ... })",
}

// legacyEnv warns about each GPUAAS_MAAS_HOST_IMAGE_* variable set in env.
func legacyEnv(vars []*Variable, env []string) hcl.Diagnostics {
	byEnv := map[string]*Variable{}
	for _, v := range vars {
		if v.LegacyEnv != "" {
			byEnv[v.LegacyEnv] = v
		}
	}
	var set []string
	values := map[string]string{}
	for _, kv := range env {
		k, val, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, LegacyEnvPrefix) {
			set = append(set, k)
			values[k] = val
		}
	}
	sort.Strings(set)
	var diags hcl.Diagnostics
	for _, k := range set {
		d := &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Old pipeline setting ignored"}
		switch v, how := byEnv[k], legacyWorkflow[k]; {
		case v != nil:
			value := values[k]
			if v.Sensitive || !printable(value) {
				value = "..."
			}
			d.Detail = fmt.Sprintf("%s is set, but imagectl does not read the old pipeline's environment: use -var '%s=%s' (or %s%s).",
				k, v.Name, value, EnvPrefix, v.Name)
		case how != "":
			d.Detail = fmt.Sprintf("%s is set, but imagectl does not read the old pipeline's environment: %s.", k, how)
		default:
			d.Detail = fmt.Sprintf("%s is set, but imagectl does not read the old pipeline's environment and this recipe declares no variable for it (legacy_env); see imagectl build --help.", k)
		}
		diags = append(diags, d)
	}
	return diags
}

// printable reports whether s is short, one-line, plain text worth echoing.
func printable(s string) bool {
	if len(s) > 200 {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\'' {
			return false
		}
	}
	return true
}
