// Package store owns where published images live and what each site runs:
// immutable image versions (<image>/<version>/ holding the tgz, its
// manifest, their signatures and the validation script) and, per site, the
// promotion history of each image, the host results recorded as evidence
// of its versions, each rack controller's verdicts of whether it serves a
// version (RackProof), and the revocations of versions no site may run;
// and, of no site, each version's boot comparisons (BootComparison: its
// baked tgz against the same work at first boot, the ratio computed here)
// (Dir keeps them in .sites/, .evidence/, .rackproofs/, .revocations/
// and .comparisons/,
// each read strictly,
// its keys checked against its path (CheckEvidenceFile, CheckRackProofFile,
// CheckRevocationFile, CheckBootComparisons: the rules store/gitcatalog
// reads by too), within a bound, and written within it). A promotion of a revoked version is refused where it is recorded
// (ErrRevoked); an evidence file keeps a host's latest KeepPerHost
// results (AppendEvidence), each within MaxEvidenceResult.
//
// Versions (published versions) and Promotions (the sites' catalogs) are
// the interfaces commands use, and Store the two joined (Compose): Dir, the
// local directory store, is both; store/oci keeps versions in an OCI
// registry and store/gitcatalog promotions in git. Channels are what a
// version store that follows promotions adds (the registry's site tags);
// Version.OpenTarball reads a version's tgz, local or remote, checked
// against its sha256 as it streams. Latest and NextVersion are written
// once (LatestOf, NextVersionOf) over Lister, the small core each version
// store implements. Dir publishes
// atomically (files are staged in a temporary directory inside the store,
// fsynced, and renamed into place) and serializes the check-then-rename and
// every catalog update with an flock on the store's lock file, so
// concurrent imagectl processes never corrupt it. StartBuild is a
// build's side of any version store: the version (the next date-and-sequence one
// when none is given), the refusal of a version already published, the
// parent, and a staging directory the build writes into and Publish moves
// from. OneView scopes a command's reads of a remote catalog to one fetch
// (ViewFetch, which store/gitcatalog honours): show reads a version's
// revocation and comparisons from one state.
//
// The top-level package release builds promotion, rollback, status and
// gc of a MAAS site on top of it; store itself only stores.
package store
