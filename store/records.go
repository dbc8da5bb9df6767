package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/gpuaas/imagectl/validate"
)

// Evidence is one host's validation result recorded for a version at a
// site: the result as the host's script wrote it, and who recorded it,
// when and how.
type Evidence struct {
	Site       string    `json:"site"`
	RecordedAt time.Time `json:"recorded_at"`
	RecordedBy string    `json:"recorded_by"`
	// Via is how the result was gathered: "hostcheck" or "evidence add".
	Via    string          `json:"via"`
	Result validate.Result `json:"result"`
}

// MaxRecords bounds a records file of a catalog (an image version's
// evidence at a site, an image's revocations): reads refuse a bigger one,
// and writes refuse to make one (EncodeRecords), which every later read
// would refuse.
const MaxRecords = 64 << 20

// MaxEvidenceResult bounds one result kept as evidence, encoded: a few
// hundred checks with their details fit in well under it (a host's result
// is a few KiB), and a records file holds at least MaxRecords /
// MaxEvidenceResult of them.
const MaxEvidenceResult = 256 << 10

// KeepPerHost is how many results of one host an image version's
// evidence at a site keeps: its latest (AppendEvidence).
const KeepPerHost = 20

// Check says what keeps e from being recorded as a store key (site, image
// and version) or as a result (a whole one, within MaxEvidenceResult),
// nil when nothing does.
func (e *Evidence) Check() error {
	errs := []error{CheckKey("site", e.Site), CheckKey("image", e.Result.Image),
		CheckKey("version", e.Result.Version), e.Result.Check()}
	if b, err := json.Marshal(e.Result); err != nil {
		errs = append(errs, err)
	} else if len(b) > MaxEvidenceResult {
		errs = append(errs, fmt.Errorf("the result of host %s is %d bytes, more than the %d a result kept as evidence may be", e.Result.Host, len(b), MaxEvidenceResult))
	}
	return errors.Join(errs...)
}

// AppendEvidence is an image version's evidence at a site, had (oldest
// first, as its file keeps it), with add appended and, of each host (its
// machine id, else its name), only the KeepPerHost latest results by
// RecordedAt (the later in the file when equal): an evidence file grows
// with the hosts, not with each check of a host. Both stores keep their
// files with it.
func AppendEvidence(had, add []Evidence) []Evidence {
	all := append(append([]Evidence{}, had...), add...)
	return keepLatest(all, func(e Evidence) string { return hostKey(e.Result.MachineID, e.Result.Host) },
		func(e Evidence) time.Time { return e.RecordedAt }, KeepPerHost)
}

// keepLatest is all, in its order, with of each key only the n latest by
// at (the later in all when equal): the one rule of evidence, rack proofs
// and boot comparisons. It is a new slice, never nil.
func keepLatest[T any, K comparable](all []T, key func(T) K, at func(T) time.Time, n int) []T {
	byKey := map[K][]int{}
	for i, v := range all {
		byKey[key(v)] = append(byKey[key(v)], i)
	}
	drop := map[int]bool{}
	for _, idx := range byKey {
		if len(idx) <= n {
			continue
		}
		sort.SliceStable(idx, func(a, b int) bool { return at(all[idx[a]]).Before(at(all[idx[b]])) })
		for _, i := range idx[:len(idx)-n] {
			drop[i] = true
		}
	}
	kept := make([]T, 0, len(all)-len(drop))
	for i, v := range all {
		if !drop[i] {
			kept = append(kept, v)
		}
	}
	return kept
}

// CheckEvidenceFile says what keeps evs, read from the evidence file of site,
// image and version (path, for the error), from being what a store wrote
// there: each a result of that site, image and version.
func CheckEvidenceFile(path, site, image, version string, evs []Evidence) error {
	for i, e := range evs {
		if e.Site != site || e.Result.Image != image || e.Result.Version != version {
			return fmt.Errorf("reading %s: result %d is of %s %s at site %q", path, i+1, e.Result.Image, e.Result.Version, e.Site)
		}
	}
	return nil
}

// CheckRevocationFile says what keeps rs, read from image's revocation file
// (path, for the error), from being what a store wrote there: each of
// that image.
func CheckRevocationFile(path, image string, rs []Revocation) error {
	for i, r := range rs {
		if r.Image != image {
			return fmt.Errorf("reading %s: revocation %d is of image %q", path, i+1, r.Image)
		}
	}
	return nil
}

// CheckRackProofFile says what keeps ps, read from the rack proof file of
// site, image and version (path, for the error), from being what a store
// wrote there: each of that site, image and version.
func CheckRackProofFile(path, site, image, version string, ps []RackProof) error {
	for i, r := range ps {
		if r.Site != site || r.Image != image || r.Version != version {
			return fmt.Errorf("reading %s: rack proof %d is of %s %s at site %q", path, i+1, r.Image, r.Version, r.Site)
		}
	}
	return nil
}

func hostKey(machineID, host string) string {
	if machineID != "" {
		return "machine-id " + machineID
	}
	return "host " + host
}

// EncodeRecords is a records file's content (v as indented JSON), or why
// it cannot be written: over MaxRecords, it would be refused by every
// read. name is the file, for the error.
func EncodeRecords(name string, v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	b = append(b, '\n')
	if len(b) > MaxRecords {
		return nil, fmt.Errorf("%s would be %d bytes, more than the %d a records file may be (every read would refuse it): nothing is written", name, len(b), MaxRecords)
	}
	return b, nil
}

// Revocation says an image version must not run at any site (or, Undo,
// that it may again), who said so, when and why.
type Revocation struct {
	Image   string    `json:"image"`
	Version string    `json:"version"`
	Reason  string    `json:"reason"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Undo    bool      `json:"undo,omitempty"`
}

// Check says what keeps r from being recorded.
func (r *Revocation) Check() error {
	var errs []error
	errs = append(errs, CheckKey("image", r.Image), CheckKey("version", r.Version))
	if r.Reason == "" {
		errs = append(errs, fmt.Errorf("a revocation of %s %s needs a reason", r.Image, r.Version))
	}
	return errors.Join(errs...)
}

// RefuseRevoked is why a promotion of image version cannot be recorded
// given the image's revocation history (an error wrapping ErrRevoked,
// naming the revocation in force), nil when the version is not revoked.
func RefuseRevoked(history []Revocation, image, version string) error {
	r, ok := Revoked(history, image)[version]
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: %s %s was revoked by %s at %s: %s", ErrRevoked, image, version, r.By, r.At.UTC().Format(time.RFC3339), r.Reason)
}

// Revoked replays a revocation history: the versions of image revoked
// now, each with the revocation in force (the last one, not undone).
func Revoked(history []Revocation, image string) map[string]Revocation {
	out := map[string]Revocation{}
	for _, r := range history {
		switch {
		case r.Image != image:
		case r.Undo:
			delete(out, r.Version)
		default:
			out[r.Version] = r
		}
	}
	return out
}

// RackProof is one rack controller's verdict in a check that it serves
// an image version at a site (imagectl warm-racks, or a promotion or
// rollback that checked the racks): when it proved, or failed to prove,
// that it serves the version. It is a record of its own, not part of a
// promotion: a check of the version a site already runs is recorded too.
type RackProof struct {
	Site     string `json:"site"`
	Image    string `json:"image"`
	Version  string `json:"version"`
	Rack     string `json:"rack"`
	SystemID string `json:"system_id"`
	// Verdict is passed, failed or unknown; only passed is proof.
	Verdict string    `json:"verdict"`
	Detail  string    `json:"detail,omitempty"`
	At      time.Time `json:"at"`
	By      string    `json:"by,omitempty"`
	// Via is what checked: "warm-racks", "promote" or "rollback".
	Via string `json:"via,omitempty"`
}

// KeepPerRack is how many verdicts of one rack an image version's rack
// proofs at a site keep: its latest (AppendRackProofs).
const KeepPerRack = 20

// Check says what keeps p from being recorded.
func (p *RackProof) Check() error {
	errs := []error{CheckKey("site", p.Site), CheckKey("image", p.Image), CheckKey("version", p.Version)}
	if p.Rack == "" && p.SystemID == "" {
		errs = append(errs, errors.New("a rack proof names no rack"))
	}
	switch p.Verdict {
	case "passed", "failed", "unknown":
	default:
		errs = append(errs, fmt.Errorf("rack %s: verdict %q is not passed, failed or unknown", p.Rack, p.Verdict))
	}
	return errors.Join(errs...)
}

// CheckRackProofs says what keeps ps from being recorded together: each
// must be whole, and all of one site, image and version.
func CheckRackProofs(ps []RackProof) error {
	for i := range ps {
		if err := ps[i].Check(); err != nil {
			return fmt.Errorf("rack proof %d: %w", i+1, err)
		}
		if i > 0 && (ps[i].Site != ps[0].Site || ps[i].Image != ps[0].Image || ps[i].Version != ps[0].Version) {
			return fmt.Errorf("rack proof %d is of %s %s at site %s, the first of %s %s at site %s: one check at a time",
				i+1, ps[i].Image, ps[i].Version, ps[i].Site, ps[0].Image, ps[0].Version, ps[0].Site)
		}
	}
	return nil
}

// rackKey is a rack's identity in its proofs: its system id, else its name.
func rackKey(p RackProof) string {
	if p.SystemID != "" {
		return "system-id " + p.SystemID
	}
	return "rack " + p.Rack
}

// AppendRackProofs is an image version's rack proofs at a site, had
// (oldest first), with add appended and, of each rack, only the
// KeepPerRack latest by At (the later in the file when equal).
func AppendRackProofs(had, add []RackProof) []RackProof {
	all := append(append([]RackProof{}, had...), add...)
	return keepLatest(all, rackKey, func(p RackProof) time.Time { return p.At }, KeepPerRack)
}

// LatestRackProofs is each rack's latest verdict of ps (by At, the later
// in ps when equal), in rack name order.
func LatestRackProofs(ps []RackProof) []RackProof {
	latest := map[string]RackProof{}
	for _, p := range ps {
		if q, ok := latest[rackKey(p)]; !ok || !p.At.Before(q.At) {
			latest[rackKey(p)] = p
		}
	}
	out := make([]RackProof, 0, len(latest))
	for _, p := range latest {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rack != out[j].Rack {
			return out[i].Rack < out[j].Rack
		}
		return out[i].SystemID < out[j].SystemID
	})
	return out
}
