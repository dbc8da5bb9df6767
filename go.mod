module github.com/gpuaas/imagectl

go 1.26.8

require (
	// OWASP CycloneDX's Go library: the SBOM as a CycloneDX 1.6 BOM, written and read (sbom).
	github.com/CycloneDX/cyclonedx-go v0.12.0
	// OpenPGP armor decoding for apt keys fetched by URL (apt wants binary keyrings).
	github.com/ProtonMail/go-crypto v1.5.2
	// "did you mean" for names HCL does not already suggest (collectors, -var names).
	github.com/agext/levenshtein v1.2.1
	// MAAS API: OAuth PLAINTEXT signing and boot-resource GET/DELETE for upload/maas
	// (module path canonical/, fetched from maas/: see the replace below).
	github.com/canonical/gomaasclient v0.16.0
	// The GPT table and ext4 directory listings, inode stat and xattr values
	// for the host-side packer (builder/ext4tar); its file reads are not used
	// (they ignore holes, see docs/host-side-packing.md).
	github.com/diskfs/go-diskfs v1.9.4
	// The CycloneDX BOM's serial number: a name-based (v5) UUID of its content (sbom).
	github.com/google/uuid v1.6.0
	github.com/hashicorp/hcl/v2 v2.25.0
	// The in-toto attestation framework's Go bindings: the statement and SLSA v1
	// provenance types and their validation (provenance).
	github.com/in-toto/attestation v1.2.0
	// gomaasclient's transport: its ServerError carries MAAS's status and body.
	github.com/juju/gomaasapi/v2 v2.3.0
	// Parallel gzip for the tgz: curtin reads gzip, not zstd.
	github.com/klauspost/pgzip v1.3.0
	// Read-ahead in a goroutine of its own: the racks check reads a rack's
	// socket while it hashes what came before (racks).
	github.com/klauspost/readahead v1.4.0
	// dpkg's version ordering for imagectl diff (upgraded vs downgraded).
	github.com/knqyf263/go-deb-version v0.0.0-20241115132648-6f4aee6ccd23
	// OCI descriptor and manifest types and digests for store/oci (oras-go's own types).
	github.com/opencontainers/go-digest v1.0.0
	github.com/opencontainers/image-spec v1.1.1
	// Package URLs (pkg:deb/...) for the SBOM's packages, encoded as the purl spec says.
	github.com/package-url/packageurl-go v0.1.7
	// cosign's private-key encryption (scrypt + NaCl secretbox), for cosign.key files.
	github.com/secure-systems-lab/go-securesystemslib v0.11.1
	// Sigstore bundle types (.sigstore.json); sigstore/signature links them already.
	github.com/sigstore/protobuf-specs v0.5.2
	// The signing library cosign uses (ECDSA signer/verifier, PEM keys), without cosign's
	// ~230-module CLI. v1.11 needs Go 1.27.
	github.com/sigstore/sigstore v1.10.11
	// The SPDX project's Go library: the SBOM's SPDX 2.3 document, written and read (sbom).
	github.com/spdx/tools-golang v0.5.7
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	github.com/zclconf/go-cty v1.19.0
	// protojson: a bundle's JSON form is protobuf's JSON mapping, as cosign writes it.
	google.golang.org/protobuf v1.36.12
	// libguestfs's Go binding: Debian ships it as source only, so the
	// Makefile copies it into third_party/guestfs (see the replace below).
	// Only code built with the guestfs tag imports it.
	libguestfs.org/guestfs v0.0.0
	// The OCI registry store (store/oci): registry client, auth, Docker credential store, PackManifest.
	oras.land/oras-go/v2 v2.6.4
)

require (
	// Tests only: the CycloneDX BOM checked against CycloneDX's JSON schema (sbom).
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	// Tests only: bcrypt for the test registry's htpasswd (store/oci/ocitest).
	golang.org/x/crypto v0.55.0
	golang.org/x/net v0.57.0
	golang.org/x/sys v0.47.0
	// Tests only: the smoke tests parse the cloud-init user-data smoke writes.
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/anchore/go-lzo v0.1.0 // indirect
	github.com/anchore/go-struct-converter v0.1.0 // indirect
	github.com/apparentlymart/go-textseg/v15 v15.0.0 // indirect
	github.com/apparentlymart/go-textseg/v17 v17.0.1 // indirect
	github.com/djherbis/times v1.6.0 // indirect
	github.com/elliotwutingfeng/asciiset v0.0.0-20260129054604-cfde2086bc57 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/go-containerregistry v0.21.9 // indirect
	github.com/google/go-querystring v1.1.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/juju/collections v1.0.4 // indirect
	github.com/juju/errors v1.0.0 // indirect
	github.com/juju/loggo v1.0.0 // indirect
	github.com/juju/mgo/v2 v2.0.2 // indirect
	github.com/juju/schema v1.0.1 // indirect
	github.com/juju/version v0.0.0-20210303051006-2015802527a8 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mitchellh/go-wordwrap v1.0.1 // indirect
	github.com/pierrec/lz4/v4 v4.1.26 // indirect
	github.com/pkg/xattr v0.4.12 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/ulikunitz/xz v0.5.15 // indirect
	github.com/youmark/pkcs8 v0.0.0-20240726163527-a2c0da244d78 // indirect
	golang.org/x/mod v0.38.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/term v0.45.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/tools v0.48.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260727163830-6c54dddc4772 // indirect
	gopkg.in/mgo.v2 v2.0.0-20190816093944-a6b53ec6cb22 // indirect
)

replace libguestfs.org/guestfs => ./third_party/guestfs

replace github.com/canonical/gomaasclient => github.com/maas/gomaasclient v0.16.0
