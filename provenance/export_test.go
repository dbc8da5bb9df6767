package provenance

import (
	"fmt"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// imagectl only writes statements: reading one back is the tests' own.

// MaxStatementSize bounds a statement Parse reads.
const MaxStatementSize = 64 << 20

// Summary is what Parse reads back from a statement.
type Summary struct {
	PredicateType string
	// Subjects are the subjects' names and sha256 digests (hex).
	Subjects []Resource
	Builder  string
}

// Parse reads and validates an in-toto statement carrying SLSA v1
// provenance. The statement's type is in-toto v1's, or v0.1's (the same
// layout, which cosign attest-blob writes), as the library accepts.
// Unknown fields are ignored.
func Parse(b []byte) (*Summary, error) {
	if len(b) > MaxStatementSize {
		return nil, fmt.Errorf("the statement is %d bytes, more than the %d MiB a statement may be", len(b), MaxStatementSize>>20)
	}
	in := protojson.UnmarshalOptions{DiscardUnknown: true}
	var st intoto.Statement
	if err := in.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("not an in-toto statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("not a valid in-toto statement: %w", err)
	}
	if st.GetPredicateType() != PredicateType {
		return nil, fmt.Errorf("the statement's predicate is %q, not SLSA provenance v1 (%s)", st.GetPredicateType(), PredicateType)
	}
	pb, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("reading the statement's predicate: %w", err)
	}
	var prov slsa.Provenance
	if err := in.Unmarshal(pb, &prov); err != nil {
		return nil, fmt.Errorf("the statement's predicate is not SLSA v1 provenance: %w", err)
	}
	if err := prov.Validate(); err != nil {
		return nil, fmt.Errorf("the statement's predicate is not valid SLSA v1 provenance: %w", err)
	}
	s := &Summary{PredicateType: st.GetPredicateType(), Builder: prov.GetRunDetails().GetBuilder().GetId()}
	for _, d := range st.GetSubject() {
		s.Subjects = append(s.Subjects, Resource{Name: d.GetName(), URI: d.GetUri(), SHA256: d.GetDigest()["sha256"]})
	}
	return s, nil
}
