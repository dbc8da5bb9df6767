// Package signing owns imagectl's signatures: key pairs in cosign's format
// (an ECDSA P-256 key, its PKCS #8 form encrypted with scrypt and NaCl
// secretbox under a PEM "ENCRYPTED SIGSTORE PRIVATE KEY" block, the public
// key as a PKIX "PUBLIC KEY" PEM), and, beside each signed file, the base64
// signature (<file>.sig) and a Sigstore bundle (<file>.sigstore.json, media
// type v0.3) that `cosign verify-blob --key` accepts offline. It signs and
// verifies a built artifact as a unit: the tgz, its manifest, and that the
// manifest's sha256 and size describe the tgz.
//
// It signs and verifies attestations too (an in-toto statement such as a
// build's provenance) as DSSE envelopes in the JSON cosign attest-blob
// writes and cosign verify-blob-attestation --signature reads, with the
// DSSE implementation of go-securesystemslib.
//
// It also says which key a build signs with (BuildKeyPath: the build's
// own, else the recipe's sign_key) and decrypts it with the password in
// $COSIGN_PASSWORD, as cosign does. The names of the signature files are
// package manifest's, with the other files beside a tgz.
//
// Files are hashed as streams (internal/digest), so memory stays flat on
// multi-GB tarballs. Verification is by key only: no transparency log, no
// certificates.
package signing
