package signing

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
)

// InTotoPayloadType is the DSSE payload type of an in-toto statement.
const InTotoPayloadType = "application/vnd.in-toto+json"

// MaxEnvelopeSize bounds a DSSE envelope VerifyDSSE reads: a build's
// provenance or SBOM statement is far smaller, so a larger envelope is not
// what it claims.
const MaxEnvelopeSize = 64 << 20

// SignDSSE signs payload as a DSSE envelope (the PAE of payloadType and
// payload) and returns the envelope's JSON: the form cosign attest-blob
// writes and cosign verify-blob-attestation --signature reads, one
// signature with an empty keyid.
func (s *Signer) SignDSSE(ctx context.Context, payloadType string, payload []byte) ([]byte, error) {
	if payloadType == "" {
		return nil, errors.New("signing an attestation: no payload type")
	}
	// The adapter signs the PAE as cosign does: ECDSA over its SHA-256,
	// ASN.1 DER. An empty key ID makes cosign's "keyid": "".
	es, err := dsse.NewEnvelopeSigner(&sigdsse.SignerAdapter{SignatureSigner: s.sv, Pub: s.pub})
	if err != nil {
		return nil, fmt.Errorf("signing an attestation: %w", err)
	}
	env, err := es.SignPayload(ctx, payloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("signing an attestation: %w", err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encoding the attestation's envelope: %w", err)
	}
	return b, nil
}

// VerifyDSSE checks a DSSE envelope under the key and returns its payload
// type and payload. One signature that verifies suffices, whatever its
// keyid (an unsigned hint), as with cosign verify-blob-attestation. The
// payload type is the caller's to check.
func (v *Verifier) VerifyDSSE(ctx context.Context, envelope []byte) (payloadType string, payload []byte, err error) {
	if len(envelope) > MaxEnvelopeSize {
		return "", nil, fmt.Errorf("the attestation is %d bytes, more than the %d MiB an attestation may be", len(envelope), MaxEnvelopeSize>>20)
	}
	var env dsse.Envelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return "", nil, fmt.Errorf("the attestation is not a DSSE envelope: %w", err)
	}
	if env.PayloadType == "" {
		return "", nil, errors.New("the attestation's envelope has no payloadType")
	}
	if len(env.Signatures) == 0 {
		return "", nil, errors.New("the attestation is not signed: its envelope has no signatures")
	}
	// Decoding first leaves only the signature check to fail below.
	if _, err := env.DecodeB64Payload(); err != nil {
		return "", nil, fmt.Errorf("the attestation's payload is not base64: %w", err)
	}
	for i, s := range env.Signatures {
		if !isBase64(s.Sig) {
			return "", nil, fmt.Errorf("the attestation's signature %d is not base64", i+1)
		}
	}
	// Pub stays nil, as in cosign: the envelope's keyid then selects no key.
	ev, err := dsse.NewEnvelopeVerifier(&sigdsse.VerifierAdapter{SignatureVerifier: v.v})
	if err != nil {
		return "", nil, fmt.Errorf("verifying the attestation: %w", err)
	}
	_, payload, err = ev.VerifyAndDecode(ctx, &env)
	if err != nil {
		return "", nil, errors.New("the attestation's signature does not verify under this key (signed with another key, or the attestation changed since)")
	}
	return env.PayloadType, payload, nil
}

// isBase64 is whether s decodes as DSSE allows: standard or URL base64.
func isBase64(s string) bool {
	if _, err := base64.StdEncoding.DecodeString(s); err == nil {
		return true
	}
	_, err := base64.URLEncoding.DecodeString(s)
	return err == nil
}
