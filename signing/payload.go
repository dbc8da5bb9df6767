package signing

import (
	"bytes"
	"errors"
	"fmt"
)

// SignPayload signs payload's SHA-256, as cosign signs an image's
// simple-signing payload, and returns the raw ASN.1 ECDSA signature.
func (s *Signer) SignPayload(payload []byte) ([]byte, error) {
	sig, err := s.sv.SignMessage(bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("signing a payload: %w", err)
	}
	return sig, nil
}

// VerifyPayload checks a raw ASN.1 signature of payload (SignPayload's).
func (v *Verifier) VerifyPayload(payload, sig []byte) error {
	if err := v.v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(payload)); err != nil {
		return errors.New("the signature does not verify under this key (signed with another key, or the payload changed since)")
	}
	return nil
}
