// Package release owns what a site runs: promoting a stored image version
// to a MAAS site (it must verify and pass the deployability check, it is
// uploaded when MAAS lacks it, the site's GPUaaS deploy profiles are pointed
// at it once MAAS holds it complete, and the promotion is recorded in the
// store's site catalog), rolling back, the site's status and drift (what
// MAAS actually holds and the deploy profiles select against what was
// promoted), garbage collection of old versioned boot resources, and
// rollouts: one version promoted to many sites, a canary first and checked,
// then the others in parallel, each site's outcome reported (Rollout). The
// tgz streams from the store into MAAS (Version.OpenTarball), its
// signatures verified against the stored digest; when the store has
// channels, the site's channel follows each recorded promotion.
//
// It ties store (versions and catalogs), signing (verification) and upload
// (sites, the checked upload, the MAAS client, the admin API client of
// upload/profile) together; which value a deploy profile gets, when, and
// under which idempotency key is decided here. The CLI calls one function
// of it per command.
package release
