package signing_test

import (
	"testing"

	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/signing/signingtest"
)

func TestSignPayload(t *testing.T) {
	s, _, _, _ := signingtest.KeyPair(t, []byte("pw"))
	v, err := s.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"critical":{}}`)
	sig, err := s.SignPayload(payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifyPayload(payload, sig); err != nil {
		t.Errorf("VerifyPayload: %v", err)
	}
	if err := v.VerifyPayload([]byte(`{"critical":{"x":1}}`), sig); err == nil {
		t.Error("VerifyPayload accepted another payload")
	}
	otherPriv, _, _ := signing.GenerateKeyPair(nil)
	other, _ := signing.LoadPrivateKey(otherPriv, nil)
	ov, _ := other.Verifier()
	if err := ov.VerifyPayload(payload, sig); err == nil {
		t.Error("VerifyPayload accepted another key")
	}
}
