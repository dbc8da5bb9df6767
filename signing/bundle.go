package signing

import (
	"errors"
	"fmt"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// bundleMediaType is what cosign sign-blob --new-bundle-format writes.
const bundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

var knownMediaTypes = map[string]bool{
	"application/vnd.dev.sigstore.bundle+json;version=0.1": true,
	"application/vnd.dev.sigstore.bundle+json;version=0.2": true,
	"application/vnd.dev.sigstore.bundle+json;version=0.3": true,
	bundleMediaType: true,
}

// marshalBundle is the bundle cosign writes for a key-signed blob without
// a transparency log entry: the key's hint, the digest and the signature.
func marshalBundle(hint string, digest, sig []byte) ([]byte, error) {
	b := &protobundle.Bundle{
		MediaType: bundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{Hint: hint}},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: digest},
			Signature:     sig,
		}},
	}
	out, err := protojson.Marshal(b)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// parseBundle decodes a bundle and returns its message signature and key
// hint, refusing what imagectl cannot verify with a key alone.
func parseBundle(data []byte) (*protocommon.MessageSignature, string, error) {
	var b protobundle.Bundle
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, &b); err != nil {
		return nil, "", fmt.Errorf("not a Sigstore bundle: %w", err)
	}
	if !knownMediaTypes[b.GetMediaType()] {
		return nil, "", fmt.Errorf("not a Sigstore bundle: media type %q", b.GetMediaType())
	}
	ms := b.GetMessageSignature()
	switch {
	case b.GetDsseEnvelope() != nil:
		return nil, "", errors.New("the bundle holds a DSSE envelope (an attestation), not a blob signature")
	case len(ms.GetSignature()) == 0:
		return nil, "", errors.New("the bundle holds no message signature")
	case ms.GetMessageDigest() == nil:
		return nil, "", errors.New("the bundle's message signature has no digest")
	case ms.GetMessageDigest().GetAlgorithm() != protocommon.HashAlgorithm_SHA2_256:
		return nil, "", fmt.Errorf("the bundle's digest is %s; imagectl verifies SHA2_256", ms.GetMessageDigest().GetAlgorithm())
	case b.GetVerificationMaterial().GetPublicKey() == nil:
		return nil, "", errors.New("the bundle was signed with a certificate (keyless), not a key; verify it with cosign")
	}
	return ms, b.GetVerificationMaterial().GetPublicKey().GetHint(), nil
}
