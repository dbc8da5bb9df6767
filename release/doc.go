// Package release owns what happens to an image between a build and the
// sites that run it, over store (versions and catalogs), signing
// (verification), upload (the checked upload, the MAAS client) and the
// admin API client of profile:
//
//   - a build into a store (Build): the version it makes (generated when
//     none is given), the version it follows, where it writes, and where
//     its files are once published;
//   - the one rule for what reaches a site (Upload, UploadFile): a
//     stored version, or a tgz on disk, must match its manifest and verify
//     before MAAS is contacted, and nothing is sent unverified unless
//     InsecureSkipVerify says so;
//   - promoting a stored version to a MAAS site (Promote: it must verify
//     and pass the deployability check, it is uploaded when MAAS lacks it,
//     the site's GPUaaS deploy profiles are pointed at it once MAAS holds
//     it complete, and the promotion is recorded in the store's site
//     catalog), rolling back, the site's status and drift (what MAAS
//     holds and the deploy profiles select against what was promoted) and
//     garbage collection of old versioned boot resources;
//   - whether every rack controller of a site serves a version (WarmRacks,
//     racks.go, over the racks package): alone, or within a promotion
//     with WarmRacks or the site's warm_racks, after MAAS holds the
//     version complete and before a deploy profile is pointed at it; a
//     failed rack stops the promotion unless Override (recorded in its
//     Gate), an unknown one too unless AllowUnknownRacks (a RacksError,
//     NotYet for unknown); a rollback only warns; every check's verdicts
//     are recorded as the site's rack proofs (store.RackProof), which
//     status and predeploy's racks condition read;
//   - which sites a promotion names (ResolveTargets: a site, or groups and
//     lists of them and a canary) and rollouts (Rollout): one version
//     promoted to many sites, every site's key loaded first, a canary
//     first and checked, then the others in parallel, each site's outcome
//     reported;
//   - the promotion policy's gate (Evaluate, gate.go): before a promotion
//     sends anything, the site's policies (sites.Site.Policies) are
//     evaluated against the host evidence in the store and an injected
//     clock; a refusal is a PolicyError (not yet, rather than broken)
//     unless overridden with a reason, and the verdict is recorded with
//     the promotion. Rollbacks are never gated.
//   - host results as evidence (Record): validation results from hosts
//     (hostcheck's, or files) recorded at a site in one update of the
//     catalog, each refused, saying why, unless it is for a version the
//     store holds, ran that version's validation script (its sha256) and
//     names a profile and stage the version's manifest knows; which script
//     hostcheck runs at a site (HostcheckTarget), and a version's evidence
//     per site (EvidenceAt).
//   - a version's boot comparisons (RecordBootComparison,
//     BootComparisons): the file imagectl smoke --compare-first-boot
//     writes, recorded with the stored version it measured (of no site),
//     its ratio computed by the store; each profile, stage and
//     accelerator's latest read back for show.
//   - revocation (Revoke): a version that must not run at any site,
//     recorded in the store; promote and rollouts refuse it, rollback
//     skips it, status fails where it runs or is selected, gc deletes it
//     first, and a channel never points at it;
//   - the deploy workflow's gate (Predeploy): whether a site may deploy
//     now, each condition named with its fix, reading only what that
//     needs (one boot resource, not the whole of MAAS as status does).
//
// The tgz streams from the store into MAAS (Version.OpenTarball), its
// signatures verified against the stored digest; when the store has
// channels, the site's channel follows each recorded promotion. Which
// value a deploy profile gets, when, and under which idempotency key is
// decided here. It is the only package that imports both a store and the
// MAAS client (internal/layering holds it to that); the CLI calls one
// function of it per command and prints the result.
package release
