// Package provenance owns the build's provenance: an in-toto v1 statement
// whose subject is the tgz and whose predicate is SLSA v1 provenance (the
// builder, the external parameters, the resolved dependencies, the run's
// times), made and validated with the in-toto attestation library. Signing
// it (a DSSE envelope in cosign's attestation format) is package signing's.
package provenance
