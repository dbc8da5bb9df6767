package signing_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/signing/signingtest"
)

// slsaStatement is a minimal in-toto v1 statement with a valid SLSA v1
// predicate about a blob named name with the given sha256 (hex). It is
// written by hand: package provenance, which makes imagectl's, is no
// import of signing's.
func slsaStatement(name, sha256Hex string) []byte {
	return []byte(`{"_type":"https://in-toto.io/Statement/v1",` +
		`"subject":[{"name":"` + name + `","digest":{"sha256":"` + sha256Hex + `"}}],` +
		`"predicateType":"https://slsa.dev/provenance/v1",` +
		`"predicate":{"buildDefinition":{"buildType":"x","externalParameters":{"a":"b"}},` +
		`"runDetails":{"builder":{"id":"https://example.com/b"}}}}`)
}

// signedStatement signs an in-toto statement about a blob with new keys:
// the keys, the statement and its DSSE envelope.
func signedStatement(t *testing.T) (k keys, payload, env []byte) {
	t.Helper()
	k = newKeys(t)
	payload = slsaStatement("blob", strings.Repeat("ab", 32))
	env, err := k.signer.SignDSSE(context.Background(), signing.InTotoPayloadType, payload)
	if err != nil {
		t.Fatal(err)
	}
	return k, payload, env
}

func TestDSSERoundTrip(t *testing.T) {
	ctx := context.Background()
	k, payload, env := signedStatement(t)

	// The envelope is cosign attest-blob's: standard base64, one
	// signature with an empty keyid, nothing else.
	var doc struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []map[string]string
	}
	dec := json.NewDecoder(bytes.NewReader(env))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("envelope %s: %v", env, err)
	}
	if doc.PayloadType != signing.InTotoPayloadType {
		t.Errorf("payloadType %q", doc.PayloadType)
	}
	if doc.Payload != base64.StdEncoding.EncodeToString(payload) {
		t.Errorf("payload %q is not the statement in standard base64", doc.Payload)
	}
	if len(doc.Signatures) != 1 {
		t.Fatalf("%d signatures, want 1", len(doc.Signatures))
	}
	if kid, ok := doc.Signatures[0]["keyid"]; !ok || kid != "" || len(doc.Signatures[0]) != 2 {
		t.Errorf("signature %v: want keyid \"\" and sig, as cosign writes", doc.Signatures[0])
	}
	if _, err := base64.StdEncoding.DecodeString(doc.Signatures[0]["sig"]); err != nil {
		t.Errorf("sig is not standard base64: %v", err)
	}

	typ, got, err := k.verifier.VerifyDSSE(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if typ != signing.InTotoPayloadType || !bytes.Equal(got, payload) {
		t.Errorf("VerifyDSSE = %q, %s", typ, got)
	}
	// Its own verifier too.
	if own, err := k.signer.Verifier(); err != nil {
		t.Fatal(err)
	} else if _, _, err := own.VerifyDSSE(ctx, env); err != nil {
		t.Errorf("the signer's own verifier: %v", err)
	}

	if _, err := k.signer.SignDSSE(ctx, "", payload); err == nil {
		t.Error("SignDSSE signed with no payload type")
	}
}

func TestVerifyDSSERefuses(t *testing.T) {
	ctx := context.Background()
	k, payload, env := signedStatement(t)
	edit := func(f func(map[string]any)) []byte { return signingtest.EditJSON(t, env, f) }
	const notVerified = "the attestation's signature does not verify under this key"
	other := newKeys(t)
	for _, tc := range []struct {
		name     string
		verifier *signing.Verifier
		env      []byte
		want     string
	}{
		{"another key", other.verifier, env, notVerified},
		{"tampered payload", k.verifier, edit(func(d map[string]any) {
			d["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte(`"a":"b"`), []byte(`"a":"c"`), 1))
		}), notVerified},
		{"another payload type", k.verifier, edit(func(d map[string]any) { d["payloadType"] = "application/json" }), notVerified},
		{"a wrong signature", k.verifier, edit(func(d map[string]any) {
			d["signatures"].([]any)[0].(map[string]any)["sig"] = base64.StdEncoding.EncodeToString([]byte("not a signature"))
		}), notVerified},
		{"no signatures", k.verifier, edit(func(d map[string]any) { d["signatures"] = []any{} }), "no signatures"},
		{"no payload type", k.verifier, edit(func(d map[string]any) { delete(d, "payloadType") }), "no payloadType"},
		{"payload not base64", k.verifier, edit(func(d map[string]any) { d["payload"] = "%%%" }), "payload is not base64"},
		{"signature not base64", k.verifier, edit(func(d map[string]any) {
			d["signatures"].([]any)[0].(map[string]any)["sig"] = "%%%"
		}), "signature 1 is not base64"},
		{"not JSON", k.verifier, []byte("MEUCIQ=="), "not a DSSE envelope"},
		{"too large", k.verifier, make([]byte, signing.MaxEnvelopeSize+1), "more than the 64 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, got, err := tc.verifier.VerifyDSSE(ctx, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("VerifyDSSE = %q, %q, %v; want an error with %q", typ, got, err, tc.want)
			}
		})
	}

	// The keyid is an unsigned hint: cosign verifies whatever it says,
	// and so does imagectl.
	hinted := edit(func(d map[string]any) { d["signatures"].([]any)[0].(map[string]any)["keyid"] = "some hint" })
	if _, _, err := k.verifier.VerifyDSSE(ctx, hinted); err != nil {
		t.Errorf("a keyid hint: %v", err)
	}
	// One good signature among others suffices.
	two := edit(func(d map[string]any) {
		sigs := d["signatures"].([]any)
		d["signatures"] = []any{map[string]any{"keyid": "", "sig": base64.StdEncoding.EncodeToString([]byte("junk"))}, sigs[0]}
	})
	if _, _, err := k.verifier.VerifyDSSE(ctx, two); err != nil {
		t.Errorf("a good signature after a bad one: %v", err)
	}
}

// TestDSSECosignInterop proves the envelope against the real cosign CLI,
// both ways: what imagectl signs, cosign verify-blob-attestation
// --signature accepts offline, checking the blob's digest against the
// statement's subject; what cosign attest-blob signs, imagectl verifies.
func TestDSSECosignInterop(t *testing.T) {
	cosign, dir, pw, env := interopSetup(t)
	ctx := context.Background()

	s, keyFile, pubFile := keyFiles(t, dir, pw)
	v, err := signing.LoadPublicKeyFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	blobData := []byte("an image tarball, as far as attestations care\n")
	blob := write(t, dir, "image-1.0.0.tgz", blobData)
	sum := sha256.Sum256(blobData)

	verify := func(pub, envelope, blob string) (string, error) {
		t.Helper()
		return signingtest.RunCosign(t, cosign, dir, nil, "verify-blob-attestation", "--key", pub,
			"--insecure-ignore-tlog=true", "--type", "slsaprovenance1", "--signature", envelope, blob)
	}

	t.Run("imagectl attests, cosign verifies", func(t *testing.T) {
		envelope, err := s.SignDSSE(ctx, signing.InTotoPayloadType, slsaStatement(filepath.Base(blob), hex.EncodeToString(sum[:])))
		if err != nil {
			t.Fatal(err)
		}
		envFile := write(t, dir, "image-1.0.0.intoto.json", envelope)
		if out, err := verify(pubFile, envFile, blob); err != nil || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign verify-blob-attestation rejects imagectl's attestation: %v\n%s", err, out)
		}

		// Another blob: cosign finds its digest among no subject.
		changed := append([]byte(nil), blobData...)
		changed[0] ^= 1
		otherBlob := write(t, dir, "changed.tgz", changed)
		if out, err := verify(pubFile, envFile, otherBlob); err == nil {
			t.Errorf("cosign verified the attestation for a changed blob:\n%s", out)
		} else if !strings.Contains(out, "no matching subject digest") {
			t.Errorf("cosign rejects a changed blob, but not for its digest: %v\n%s", err, out)
		}
		// Another key.
		_, otherPub, err := signing.GenerateKeyPair(nil)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := verify(write(t, dir, "other.pub", otherPub), envFile, blob); err == nil {
			t.Errorf("cosign verified the attestation with another key:\n%s", out)
		} else if !strings.Contains(out, "accepted signatures do not match threshold") {
			t.Errorf("cosign rejects another key, but not for its signature: %v\n%s", err, out)
		}
		// A changed statement (the blob's digest still its subject).
		var doc map[string]any
		if err := json.Unmarshal(envelope, &doc); err != nil {
			t.Fatal(err)
		}
		doc["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(slsaStatement(filepath.Base(blob), hex.EncodeToString(sum[:])),
			[]byte(`"a":"b"`), []byte(`"a":"c"`), 1))
		tampered, _ := json.Marshal(doc)
		if out, err := verify(pubFile, write(t, dir, "tampered.intoto.json", tampered), blob); err == nil {
			t.Errorf("cosign verified a changed statement:\n%s", out)
		} else if !strings.Contains(out, "accepted signatures do not match threshold") {
			t.Errorf("cosign rejects a changed statement, but not for its signature: %v\n%s", err, out)
		}
	})

	t.Run("cosign attests, imagectl verifies", func(t *testing.T) {
		pred := write(t, dir, "predicate.json", []byte(`{"buildDefinition":{"buildType":"x","externalParameters":{"a":"b"}},`+
			`"runDetails":{"builder":{"id":"https://example.com/b"}}}`))
		out := filepath.Join(dir, "by-cosign.intoto.json")
		if o, err := signingtest.RunCosign(t, cosign, dir, env, "attest-blob", "--yes", "--key", keyFile, "--tlog-upload=false",
			"--type", "slsaprovenance1", "--predicate", pred, "--output-signature", out, blob); err != nil {
			t.Fatalf("cosign attest-blob: %v\n%s", err, o)
		}
		envelope := read(t, out)
		typ, payload, err := v.VerifyDSSE(ctx, envelope)
		if err != nil {
			t.Fatalf("imagectl rejects cosign's attestation: %v\n%s", err, envelope)
		}
		if typ != signing.InTotoPayloadType {
			t.Errorf("payload type %q", typ)
		}
		var st struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Name   string            `json:"name"`
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
		}
		if err := json.Unmarshal(payload, &st); err != nil {
			t.Fatal(err)
		}
		if st.PredicateType != "https://slsa.dev/provenance/v1" || len(st.Subject) != 1 ||
			st.Subject[0].Name != filepath.Base(blob) || st.Subject[0].Digest["sha256"] != hex.EncodeToString(sum[:]) {
			t.Errorf("cosign's statement: %s", payload)
		}
		// A check of the flags: cosign verifies its own envelope as it
		// verifies imagectl's.
		if o, err := verify(pubFile, out, blob); err != nil {
			t.Errorf("cosign rejects its own attestation: %v\n%s", err, o)
		}
		// Tampered, imagectl rejects it.
		tampered := bytes.Replace(envelope, []byte(`"sig":"`), []byte(`"sig":"AAAA`), 1)
		if _, _, err := v.VerifyDSSE(ctx, tampered); err == nil {
			t.Error("imagectl verified a tampered cosign attestation")
		}
		// And with another key.
		if _, _, err := newKeys(t).verifier.VerifyDSSE(ctx, envelope); err == nil {
			t.Error("imagectl verified cosign's attestation with another key")
		}
	})
}
