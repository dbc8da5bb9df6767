package release

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/validate"
)

// Ways a result is gathered (store.Evidence.Via).
const (
	ViaHostcheck = "hostcheck"
	ViaAdd       = "evidence add"
)

// Offered is one validation result offered as evidence, and where it came
// from (a host, a file), for messages.
type Offered struct {
	From   string
	Result *validate.Result
	// Problem is why From gave no result (a file that is not one); the
	// result is refused with it.
	Problem string
}

// Refusal is a result not recorded, and why.
type Refusal struct {
	// Index is the refused result's position among those offered.
	Index   int    `json:"index"`
	From    string `json:"from"`
	Image   string `json:"image,omitempty"`
	Version string `json:"version,omitempty"`
	Host    string `json:"host,omitempty"`
	Reason  string `json:"reason"`
}

// Recorded is what Record kept and refused.
type Recorded struct {
	Site     string           `json:"site"`
	Recorded []store.Evidence `json:"recorded"`
	Refused  []Refusal        `json:"refused"`
}

// Record records validation results as evidence at o.Site (a site of the
// sites file), in one AddEvidence call (one commit of a git catalog). It
// refuses, saying why, each result that is not whole, is not for a
// version the store holds, whose script_sha256 is not the sha256 of that
// version's validation script, or whose profile or stage the version's
// manifest does not know; the others are recorded, by o.By (else $USER of
// o.Env) at o.Now, with via (ViaHostcheck, ViaAdd). The error is for what
// keeps every result from being recorded: the store failed.
func Record(ctx context.Context, offered []Offered, via string, o Options) (*Recorded, error) {
	if o.Site == nil {
		return nil, errors.New("recording evidence: no site")
	}
	site := o.Site.Name
	clock := time.Now
	if o.Now != nil {
		clock = o.Now
	}
	now := clock().UTC()
	by := cmp.Or(o.By, environ.Get(o.Env, "USER"), "unknown")
	out := &Recorded{Site: site, Recorded: []store.Evidence{}, Refused: []Refusal{}}
	known := map[[2]string]*scriptOf{}
	for i, off := range offered {
		r := off.Result
		refuse := func(format string, args ...any) {
			ref := Refusal{Index: i, From: off.From, Reason: fmt.Sprintf(format, args...)}
			if r != nil {
				ref.Image, ref.Version, ref.Host = r.Image, r.Version, r.Host
			}
			out.Refused = append(out.Refused, ref)
		}
		if off.Problem != "" {
			refuse("%s", off.Problem)
			continue
		}
		if r == nil {
			refuse("no validation result")
			continue
		}
		ev := store.Evidence{Site: site, RecordedAt: now, RecordedBy: by, Via: via, Result: *r}
		if err := ev.Check(); err != nil {
			refuse("%v", err)
			continue
		}
		key := [2]string{r.Image, r.Version}
		s, ok := known[key]
		if !ok {
			var err error
			if s, err = versionScript(ctx, o.Store, r.Image, r.Version); err != nil {
				return nil, err
			}
			known[key] = s
		}
		if reason := s.refuses(r); reason != "" {
			refuse("%s", reason)
			continue
		}
		out.Recorded = append(out.Recorded, ev)
	}
	if len(out.Recorded) == 0 {
		return out, nil
	}
	if err := o.Store.AddEvidence(ctx, out.Recorded); err != nil {
		return nil, fmt.Errorf("recording %d validation results at site %s in %s: %w", len(out.Recorded), site, o.Store.Location(), err)
	}
	return out, nil
}

// scriptOf is what a version's results are checked against; missing says
// why none can be recorded.
type scriptOf struct {
	image, version string
	missing        string
	sha256         string
	profiles       []string
}

func versionScript(ctx context.Context, st store.Versions, image, version string) (*scriptOf, error) {
	s := &scriptOf{image: image, version: version}
	v, err := st.Version(ctx, image, version)
	if errors.Is(err, store.ErrNotFound) {
		s.missing = fmt.Sprintf("%s %s is not a version of the store %s", image, version, st.Location())
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s from %s: %w", image, version, st.Location(), err)
	}
	if v.ValidationScript == "" {
		s.missing = fmt.Sprintf("%s %s has no validation script in the store %s", image, version, st.Location())
		return s, nil
	}
	d, err := digest.File(ctx, v.ValidationScript)
	if err != nil {
		return nil, fmt.Errorf("hashing %s %s's validation script: %w", image, version, err)
	}
	s.sha256 = d.Hex()
	m, err := manifest.Read(v.Manifest)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s's manifest: %w", image, version, err)
	}
	s.profiles = manifestProfiles(m)
	return s, nil
}

// manifestProfiles are the profiles a version's script checks: those its
// manifest names, else every profile the script knows.
func manifestProfiles(m *manifest.Manifest) []string {
	var out []string
	for _, p := range m.Validation.Profiles {
		out = append(out, p.Name)
	}
	if len(out) == 0 {
		out = manifest.Profiles
	}
	return out
}

// refuses says why r cannot be recorded for s's version, "" when it can.
func (s *scriptOf) refuses(r *validate.Result) string {
	switch {
	case s.missing != "":
		return s.missing
	case !digest.Equal(r.ScriptSHA256, s.sha256):
		return fmt.Sprintf("its script_sha256 %s is not the sha256 of %s %s's validation script (%s): the host ran another script", r.ScriptSHA256, s.image, s.version, s.sha256)
	case !slices.Contains(s.profiles, r.Profile):
		return fmt.Sprintf("profile %q is not one of %s %s's (%s)", r.Profile, s.image, s.version, strings.Join(s.profiles, ", "))
	case !slices.Contains(manifest.Stages, r.Stage):
		return fmt.Sprintf("stage %q is not one of %s", r.Stage, strings.Join(manifest.Stages, ", "))
	}
	return ""
}

// CheckTarget is what hostcheck runs on a site's hosts: the validation
// script of Image at Script, as Version's manifest names it.
type CheckTarget struct {
	Image string `json:"image"`
	// Version is the one the site runs, else the store's latest: the
	// manifest the script's path is read from (the hosts' results say
	// which version each runs).
	Version string `json:"version"`
	Script  string `json:"script"`
}

// HostcheckTarget finds the validation script hostcheck runs at o.Site:
// of image, or, when image is "", of the one image the site's catalog
// holds (an error lists them when there are none or several).
func HostcheckTarget(ctx context.Context, image string, o Options) (*CheckTarget, error) {
	if o.Site == nil {
		return nil, errors.New("finding the validation script: no site")
	}
	site := o.Site.Name
	cat, err := o.Store.Catalog(ctx, site)
	if err != nil {
		return nil, fmt.Errorf("reading site %s's catalog: %w", site, err)
	}
	if image == "" {
		var running []string
		for img, h := range cat {
			if cur, _ := store.State(h); cur != "" {
				running = append(running, img)
			}
		}
		sort.Strings(running)
		switch len(running) {
		case 1:
			image = running[0]
		case 0:
			return nil, fmt.Errorf("site %s runs no image in %s's catalog: name the image with --image", site, o.Store.Location())
		default:
			return nil, fmt.Errorf("site %s runs several images (%s): name one with --image", site, strings.Join(running, ", "))
		}
	}
	version, _ := store.State(cat[image])
	var v *store.Version
	if version != "" {
		v, err = o.Store.Version(ctx, image, version)
	} else if v, err = o.Store.Latest(ctx, image); err == nil && v == nil {
		err = fmt.Errorf("%w: the store %s holds no version of %s", store.ErrNotFound, o.Store.Location(), image)
	}
	if err != nil {
		return nil, fmt.Errorf("finding %s's validation script for site %s: %w", image, site, err)
	}
	m, err := manifest.Read(v.Manifest)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s's manifest: %w", v.Image, v.Version, err)
	}
	if m.Validation.Script == "" {
		return nil, fmt.Errorf("%s %s's manifest names no validation script", v.Image, v.Version)
	}
	return &CheckTarget{Image: v.Image, Version: v.Version, Script: m.Validation.Script}, nil
}

// SiteEvidence is a version's evidence at one site, oldest first.
type SiteEvidence struct {
	Site     string           `json:"site"`
	Evidence []store.Evidence `json:"evidence"`
}

// EvidenceAt is the evidence recorded for image version at each of sites,
// in their order.
func EvidenceAt(ctx context.Context, st store.Promotions, sites []string, image, version string) ([]SiteEvidence, error) {
	out := make([]SiteEvidence, 0, len(sites))
	for _, s := range sites {
		evs, err := st.Evidence(ctx, s, image, version)
		if err != nil {
			return nil, err
		}
		out = append(out, SiteEvidence{Site: s, Evidence: evs})
	}
	return out, nil
}
