package signing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// maxAttestation bounds an attestation envelope, or the document it
// attests, read from disk: what VerifyDSSE reads.
const maxAttestation = MaxEnvelopeSize

// statement is what signing reads of an in-toto statement: its subjects'
// sha256 digests and its predicate type (cosign checks no more).
type statement struct {
	Type    string `json:"_type"`
	Subject []struct {
		Name   string            `json:"name"`
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

func parseStatement(b []byte) (*statement, error) {
	var s statement
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("not an in-toto statement: %w", err)
	}
	if !strings.HasPrefix(s.Type, "https://in-toto.io/Statement/") {
		return nil, fmt.Errorf("not an in-toto statement (_type %q)", s.Type)
	}
	return &s, nil
}

// about says whether the statement's subjects include the digest.
func (s *statement) about(sha256 string) bool {
	for _, sub := range s.Subject {
		if d, ok := sub.Digest["sha256"]; ok && digest.Equal(d, sha256) {
			return true
		}
	}
	return false
}

// Attest signs in-toto statements about a tgz as DSSE envelopes, in
// cosign's attestation format, keyed as statements is (by the path each
// envelope is to be written to). It refuses a statement that is not about
// the tgz of sha256: an attestation verifies for its subjects only.
func (s *Signer) Attest(ctx context.Context, tgzSHA256 string, statements map[string][]byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, path := range slices.Sorted(maps.Keys(statements)) {
		st, err := parseStatement(statements[path])
		if err != nil {
			return nil, fmt.Errorf("attesting %s: %w", path, err)
		}
		if !st.about(tgzSHA256) {
			return nil, fmt.Errorf("refusing to sign %s: its statement's subjects do not include the tgz (sha256 %s)", path, tgzSHA256)
		}
		if out[path], err = s.SignDSSE(ctx, InTotoPayloadType, statements[path]); err != nil {
			return nil, fmt.Errorf("attesting %s: %w", path, err)
		}
	}
	return out, nil
}

// VerifyAttestation checks the DSSE envelope at path under the key: an
// in-toto statement of predicateType about the tgz of sha256. It returns
// the statement.
func (v *Verifier) VerifyAttestation(ctx context.Context, path, tgzSHA256, predicateType string) ([]byte, error) {
	env, err := readlimit.File(path, maxAttestation)
	if err != nil {
		return nil, fmt.Errorf("reading the attestation: %w", err)
	}
	typ, payload, err := v.VerifyDSSE(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if typ != InTotoPayloadType {
		return nil, fmt.Errorf("%s: payload type %q, not an in-toto statement (%s)", path, typ, InTotoPayloadType)
	}
	st, err := parseStatement(payload)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.PredicateType != predicateType {
		return nil, fmt.Errorf("%s: predicate type %q, want %q", path, st.PredicateType, predicateType)
	}
	if !st.about(tgzSHA256) {
		return nil, fmt.Errorf("%s attests another artifact: its subjects do not include sha256 %s (the tgz changed since, or the attestation is another build's)", path, tgzSHA256)
	}
	return payload, nil
}

// samePredicate says whether the statement's predicate is the JSON
// document doc (equal as JSON values, whatever the formatting).
func samePredicate(stmt, doc []byte) (bool, error) {
	st, err := parseStatement(stmt)
	if err != nil {
		return false, err
	}
	canon := func(b []byte) ([]byte, error) {
		var v any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		return json.Marshal(v)
	}
	a, err := canon(st.Predicate)
	if err != nil {
		return false, err
	}
	b, err := canon(doc)
	if err != nil {
		return false, err
	}
	return bytes.Equal(a, b), nil
}
