// Package provenance owns the in-toto statements about a build's tgz: its
// provenance, whose predicate is SLSA v1 provenance (the builder, the
// external parameters, the resolved dependencies, the run's times), made
// and validated with the in-toto attestation library, and the statements
// that carry its SBOMs (SPDX and CycloneDX) as predicates. Signing them (a
// DSSE envelope in cosign's attestation format) is package signing's.
package provenance
