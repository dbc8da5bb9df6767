package release

import (
	"context"

	"github.com/gpuaas/imagectl/hostcheck"
	"github.com/gpuaas/imagectl/validate"
)

// HostcheckResult is what a hostcheck found and recorded at a site.
type HostcheckResult struct {
	Site   string           `json:"site"`
	Target CheckTarget      `json:"target"`
	Hosts  []HostcheckEntry `json:"hosts"`
	// Recorded is how many results were recorded (in one update).
	Recorded int `json:"recorded"`
}

// HostcheckEntry is one host's outcome: its result and whether it was
// recorded, or why it could not be checked.
type HostcheckEntry struct {
	Host   string           `json:"host"`
	Result *validate.Result `json:"result,omitempty"`
	// Error says why the host gave no result (unreachable, ssh or sudo
	// refused, output that is not a result); nothing is recorded then.
	Error string `json:"error,omitempty"`
	// Recorded is set when the result was recorded as evidence; Refused
	// says why it was not.
	Recorded bool   `json:"recorded"`
	Refused  string `json:"refused,omitempty"`
}

// OK is whether every host passed and its result was recorded.
func (r *HostcheckResult) OK() bool {
	for _, h := range r.Hosts {
		if !h.Recorded || !h.Result.Passed() {
			return false
		}
	}
	return true
}

// Hostcheck runs the validation script of image (HostcheckTarget: "" for
// the one the site runs) on hosts over ssh (hostcheck.Check, with check's
// options; its Script is the manifest's) and records every result Record
// accepts, in one update, as evidence at o.Site, via ViaHostcheck.
func Hostcheck(ctx context.Context, hosts []string, image string, check hostcheck.Options, o Options) (*HostcheckResult, error) {
	// The hosts and options are refused before the store is read.
	check.Script = ""
	if err := hostcheck.CheckOptions(hosts, check); err != nil {
		return nil, err
	}
	t, err := HostcheckTarget(ctx, image, o)
	if err != nil {
		return nil, err
	}
	check.Script = t.Script
	found, err := hostcheck.Check(ctx, hosts, check)
	if err != nil {
		return nil, err
	}
	res := &HostcheckResult{Site: o.Site.Name, Target: *t, Hosts: make([]HostcheckEntry, len(found))}
	var offered []Offered
	var at []int
	for i, f := range found {
		res.Hosts[i] = HostcheckEntry{Host: f.Host, Result: f.Result, Error: f.Error}
		if f.Result != nil {
			offered = append(offered, Offered{From: f.Host, Result: f.Result})
			at = append(at, i)
		}
	}
	if len(offered) == 0 {
		return res, nil
	}
	rec, err := Record(ctx, offered, ViaHostcheck, o)
	if err != nil {
		return nil, err
	}
	for _, i := range at {
		res.Hosts[i].Recorded = true
	}
	for _, ref := range rec.Refused {
		h := &res.Hosts[at[ref.Index]]
		h.Recorded, h.Refused = false, ref.Reason
	}
	res.Recorded = len(rec.Recorded)
	return res, nil
}
