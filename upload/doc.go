// Package upload owns how images reach MAAS: Artifact, which checks a
// built artifact against its manifest (and, through a hook, its
// signature) before sending a byte and uploads it to a site of the sites
// file (package sites) through upload/maas under its immutable versioned
// name (manifest.VersionedName), reading it at offsets with every read
// checked against its sha256: a local tgz, or a store version's streamed
// from a registry.
//
// upload/maas is the MAAS API client; upload/maassim the simulated MAAS
// the tests and benchmarks run against. The GPUaaS admin API client that
// sets a deploy profile's distro_series is package profile.
package upload
