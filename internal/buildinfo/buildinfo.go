// Package buildinfo owns what imagectl is: its version, set at link time by
// the Makefile (-X github.com/gpuaas/imagectl/internal/buildinfo.Version=...).
// Plans, manifests, attestations and the layer cache's keys record it;
// `imagectl version` prints it.
package buildinfo

// Version is imagectl's version; "dev" when not set at link time.
var Version = "dev"
