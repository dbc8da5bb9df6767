package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/provenance"
	"github.com/gpuaas/imagectl/signing"
)

type keygenFlags struct {
	prefix string
	force  bool
}

func newKeygenCmd(env []string) *cobra.Command {
	cmd, f := command(env, runKeygen, &cobra.Command{
		Use:   "keygen",
		Short: "Make a signing key pair in cosign's format (cosign.key, cosign.pub)",
		Long: `Keygen makes an ECDSA P-256 key pair as cosign generate-key-pair does:
<prefix>.key, the private key encrypted with the password in $COSIGN_PASSWORD
(set it empty for none), and <prefix>.pub, the public key. cosign reads both;
imagectl sign and build read keys cosign made. It refuses to overwrite an
existing pair unless --force.`,
		Example: `  COSIGN_PASSWORD=... imagectl keygen
  COSIGN_PASSWORD=... imagectl keygen --output-key-prefix keys/h200`,
		Args: cobra.NoArgs,
	})
	cmd.Flags().StringVar(&f.prefix, "output-key-prefix", "cosign", "write <prefix>.key and <prefix>.pub")
	cmd.Flags().BoolVar(&f.force, "force", false, "overwrite an existing key pair")
	return cmd
}

func runKeygen(_ context.Context, f *keygenFlags, _ []string, s streams, env []string) error {
	keyPath, pubPath, err := signing.KeyGen(f.prefix, env, f.force)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "Private key written to %s\nPublic key written to %s\n", keyPath, pubPath)
	return nil
}

// artifactFlags are sign's and verify's: the key and the manifest.
type artifactFlags struct {
	key, manifest string
	output        outputFlag
}

func (f *artifactFlags) register(cmd *cobra.Command, keyHelp string) {
	cmd.Flags().StringVar(&f.key, "key", "", keyHelp)
	cmd.Flags().StringVar(&f.manifest, "manifest", "", "the build manifest (default: the .manifest.json beside the tgz)")
	f.output.register(cmd)
	_ = cmd.MarkFlagRequired("key")
}

func newSignCmd(env []string) *cobra.Command {
	cmd, f := command(env, runSign, &cobra.Command{
		Use:   "sign ARTIFACT.tgz --key cosign.key",
		Short: "Sign a built tgz and its manifest (cosign format)",
		Long: `Sign signs a tgz and the build manifest beside it (<name>-<version>.manifest.json)
with a cosign private key (password from $COSIGN_PASSWORD), and writes beside
each a base64 signature (.sig) and a Sigstore bundle (.sigstore.json), and,
when the manifest records SBOMs and a provenance statement, attests each for
the tgz as a DSSE envelope (.spdx.dsse.json, .cdx.dsse.json,
.provenance.dsse.json): all of them or none. It refuses when the manifest's
artifact sha256 or size is not the tgz's, or a document is not the one the
manifest records. cosign verifies the result offline:

  cosign verify-blob --key cosign.pub --insecure-ignore-tlog --signature X.tgz.sig X.tgz
  cosign verify-blob --key cosign.pub --insecure-ignore-tlog --bundle X.tgz.sigstore.json \
      --new-bundle-format --trusted-root ROOT.json X.tgz

(offline, cosign wants a trusted root even for a key-signed bundle; one holding only
{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"} does.)`,
		Example: `  COSIGN_PASSWORD=... imagectl sign artifacts/gpuaas-h200-host-ubuntu2404-1.4.0.tgz --key cosign.key`,
		Args:    cobra.ExactArgs(1),
	})
	f.register(cmd, "cosign private key (password from $COSIGN_PASSWORD)")
	return cmd
}

func runSign(ctx context.Context, f *artifactFlags, args []string, s streams, env []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	signer, err := loadSigner(f.key, env)
	if err != nil {
		return err
	}
	manifestPath := manifestBeside(args[0], f.manifest)
	statements, err := provenance.Statements(args[0], manifestPath)
	if err != nil {
		return err
	}
	a, err := signing.SignArtifact(ctx, signer, args[0], manifestPath, statements)
	if err != nil {
		return err
	}
	return f.output.print(s.out, a, func(w io.Writer) error {
		textsafe.Fprintf(w, "%s\n  sha256 %s, %d bytes\n", a.Tarball.File, a.Tarball.SHA256, a.Tarball.Size)
		for _, file := range a.Files() {
			textsafe.Fprintf(w, "%s\n", file)
		}
		return nil
	})
}

func newVerifyCmd() *cobra.Command {
	cmd, f := command(nil, runVerify, &cobra.Command{
		Use:   "verify ARTIFACT.tgz --key cosign.pub",
		Short: "Verify a tgz's and its manifest's signatures, and that they match",
		Long: `Verify checks, with a cosign public key and offline, the signature of a tgz
and of the build manifest beside it (each .sig and .sigstore.json present; at
least one of them must be), and that the manifest's artifact sha256 and size
are the tgz's. When the manifest records SBOMs and a provenance statement
(every build since imagectl made them), it checks that each is the file the
manifest records and that its DSSE attestation (.spdx.dsse.json,
.cdx.dsse.json, .provenance.dsse.json) verifies under the key for this tgz
and carries it.
It exits 1 when anything fails, naming the check and the file: a wrong key,
a changed tgz, manifest, SBOM or provenance, a missing SBOM the manifest
records, a manifest or attestation of
another tgz, a missing signature, attestation or manifest. No transparency
log is consulted.`,
		Example: `  imagectl verify artifacts/gpuaas-h200-host-ubuntu2404-1.4.0.tgz --key cosign.pub
  imagectl verify image.tgz --key cosign.pub --output json`,
		Args: cobra.ExactArgs(1),
	})
	f.register(cmd, "cosign public key (cosign.pub)")
	return cmd
}

func runVerify(ctx context.Context, f *artifactFlags, args []string, s streams, _ []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	v, err := signing.LoadPublicKeyFile(f.key)
	if err != nil {
		return err
	}
	r, err := signing.VerifyArtifact(ctx, v, args[0], manifestBeside(args[0], f.manifest))
	if err != nil {
		return err
	}
	if !f.output.json() {
		return verifyText(s.out, r)
	}
	if err := writeJSON(s.out, r); err != nil {
		return err
	}
	if !r.Verified {
		return exitError{1}
	}
	return nil
}

// verifyText prints each check, then the result.
func verifyText(w io.Writer, r *signing.Report) error {
	for _, c := range r.Checks {
		status := "ok  "
		if !c.OK {
			status = "FAIL"
		}
		textsafe.Fprintf(w, "%s %-25s %s\n", status, c.Name, c.File)
	}
	if err := r.Err(); err != nil {
		return err
	}
	textsafe.Fprintf(w, "verified %s (sha256 %s, %d bytes) and %s\n", r.Tarball, r.SHA256, r.Size, r.Manifest)
	return nil
}

// loadSigner decrypts a private key with $COSIGN_PASSWORD (unset: none).
func loadSigner(keyPath string, env []string) (*signing.Signer, error) {
	return signing.LoadPrivateKeyFileEnv(keyPath, env)
}

// buildSigner is the build's signing hook: the outputs are signed before
// they are published, and published with their signatures, all or none.
func buildSigner(ctx context.Context, signer *signing.Signer) func(builder.SignRequest) (map[string][]byte, error) {
	if signer == nil {
		return nil
	}
	return func(r builder.SignRequest) (map[string][]byte, error) {
		_, files, err := signer.SignBuilt(ctx, r.Tarball, r.SHA256, r.Size, r.ManifestPath, r.Manifest, r.Attestations)
		return files, err
	}
}
