package builder

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
