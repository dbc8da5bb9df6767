// Package store owns where published images live and what each site runs:
// immutable image versions (<image>/<version>/ holding the tgz, its
// manifest, their signatures and the validation script) and, per site, the
// promotion history of each image.
//
// Store is the interface commands use, so that an object store or an OCI
// registry can stand beside Dir, the local directory store. Dir publishes
// atomically (files are staged in a temporary directory inside the store,
// fsynced, and renamed into place) and serializes the check-then-rename and
// every catalog update with an flock on the store's lock file, so
// concurrent imagectl processes never corrupt it. Dir.StartBuild is a
// build's side of the store: the version (the next date-and-sequence one
// when none is given), the refusal of a version already published, the
// parent, and a staging directory the build writes into and Publish moves
// from.
//
// store/release builds promotion, rollback, status and gc of a MAAS site
// on top of it.
package store
