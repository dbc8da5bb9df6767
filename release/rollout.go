package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
)

// Rollout outcomes of a site.
const (
	// RolloutOK: the version was promoted (uploaded when MAAS lacked it,
	// profiles pointed at it, recorded).
	RolloutOK = "ok"
	// RolloutAlready: the site already ran the version; nothing recorded.
	RolloutAlready = "already"
	// RolloutFailed: the promotion failed; the detail says why.
	RolloutFailed = "failed"
	// RolloutRefused: not yet: the site's promotion policy is not met
	// (nothing was sent to the site; the detail and Policy say what is
	// missing), or some of its racks could not be reached and none failed
	// (a not-yet RacksError: the version is uploaded, no profile pointed,
	// nothing recorded; the detail says which).
	RolloutRefused = "refused"
	// RolloutSkipped: not attempted (the canary failed or was refused,
	// or the context ended first).
	RolloutSkipped = "skipped"
)

// DefaultParallel is how many sites a rollout promotes to at once when
// RolloutOptions.Parallel is 0.
const DefaultParallel = 4

// RolloutOptions configure Rollout. Options.Site is ignored: each site of
// Sites gets Options with its own Site.
type RolloutOptions struct {
	Options
	// Sites are the sites to promote to, each once.
	Sites []*sites.Site
	// Canary, when set, names one of Sites: it is promoted and checked
	// (the promotion succeeded, and its status shows MAAS holding the
	// version complete, the deploy profiles selecting it and the channel
	// pointing at it) before any other site is attempted; if that fails,
	// nothing else is.
	Canary string
	// Parallel is how many sites are promoted at once (DefaultParallel
	// when 0).
	Parallel int
	// SiteEvents gives each site's progress its own sink (the CLI prefixes
	// lines with the site's name); nil sends every site's to Options.Events,
	// which must then take events from several goroutines.
	SiteEvents func(site string) func(event.Event)
	// VerifierFor, when set, gives each site its verifier (a site's
	// verify_key). Every site's is loaded before anything is sent: an
	// error refuses the rollout, as a missing key refuses a promotion.
	// Nil: Options.Verifier for all.
	VerifierFor func(site *sites.Site) (*signing.Verifier, error)

	// verifiers are VerifierFor's, by site, once loaded.
	verifiers map[string]*signing.Verifier
}

// RolloutResult is what a rollout did, site by site.
type RolloutResult struct {
	Image   string `json:"image"`
	Version string `json:"version"`
	Canary  string `json:"canary,omitempty"`
	// Sites are in the order promoted: the canary first, then as given.
	Sites []SiteRollout `json:"sites"`
}

// SiteRollout is one site's outcome.
type SiteRollout struct {
	Site string `json:"site"`
	// Result is RolloutOK, RolloutAlready, RolloutFailed, RolloutRefused
	// or RolloutSkipped.
	Result string `json:"result"`
	// Version is the version the site runs now (the catalog's), Previous
	// the one it ran before the rollout ("" for none).
	Version  string `json:"version,omitempty"`
	Previous string `json:"previous,omitempty"`
	// Detail says what happened on one line: the upload, warnings, or why
	// it failed.
	Detail string `json:"detail"`
	// Policy is what the site's promotion policy said (met, overridden or
	// refusing); nil when the site has none or was not promoted to.
	Policy *Verdict `json:"policy,omitempty"`
	// Promotion is Promote's result, when it got that far.
	Promotion *Result `json:"promotion,omitempty"`
	// Err is the failure, for callers; Detail has its text.
	Err error `json:"-"`
}

// OK reports whether every site runs the version now (ok or already).
func (r *RolloutResult) OK() bool {
	for _, s := range r.Sites {
		if s.Result != RolloutOK && s.Result != RolloutAlready {
			return false
		}
	}
	return true
}

// Failed counts the sites that failed or were skipped.
func (r *RolloutResult) Failed() int {
	n := 0
	for _, s := range r.Sites {
		if s.Result != RolloutOK && s.Result != RolloutAlready {
			n++
		}
	}
	return n
}

// NotYet reports whether the sites that do not run the version were all
// refused by their policies (or skipped because the canary was): the
// rollout is waiting for something, not broken.
func (r *RolloutResult) NotYet() bool {
	if r.OK() {
		return false
	}
	canaryRefused := r.Canary != "" && len(r.Sites) > 0 && r.Sites[0].Result == RolloutRefused
	for _, s := range r.Sites {
		switch {
		case s.Result == RolloutFailed:
			return false
		case s.Result == RolloutSkipped && !canaryRefused:
			return false
		}
	}
	return true
}

// AfterCancelReads bounds the catalog reads a cancelled rollout still makes
// to report the sites it did not start.
const AfterCancelReads = 5 * time.Second

// Rollout promotes version of image to several sites: the canary first,
// alone and checked, then the others, Parallel at a time. One site's
// failure does not stop the others (the canary's stops everything). Each
// site is Promote: running the same rollout again finishes only what is
// missing, since a site that runs the version already is neither uploaded
// to nor recorded again. The error is for a rollout that could not start
// (no sites, an unknown canary, a site's key that does not load, a revoked
// version); sites' failures are in the result.
func Rollout(ctx context.Context, image, version string, o RolloutOptions) (*RolloutResult, error) {
	if len(o.Sites) == 0 {
		return nil, fmt.Errorf("rolling out %s %s: no sites", image, version)
	}
	// Each site's promotion refuses a revoked version too; this refuses
	// it once, before anything starts.
	revoked, err := revokedVersions(ctx, o.Store, image)
	if err != nil {
		return nil, fmt.Errorf("rolling out %s %s: %w", image, version, err)
	}
	if err := refuseRevoked(revoked, version); err != nil {
		return nil, fmt.Errorf("rolling out %s %s: %w", image, version, err)
	}
	var order []*sites.Site
	seen := map[string]bool{}
	for _, s := range o.Sites {
		if !seen[s.Name] {
			seen[s.Name] = true
			order = append(order, s)
		}
	}
	if o.Canary != "" {
		i := slices.IndexFunc(order, func(s *sites.Site) bool { return s.Name == o.Canary })
		if i < 0 {
			return nil, fmt.Errorf("rolling out %s %s: the canary %s is not one of the sites", image, version, o.Canary)
		}
		c := order[i]
		order = append([]*sites.Site{c}, slices.Delete(order, i, i+1)...)
	}
	if o.VerifierFor != nil {
		o.verifiers = map[string]*signing.Verifier{}
		for _, s := range order {
			v, err := o.VerifierFor(s)
			if err != nil {
				return nil, err
			}
			o.verifiers[s.Name] = v
		}
	}
	par := o.Parallel
	if par <= 0 {
		par = DefaultParallel
	}
	out := &RolloutResult{Image: image, Version: version, Canary: o.Canary, Sites: make([]SiteRollout, len(order))}
	// Once cancelled, the sites not started are still reported with the
	// version their catalog says they run, read within one short bound
	// for all of them, so that Ctrl-C returns promptly even when the
	// catalog is slow or unreachable.
	var afterCancel context.Context
	cancelAfter := func() {}
	defer func() { cancelAfter() }()
	readCtx := func() context.Context {
		if ctx.Err() == nil {
			return ctx
		}
		if afterCancel == nil {
			afterCancel, cancelAfter = context.WithTimeout(context.WithoutCancel(ctx), AfterCancelReads)
		}
		return afterCancel
	}
	rest := order
	if o.Canary != "" {
		out.Sites[0] = o.promoteSite(ctx, image, version, order[0], true)
		rest = order[1:]
		if r := out.Sites[0]; r.Result != RolloutOK && r.Result != RolloutAlready {
			why := "canary failed"
			switch {
			case r.Result == RolloutRefused && r.Policy != nil:
				why = "the canary's policy refused it"
			case r.Result == RolloutRefused:
				why = "not yet: some of the canary's racks could not be reached"
			}
			for i, s := range rest {
				out.Sites[i+1] = o.skipped(readCtx(), image, s, why)
			}
			return out, nil
		}
	}
	base := len(order) - len(rest)
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for i, s := range rest {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			out.Sites[base+i] = o.skipped(readCtx(), image, s, "not started: "+context.Cause(ctx).Error())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out.Sites[base+i] = o.promoteSite(ctx, image, version, s, false)
		}()
	}
	wg.Wait()
	return out, nil
}

// skipped is a site not attempted, with the version its catalog says it
// runs.
func (o RolloutOptions) skipped(ctx context.Context, image string, site *sites.Site, why string) SiteRollout {
	r := SiteRollout{Site: site.Name, Result: RolloutSkipped, Detail: why}
	if h, err := o.Store.History(ctx, site.Name, image); err == nil {
		r.Version, _ = store.State(h)
		r.Previous = r.Version
	}
	return r
}

// promoteSite promotes to one site and, for the canary, checks its status.
func (o RolloutOptions) promoteSite(ctx context.Context, image, version string, site *sites.Site, canary bool) SiteRollout {
	so := o.Options
	so.Site = site
	if o.SiteEvents != nil {
		so.Events = o.SiteEvents(site.Name)
	}
	r := SiteRollout{Site: site.Name}
	if v, ok := o.verifiers[site.Name]; ok {
		so.Verifier = v
	}
	if h, err := so.Store.History(ctx, site.Name, image); err == nil {
		r.Previous, _ = store.State(h)
		r.Version = r.Previous
	}
	res, err := Promote(ctx, image, version, so)
	r.Promotion = res
	if err == nil && canary {
		err = checkCanary(ctx, image, version, so)
	}
	var refused *PolicyError
	if errors.As(err, &refused) {
		r.Result, r.Err, r.Policy = RolloutRefused, err, refused.Verdict
		r.Detail = oneLine("not yet: " + strings.Join(refused.Verdict.Lines(), "\n"))
		return r
	}
	var unknownRacks *RacksError
	if errors.As(err, &unknownRacks) && unknownRacks.NotYet {
		r.Result, r.Err = RolloutRefused, err
		r.Detail = oneLine("not yet: " + err.Error())
		return r
	}
	if err != nil {
		r.Result, r.Err, r.Detail = RolloutFailed, err, oneLine(err.Error())
		if h, herr := so.Store.History(ctx, site.Name, image); herr == nil {
			r.Version, _ = store.State(h)
		}
		return r
	}
	r.Version = version
	r.Policy = res.Policy
	var detail []string
	switch {
	case res.AlreadyCurrent:
		r.Result = RolloutAlready
		detail = append(detail, "the site already ran it")
	default:
		r.Result = RolloutOK
	}
	switch {
	case res.Upload.Waited:
		detail = append(detail, "another upload completed "+res.Upload.Name)
	case res.Upload.Skipped:
		detail = append(detail, "MAAS already held "+res.Upload.Name)
	default:
		detail = append(detail, "uploaded as "+res.Upload.Name)
	}
	if res.ProfilePatch != nil {
		detail = append(detail, "no deploy_profile: point it at "+res.ProfileDistroSeries+" by hand")
	}
	switch {
	case res.Policy == nil:
	case res.Policy.Met:
		detail = append(detail, "policy met")
	default:
		detail = append(detail, "policy NOT met, overridden: "+so.Reason)
	}
	if canary {
		detail = append(detail, "canary checked")
	}
	for _, w := range res.Warnings {
		detail = append(detail, "warning: "+w)
	}
	r.Detail = oneLine(strings.Join(detail, "; "))
	return r
}

// errCanary is a canary whose status disagrees with its promotion.
var errCanary = errors.New("the canary's status disagrees with its promotion")

// checkCanary reads the site's status and requires, for the image, the
// version promoted, held complete with its sha256, and no drift.
func checkCanary(ctx context.Context, image, version string, o Options) error {
	st, err := Status(ctx, o)
	if err != nil {
		return fmt.Errorf("checking canary %s: %w", o.Site.Name, err)
	}
	for _, img := range st.Images {
		if img.Image != image {
			continue
		}
		var problems []string
		if img.Promoted != version {
			problems = append(problems, fmt.Sprintf("the catalog says it runs %q", img.Promoted))
		}
		held := false
		for _, h := range img.MAAS {
			held = held || h.Promoted && h.Complete && h.Matches
		}
		if !held {
			problems = append(problems, fmt.Sprintf("MAAS does not hold %s complete", img.Name))
		}
		for _, d := range img.Drift {
			problems = append(problems, d.Kind+": "+d.Message)
		}
		if len(problems) > 0 {
			return fmt.Errorf("%w at %s: %s", errCanary, o.Site.Name, strings.Join(problems, "; "))
		}
		return nil
	}
	return fmt.Errorf("%w at %s: its status shows no %s", errCanary, o.Site.Name, image)
}

// oneLine joins a multi-line message for a table cell.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}
