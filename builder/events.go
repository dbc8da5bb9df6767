package builder

import (
	"encoding/json"

	"github.com/gpuaas/imagectl/manifest"
)

// Phases of a build, as its events (internal/event) name them. The phases
// table (build.go) says in which order they run; reportedPhases lists them so.
const (
	PhaseVerifyBase = "verify-base"
	PhasePrepare    = "prepare-disk"
	PhaseRestore    = "restore-cache"
	PhaseLaunch     = "launch"
	PhaseSnapshot   = "snapshot"
	PhasePack       = "pack"
	PhaseCheck      = "check"
	PhaseDescribe   = "sbom-provenance"
	PhaseManifest   = "manifest"
)

// reportedPhases are the phases a build reports, in the order they run,
// from the phases table: a phase that is skipped reports nothing; the layer
// cache's restore and snapshots are reported by the phases that do them,
// once per restored run and per layer cached.
func reportedPhases() []string {
	var out []string
	for _, ph := range phases {
		if ph.name != "" {
			out = append(out, ph.name)
		}
		out = append(out, ph.reports...)
	}
	return out
}

// timingFigures are t's figures by their manifest names (the JSON's), as
// a timings event carries them: parts that did not happen are left out.
func timingFigures(t manifest.Timings) map[string]float64 {
	var figures map[string]float64
	if b, err := json.Marshal(t); err == nil { // plain numbers always marshal
		_ = json.Unmarshal(b, &figures)
	}
	return figures
}
