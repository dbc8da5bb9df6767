// Package sites owns the sites file (sites.hcl), imagectl's second HCL
// language beside recipes: which MAAS sites there are, where each one's API
// key is (an environment variable or a file, never the key), its upload
// timeouts and architecture, the GPUaaS deploy profiles promote and
// rollback point at a version (deploy_profile blocks), the groups of
// sites a rollout promotes to together, and the promotion policy of a
// site or group (policy blocks, policy.go): the host evidence, soak,
// windows and freezes a version must meet before promote points a site at
// it, which package release evaluates. It also owns the policy for the
// key artifacts are verified with before they reach a site
// (VerifyPolicy: --key, else $IMAGECTL_VERIFY_KEY, else the site's
// verify_key, refused without one unless --insecure-skip-verify). A site's
// or group's name keeps to the one rule for names (manifest.ValidName).
//
// Like package recipes it decodes through declared schemas (one file per
// block: site.go, profile.go, group.go, policy.go), collects every problem as an
// hcl.Diagnostic with a source range, and reads and parses through
// internal/hclkit, whose bounds, did-you-mean and rendering both languages
// share. Unlike a recipe, nothing in a sites file is shown as written: any
// value may be a key or a token in the wrong place, so snippets star out
// every value, and a key or token written in clear is an error that does
// not quote it (secrets.go).
//
// It knows nothing of the clients it configures: upload/maas
// (maas.ConfigFor) and profile (profile.ConfigFor) build their
// configurations from a Site or a DeployProfile.
package sites
