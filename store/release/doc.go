// Package release owns what a site runs: promoting a stored image version
// to a MAAS site (it must verify and pass the deployability check, it is
// uploaded when MAAS lacks it, and the promotion is recorded in the store's
// site catalog), rolling back, the site's status and drift (what MAAS
// actually holds against what was promoted), and garbage collection of old
// versioned boot resources.
//
// It ties store (versions and catalogs), signing (verification) and upload
// (sites, the checked upload, the MAAS client) together; the CLI calls one
// function of it per command.
package release
