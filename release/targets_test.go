package release_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/upload/maassim"
)

const targetsHCL = `
site "a" {
  maas_url = "http://127.0.0.1:1/MAAS"
  api_key_env = "KEY"
}
site "b" {
  maas_url = "http://127.0.0.1:2/MAAS"
  api_key_env = "KEY"
}
site "c" {
  maas_url = "http://127.0.0.1:3/MAAS"
  api_key_env = "KEY"
}
group "ab" {
  sites = ["a", "b"]
}
`

// What --site (repeated, comma-separated, sites and groups) and --canary
// name: one site alone is a plain promotion; anything else a rollout,
// groups expanded, each site once, the canary first.
func TestResolveTargets(t *testing.T) {
	ss, diags := sites.Parse([]byte(targetsHCL), "sites.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, tc := range []struct {
		name   string
		names  []string
		canary string
		one    bool   // OneName
		want   string // Single, or the rollout's sites, canary first
		err    string
	}{
		{name: "one site", names: []string{"a"}, one: true, want: "single a"},
		{name: "an unknown site alone is looked up later", names: []string{"zz"}, one: true, want: "single zz"},
		{name: "a group alone", names: []string{"ab"}, one: true, want: "a b"},
		{name: "a list", names: []string{" b , a,"}, want: "b a"},
		{name: "repeated, with a group", names: []string{"c", "ab", "a"}, want: "c a b"},
		{name: "a canary", names: []string{"ab", "c"}, canary: "b", want: "canary b: b a c"},
		{name: "a canary alone", names: []string{"a"}, canary: "a", want: "canary a: a"},
		{name: "the canary a group", names: []string{"c"}, canary: "ab", err: "--canary ab is a group: the canary is one site"},
		{name: "unknown in a list", names: []string{"a,zz"}, err: "sites.hcl: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := release.OneName(tc.names, tc.canary); got != tc.one {
				t.Errorf("OneName = %v", got)
			}
			tg, err := release.ResolveTargets(ss, "sites.hcl", tc.names, tc.canary)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch {
			case tg.Single != "":
				got = "single " + tg.Single
			default:
				var names []string
				for _, s := range tg.Sites {
					names = append(names, s.Name)
				}
				got = strings.Join(names, " ")
				if tg.Canary != "" {
					got = "canary " + tg.Canary + ": " + got
				}
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Every site's key is loaded before anything is sent: one that does not
// load refuses the whole rollout.
func TestRolloutLoadsEveryKeyFirst(t *testing.T) {
	f := newFleet(t, 3, 0)
	errKey := errors.New("site02's verify_key does not load")
	var asked []string
	f.opts.VerifierFor = func(s *sites.Site) (*signing.Verifier, error) {
		asked = append(asked, s.Name)
		if s.Name == "site02" {
			return nil, errKey
		}
		return f.opts.Verifier, nil
	}
	res, err := release.Rollout(ctx, "demo", "1.0.0", f.opts)
	if !errors.Is(err, errKey) || res != nil || strings.Join(asked, " ") != "site00 site01 site02" {
		t.Fatalf("%+v %v, keys asked for %v", res, err, asked)
	}
	for n, sim := range f.sims {
		if c := sim.Count(maassim.OpList); c != 0 {
			t.Errorf("%s: MAAS was asked %d times", n, c)
		}
	}
	// With every key, each site gets its own.
	asked = nil
	f.opts.VerifierFor = func(s *sites.Site) (*signing.Verifier, error) {
		asked = append(asked, s.Name)
		return f.opts.Verifier, nil
	}
	if res, err = release.Rollout(ctx, "demo", "1.0.0", f.opts); err != nil || !res.OK() || len(asked) != 3 {
		t.Fatalf("%+v %v, keys asked for %v", res, err, asked)
	}
}
