package builder

// Phases of a build, in order, as its events (internal/event) name them.
const (
	PhaseVerifyBase = "verify-base"
	PhasePrepare    = "prepare-disk"
	PhaseRestore    = "restore-cache"
	PhaseLaunch     = "launch"
	PhaseLayers     = "layers"
	PhaseSnapshot   = "snapshot"
	PhasePack       = "pack"
	PhaseCheck      = "check"
	PhaseDescribe   = "sbom-provenance"
	PhaseManifest   = "manifest"
)
