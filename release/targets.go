package release

import (
	"fmt"
	"strings"

	"github.com/gpuaas/imagectl/sites"
)

// Targets are the sites a promotion goes to, from what the user named:
// sites and groups of the sites file (each value may be a comma-separated
// list), and a canary site.
type Targets struct {
	// Single is the one site of a plain promotion (Promote): a single
	// name, no group, no canary. It is looked up as any site is.
	Single string
	// Sites are a rollout's sites (Rollout), groups expanded, each once,
	// the canary first; Canary names it.
	Sites  []*sites.Site
	Canary string
}

// OneName reports whether names and canary name at most one site without
// reading the sites file: one value, no list, no canary. Only then may
// ResolveTargets find a plain promotion (unless the name is a group).
func OneName(names []string, canary string) bool {
	return len(names) == 1 && !strings.Contains(names[0], ",") && canary == ""
}

// ResolveTargets resolves names and canary against the sites file ss
// (named file in messages): one name that is no group is a plain
// promotion; anything else is a rollout, whose canary must be one site.
func ResolveTargets(ss *sites.File, file string, names []string, canary string) (*Targets, error) {
	if OneName(names, canary) && ss.Group(names[0]) == nil {
		return &Targets{Single: names[0]}, nil
	}
	var all []string
	if canary != "" {
		all = append(all, canary)
	}
	for _, v := range names {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				all = append(all, n)
			}
		}
	}
	sites, err := ss.Resolve(all)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if canary != "" && ss.Group(canary) != nil {
		return nil, fmt.Errorf("--canary %s is a group: the canary is one site", canary)
	}
	return &Targets{Sites: sites, Canary: canary}, nil
}
