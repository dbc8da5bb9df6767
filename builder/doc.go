// Package builder owns running a build: Build executes a plan (package
// builder/plan) as an ordered table of named phases (phases, in build.go):
// verify the base image, prepare a raw working disk, restore the unchanged
// layers from the layer cache, launch one appliance, apply the layers left,
// pack the tgz, check it, describe it (SBOMs, provenance) and publish every
// output, all or none. The same table says which phases the build reports
// through internal/event, in which order, and where each phase's time
// counts in the manifest's timings (a layer's own: its packages, commands
// and snapshot, reported as a timings event when it ends). The package also decides
// what the layer cache restores and snapshots (cache.go).
//
// What the phases are made of lives in the folders below it, one job each:
// plan (the plan and its --dry-run renderings), compile (a recipe's layers
// into steps), steps (the step vocabulary), base (the verified base image),
// guest (the appliance seam that guestfs implements), apply (the step
// interpreter), pack (the tgz), ext4tar (the host-side ext4 reader), attest
// (SBOMs and provenance), layercache (the snapshots of layers) and
// debcache (the package cache the packages steps fetch into on the host).
package builder
