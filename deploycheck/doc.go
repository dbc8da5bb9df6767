// Package deploycheck owns the deployability check of a built tgz (imagectl
// check, and the end of every build): it reads the archive once, the way MAAS
// and curtin will use it, and reports what would fail or degrade the deploy,
// each finding with its fix, applying the waivers the manifest records. The
// check names are what a recipe's waive blocks may name (recipes.DeployChecks).
package deploycheck
