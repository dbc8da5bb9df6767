package store

import (
	"errors"
	"fmt"
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

// Check says what keeps e from being recorded as a store key (site, image
// and version) or as a result, nil when nothing does.
func (e *Evidence) Check() error {
	return errors.Join(CheckKey("site", e.Site), CheckKey("image", e.Result.Image),
		CheckKey("version", e.Result.Version), e.Result.Check())
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
