package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/cache"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/profile"
	"github.com/gpuaas/imagectl/racks"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
)

// siteCmdFlags are the flags of the commands acting on a site (promote,
// rollback, status, gc).
type siteCmdFlags struct {
	sf     siteFlags
	vf     verifyFlags
	st     storeFlags
	output outputFlag
	by     string
	reason string
	base   string
	// A rollout's (promote to several sites).
	canary   string
	parallel int
	// promote's: promote although the site's policy is not met.
	override bool
	// promote's: check the racks first (racks.go), and let unknown ones by;
	// an explicit --warm-racks=false turns a site's warm_racks off.
	warmRacks         givenBool
	allowUnknownRacks bool
	racksParallel     int
	racksTimeout      time.Duration
	// gc's.
	keep int
	yes  bool
}

func (c *siteCmdFlags) register(cmd *cobra.Command, promoting bool) {
	c.sf.register(cmd)
	c.st.register(cmd)
	c.output.register(cmd)
	if promoting {
		c.vf.register(cmd)
		cmd.Flags().StringVar(&c.by, "by", "", "who promotes, for the history (default: $USER)")
		cmd.Flags().StringVar(&c.reason, "reason", "", "why, for the history")
		cmd.Flags().StringVar(&c.base, "base-image", "", "the <os>/<series> MAAS requires if the image is uploaded (default: the manifest's maas.base_image)")
	}
}

// options loads the site (and, when promoting, the verification key).
func (c *siteCmdFlags) options(ctx context.Context, s streams, env []string, promoting bool) (release.Options, error) {
	if err := c.output.check(); err != nil {
		return release.Options{}, err
	}
	site, err := c.sf.load(s, env)
	if err != nil {
		return release.Options{}, err
	}
	return c.siteOptions(ctx, s, env, site, promoting)
}

// siteOptions opens the store for a loaded site (and, when promoting,
// loads the verification key).
func (c *siteCmdFlags) siteOptions(ctx context.Context, s streams, env []string, site *sites.Site, promoting bool) (release.Options, error) {
	st, err := c.st.open(ctx, env)
	if err != nil {
		return release.Options{}, err
	}
	o := release.Options{Store: st, Site: site, Env: env, BaseImage: c.base, Reason: c.reason, By: c.by, InsecureSkipVerify: c.vf.insecure,
		Override: c.override, WarmRacks: c.warmRacks.v,
		NoWarmRacks: c.warmRacks.given && !c.warmRacks.v, AllowUnknownRacks: c.allowUnknownRacks}
	// Without a cache directory, the racks check hashes the store's tgz
	// every time.
	if dir, err := cachedir.Default(env); err == nil {
		o.Hashed = cache.Hashed(dir)
	}
	if promoting {
		if o.Verifier, err = c.vf.verifier(env, site); err != nil {
			return release.Options{}, err
		}
		o.Events = uploadEvents(s.err, false, isTerminal(s.err, env))
		// The racks check reports each rack as it lands, as warm-racks does.
		o.Racks.Parallel, o.Racks.Timeout = c.racksParallel, c.racksTimeout
		o.Racks.Progress = func(r racks.Rack) { textsafe.Fprintf(s.err, "%s: %s\n", r.Verdict, r.Detail) }
	}
	return o, nil
}

func newPromoteCmd(env []string) *cobra.Command {
	cmd, c := command(env, runPromote, &cobra.Command{
		Use:   "promote IMAGE VERSION --site SITE|GROUP [--site ...] [--canary SITE] [--parallel N] [--reason WHY]",
		Short: "Make a stored image version the one a MAAS site runs",
		Long: `Promote makes an image version from the store the one a site runs. The
version must verify (its tgz's and manifest's signatures, with --key,
$IMAGECTL_VERIFY_KEY or the site's verify_key; --insecure-skip-verify skips
that) and its deployability check must have found no unwaived error. It is
uploaded to the site's MAAS unless MAAS already holds it, and MAAS must
hold it complete. Then the site's deploy profiles (deploy_profile blocks
of the sites file) are pointed at it through the GPUaaS admin API: a PATCH
of their distro_series to the version's boot-resource name, with an
idempotency key. Last, the promotion (who, when, why, the previous version)
is appended to the site's history in the store. A failure before the
record records nothing: run the same command again once it is fixed.

Without a deploy_profile it prints the curl command that makes the PATCH,
for an operator to run. Promoting the current version again re-checks and
re-uploads it if MAAS lost it, points a deploy profile that drifted back
at it, and records nothing. When the store has channels (an OCI store's
IMAGE:site-SITE tags), the site's channel is pointed at the version after
the record; a failure there is a warning, the promotion stands.

With several --site (or --site GROUP, a group block of the sites file) it
rolls the version out: --canary SITE first, alone, checked against the
site's status (MAAS holds it complete, the deploy profiles select it),
then the other sites, --parallel at a time; a failed canary stops it, and
one site's failure does not stop the others. It prints a table (SITE,
RESULT ok/already/failed/skipped, VERSION, PREVIOUS, DETAIL), or with
--output json an array of sites, and exits 1 unless every site runs the
version. Running it again finishes only what is missing. Progress lines
on stderr start with the site's name.

A site's promotion policy (policy blocks of the site and of its groups in
the sites file: host evidence, soak, windows, freezes) is checked before
anything is sent to it. A promotion it refuses prints what is missing and
exits 3 ("not yet", where 1 is "broken"); in a rollout such a site is
"refused", the others go on, and the rollout exits 3 when every site that
does not run the version was refused. --override --reason WHY promotes
anyway and records the override, who and what was missing in the site's
history. Rollback is never gated.

With --warm-racks (or warm_racks = true in the site's block), once MAAS
holds the version complete and before any deploy profile is pointed, every
rack controller of the site must serve it (imagectl warm-racks, which also
warms their caches): a rack that fails stops the promotion with exit 1
unless --override --reason WHY (recorded with the promotion); one this host
cannot reach (unknown) stops it with exit 3 unless --allow-unknown-racks.
--warm-racks=false skips the check at a site with warm_racks = true.`,
		Example: `  imagectl promote gpuaas-h200-host-ubuntu2404 1.4.0 --site maas280 --key cosign.pub --reason "CUDA 12.8"
  imagectl promote gpuaas-h200-host-ubuntu2404 1.4.0 --site h200-fleet --canary maas280 --parallel 8 --key cosign.pub
  imagectl promote gpuaas-h200-host-ubuntu2404 1.4.1 --site h200-fleet --key cosign.pub --override --reason "CVE fix, approved by ops"`,
		Args: cobra.ExactArgs(2),
	})
	c.sf.multi = true
	c.register(cmd, true)
	cmd.Flags().StringVar(&c.canary, "canary", "", "with several sites: the site promoted and checked first; if it fails, no other is attempted")
	cmd.Flags().IntVar(&c.parallel, "parallel", release.DefaultParallel, "with several sites: how many are promoted at once")
	cmd.Flags().BoolVar(&c.override, "override", false, "promote although the site's promotion policy is not met or a rack failed the racks check (needs --reason; the history records it)")
	c.registerRacks(cmd)
	return cmd
}

// exitNotYet is promote's exit status when a site's promotion policy
// refuses the version: not yet, where 1 is broken.
const exitNotYet = 3

func runPromote(ctx context.Context, c *siteCmdFlags, args []string, s streams, env []string) error {
	if err := c.checkRacksFlags(); err != nil {
		return err
	}
	if c.override && strings.TrimSpace(c.reason) == "" {
		return errors.New("--override needs --reason WHY: the site's history records why its policy was overridden")
	}
	// A rollout's flags are checked before the sites file is read
	// when it names several sites; a group named alone is known to
	// be one only after.
	several := !release.OneName(c.sf.sites, c.canary)
	if several {
		if err := c.checkRollout(); err != nil {
			return err
		}
	}
	ss, path, err := c.sf.file(s, env)
	if err != nil {
		return err
	}
	t, err := release.ResolveTargets(ss, path, c.sf.sites, c.canary)
	if err != nil {
		return err
	}
	if t.Single != "" {
		c.sf.site = t.Single
		return c.promote(ctx, s, env, func(o release.Options) (*release.Result, error) {
			return release.Promote(ctx, args[0], args[1], o)
		})
	}
	if !several {
		if err := c.checkRollout(); err != nil {
			return err
		}
	}
	return c.rollout(ctx, s, env, args[0], args[1], t)
}

// checkRollout checks a rollout's flags.
func (c *siteCmdFlags) checkRollout() error {
	if err := c.output.check(); err != nil {
		return err
	}
	if c.parallel < 1 {
		return fmt.Errorf("--parallel %d: want 1 or more", c.parallel)
	}
	return nil
}

// rollout promotes to the sites of t and prints the table (or JSON); it
// fails with status 1 unless every site runs the version.
func (c *siteCmdFlags) rollout(ctx context.Context, s streams, env []string, image, version string, t *release.Targets) error {
	o, err := c.siteOptions(ctx, s, env, t.Sites[0], false)
	if err != nil {
		return err
	}
	lines := &lineWriter{w: s.err}
	ro := release.RolloutOptions{Options: o, Sites: t.Sites, Canary: t.Canary, Parallel: c.parallel,
		VerifierFor: func(site *sites.Site) (*signing.Verifier, error) { return c.vf.verifier(env, site) },
		SiteEvents: func(site string) func(event.Event) {
			// One line per event, each starting with the site: no bars,
			// which several sites would draw over one another.
			return uploadEvents(lines.prefixed(site), false, false)
		},
	}
	res, err := release.Rollout(ctx, image, version, ro)
	if err != nil {
		return err
	}
	if err := c.output.print(s.out, res.Sites, func(w io.Writer) error { return rolloutTable(w, res) }); err != nil {
		return err
	}
	if !res.OK() {
		if res.NotYet() {
			if !c.output.json() {
				textsafe.Fprintf(s.err, "imagectl: %d of %d sites do not run %s %s yet: their promotion policy refuses it, or racks could not be reached (see DETAIL); run the same command again once it is met, or --override --reason WHY (--allow-unknown-racks for racks)\n",
					res.Failed(), len(res.Sites), image, version)
			}
			return exitError{exitNotYet}
		}
		if !c.output.json() {
			textsafe.Fprintf(s.err, "imagectl: %d of %d sites do not run %s %s: run the same command again to finish them\n", res.Failed(), len(res.Sites), image, version)
		}
		return exitError{1}
	}
	return nil
}

// rolloutTable prints a rollout's sites as a table.
func rolloutTable(w io.Writer, res *release.RolloutResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tRESULT\tVERSION\tPREVIOUS\tDETAIL")
	for _, s := range res.Sites {
		textsafe.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Site, s.Result, dash(s.Version), dash(s.Previous), s.Detail)
	}
	return tw.Flush()
}

// lineWriter writes whole lines to w, one writer at a time, each prefixed
// with its site's name, so that sites' progress does not interleave
// mid-line.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) prefixed(site string) io.Writer { return &sitePrefix{l: l, site: site} }

type sitePrefix struct {
	l    *lineWriter
	site string
	buf  []byte
}

func (p *sitePrefix) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := p.buf[:i+1]
		p.l.mu.Lock()
		_, err := fmt.Fprintf(p.l.w, "%s: %s", p.site, bytes.TrimLeft(line, " "))
		p.l.mu.Unlock()
		p.buf = p.buf[i+1:]
		if err != nil {
			return len(b), err
		}
	}
}

// registerRacks adds promote's and rollback's racks flags.
func (c *siteCmdFlags) registerRacks(cmd *cobra.Command) {
	f := cmd.Flags().VarPF(&c.warmRacks, "warm-racks", "", "before pointing the deploy profiles, check that every rack controller serves the version, warming their caches (as imagectl warm-racks; a site's warm_racks = true does it unless --warm-racks=false)")
	f.NoOptDefVal = "true"
	cmd.Flags().IntVar(&c.racksParallel, "racks-parallel", 4, "with the racks check: how many racks are checked at once (warm-racks' --parallel)")
	cmd.Flags().DurationVar(&c.racksTimeout, "racks-timeout", 30*time.Minute, "with the racks check: bounds it (warm-racks' --timeout)")
	cmd.Flags().BoolVar(&c.allowUnknownRacks, "allow-unknown-racks", false, "with the racks check: go on although some racks could not be reached from here (unknown); a rack that fails still stops a promotion")
}

// checkRacksFlags checks the racks check's bounds.
func (c *siteCmdFlags) checkRacksFlags() error {
	if c.racksParallel < 1 {
		return fmt.Errorf("--racks-parallel %d: want 1 or more", c.racksParallel)
	}
	if c.racksTimeout <= 0 {
		return fmt.Errorf("--racks-timeout %v: want a positive duration", c.racksTimeout)
	}
	return nil
}

// givenBool is a bool flag that knows whether it was given, so that an
// explicit false can turn off what a site's setting turns on.
type givenBool struct{ v, given bool }

func (b *givenBool) String() string { return strconv.FormatBool(b.v) }
func (b *givenBool) Type() string   { return "bool" }
func (b *givenBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.v, b.given = v, true
	return nil
}

func newRollbackCmd(env []string) *cobra.Command {
	cmd, c := command(env, runRollback, &cobra.Command{
		Use:   "rollback IMAGE --site SITE [--reason WHY]",
		Short: "Return a site to the image version it ran before the current one",
		Long: `Rollback promotes the version a site ran before the current one, with the
same checks and upload as promote, and points the deploy profiles back at
it. Promotions stack: rolling back twice goes two versions back, not forth
and back. A rollback whose PATCH failed is not recorded: run it again.
--warm-racks (or the site's warm_racks, unless --warm-racks=false) checks
the racks as promote does, but a rollback is the safety valve: racks that
failed or could not be reached are warnings, and it goes on.`,
		Example: `  imagectl rollback gpuaas-h200-host-ubuntu2404 --site maas280 --reason "NCCL hangs on 1.4.0"`,
		Args:    cobra.ExactArgs(1),
	})
	c.register(cmd, true)
	c.registerRacks(cmd)
	return cmd
}

func runRollback(ctx context.Context, c *siteCmdFlags, args []string, s streams, env []string) error {
	if err := c.checkRacksFlags(); err != nil {
		return err
	}
	return c.promote(ctx, s, env, func(o release.Options) (*release.Result, error) {
		return release.Rollback(ctx, args[0], o)
	})
}

// promote makes a promotion (promote, rollback) with act, given the site's
// options, and prints it.
func (c *siteCmdFlags) promote(ctx context.Context, s streams, env []string, act func(release.Options) (*release.Result, error)) error {
	o, err := c.options(ctx, s, env, true)
	if err != nil {
		return err
	}
	res, err := act(o)
	var racksErr *release.RacksError
	if errors.As(err, &racksErr) {
		if c.output.json() {
			if perr := c.output.print(s.out, racksErr.Report, nil); perr != nil {
				return perr
			}
		}
		code := 1
		if racksErr.NotYet {
			code = exitNotYet
		}
		return failWith(s.err, code, err)
	}
	var refused *release.PolicyError
	if errors.As(err, &refused) {
		// Not yet: the verdict as JSON for CI, the lines on stderr.
		if c.output.json() {
			if perr := c.output.print(s.out, refused.Verdict, nil); perr != nil {
				return perr
			}
		}
		return failWith(s.err, exitNotYet, err)
	}
	if err != nil {
		return err
	}
	return c.output.print(s.out, res, func(w io.Writer) error { return promotionText(w, res) })
}

func promotionText(w io.Writer, res *release.Result) error {
	up := "uploaded as " + res.Upload.Name
	if res.Upload.Skipped {
		up = "MAAS already held it as " + res.Upload.Name
	}
	switch p := res.Promotion; {
	case p == nil:
		textsafe.Fprintf(w, "site %s already runs %s %s (%s)\n", res.Site, res.Image, res.Version, up)
	case p.Rollback:
		textsafe.Fprintf(w, "rolled %s at site %s back from %s to %s (%s)\n", res.Image, res.Site, p.Previous, p.Version, up)
	case p.Previous == "":
		textsafe.Fprintf(w, "promoted %s %s to site %s (%s)\n", res.Image, res.Version, res.Site, up)
	default:
		textsafe.Fprintf(w, "promoted %s %s to site %s, replacing %s (%s)\n", res.Image, res.Version, res.Site, p.Previous, up)
	}
	if !res.Verified {
		fmt.Fprintln(w, "warning: not verified (--insecure-skip-verify)")
	}
	for _, warn := range res.Warnings {
		textsafe.Fprintf(w, "warning: %s\n", warn)
	}
	switch v := res.Policy; {
	case v == nil:
	case v.Met:
		fmt.Fprintln(w, "promotion policy: met")
	default:
		textsafe.Fprintf(w, "promotion policy: NOT met, overridden (recorded): %s\n", res.Promotion.Gate.Override)
		for _, l := range v.Lines() {
			textsafe.Fprintf(w, "  missing: %s\n", l)
		}
	}
	if rep := res.Racks; rep != nil {
		for _, r := range rep.Racks {
			textsafe.Fprintf(w, "rack %s: %s (%s)\n", r.Hostname, r.Verdict, r.Detail)
		}
	}
	if res.RacksOverride != "" {
		textsafe.Fprintf(w, "racks: NOT every rack passed, overridden (recorded): %s\n", res.RacksOverride)
	}
	textsafe.Fprintf(w, "distro_series: %s\n", res.DistroSeries)
	for _, p := range res.Profiles {
		switch p.Outcome {
		case profile.Unchanged:
			textsafe.Fprintf(w, "deploy profile %s of admin site %s already selects %s\n", p.ProfileID, p.SiteID, p.DistroSeries)
		case profile.Confirmed:
			textsafe.Fprintf(w, "deploy profile %s of admin site %s: %s -> %s (the PATCH got no answer; reading the profile back confirmed it)\n",
				p.ProfileID, p.SiteID, p.Previous, p.DistroSeries)
		default:
			textsafe.Fprintf(w, "deploy profile %s of admin site %s: %s -> %s\n", p.ProfileID, p.SiteID, p.Previous, p.DistroSeries)
		}
	}
	if r := res.ProfilePatch; r != nil {
		fmt.Fprintf(w, "no deploy_profile for %s at site %s in the sites file: point the site's deploy profile at %s with\n%s\n",
			res.Image, res.Site, res.ProfileDistroSeries, r.Curl)
	}
	return nil
}

func newStatusCmd(env []string) *cobra.Command {
	cmd, c := command(env, runStatus, &cobra.Command{
		Use:   "status --site SITE",
		Short: "What a site runs, what its MAAS holds, and any drift between them",
		Long: `Status shows, per image, the version promoted to the site, the versioned
boot resources of the store's images its MAAS holds (by sha256, complete or
not), what the site's deploy profiles (sites file) select, and drift: the
promoted version missing from MAAS or incomplete, MAAS holding other bytes
under a version's name, versioned resources the store does not know, a
deploy profile that selects something else than the promoted version, and
a revoked version (imagectl revoke) that the site runs or a deploy profile
selects, with the revocation's who, when and why. When the promotion of
rack controllers were checked serving the version the site runs (imagectl
warm-racks, or promote or rollback with --warm-racks), it lists each rack's
latest verdict and when. It exits 1 when
anything drifted or is revoked.`,
		Args: cobra.NoArgs,
	})
	c.register(cmd, false)
	return cmd
}

func runStatus(ctx context.Context, c *siteCmdFlags, _ []string, s streams, env []string) error {
	o, err := c.options(ctx, s, env, false)
	if err != nil {
		return err
	}
	st, err := release.Status(ctx, o)
	if err != nil {
		return err
	}
	err = c.output.print(s.out, st, func(w io.Writer) error { return statusText(w, st) })
	if err == nil && st.Drift {
		return exitError{1}
	}
	return err
}

func statusText(w io.Writer, st *release.SiteStatus) error {
	if len(st.Images) == 0 {
		textsafe.Fprintf(w, "site %s: nothing promoted, and MAAS holds no version of the store's images\n", st.Site)
	}
	for _, img := range st.Images {
		if img.Promoted != "" {
			textsafe.Fprintf(w, "%s: %s promoted by %s at %s, distro_series %s\n", img.Image, img.Promoted, img.PromotedBy,
				img.PromotedAt.Format(time.RFC3339), img.DistroSeries)
		} else {
			textsafe.Fprintf(w, "%s: not promoted at site %s\n", img.Image, st.Site)
		}
		for _, r := range img.Racks {
			textsafe.Fprintf(w, "  rack %s: %s at %s (%s's racks check)\n", r.Rack, r.Verdict, r.At.Format(time.RFC3339), dash(r.Via))
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, h := range img.MAAS {
			state := "complete"
			if !h.Complete {
				state = "incomplete"
			}
			match := "matches the store"
			if !h.Matches {
				match = "NOT the store's"
			}
			if h.Revoked {
				match += ", REVOKED"
			}
			mark := " "
			if h.Promoted {
				mark = "*"
			}
			textsafe.Fprintf(tw, "  %s %s\t#%d\t%s\tsha256 %.12s\t%s\n", mark, h.Name, h.ID, state, h.SHA256, match)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, d := range img.Drift {
			textsafe.Fprintf(w, "  drift: %s: %s\n", d.Kind, d.Message)
		}
	}
	for _, p := range st.Profiles {
		sel := p.DistroSeries
		if p.Version != "" {
			sel += fmt.Sprintf(" (%s %s)", p.Image, p.Version)
		}
		mark := ""
		if p.Drift {
			mark = fmt.Sprintf(", NOT %s", p.Want)
		}
		textsafe.Fprintf(w, "deploy profile %s of admin site %s selects %s%s\n", p.ProfileID, p.SiteID, sel, mark)
	}
	return nil
}

type historyFlags struct {
	list listFlags
	site string
}

func newHistoryCmd(env []string) *cobra.Command {
	cmd, f := command(env, runHistory, &cobra.Command{
		Use:   "history IMAGE --site SITE",
		Short: "An image's promotions and rollbacks at a site",
		Args:  cobra.ExactArgs(1),
	})
	f.list.store.register(cmd)
	cmd.Flags().StringVar(&f.site, "site", "", "the site")
	f.list.output.register(cmd)
	_ = cmd.MarkFlagRequired("site")
	return cmd
}

func runHistory(ctx context.Context, f *historyFlags, args []string, s streams, env []string) error {
	st, err := f.list.open(ctx, env)
	if err != nil {
		return err
	}
	h, err := st.History(ctx, f.site, args[0])
	if err != nil {
		return err
	}
	return f.list.output.print(s.out, h, func(w io.Writer) error {
		cur, _ := store.State(h)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WHEN\tVERSION\tPREVIOUS\tBY\tREASON\tPOLICY")
		var overrides []store.Promotion
		for _, p := range h {
			v := p.Version
			if p.Rollback {
				v += " (rollback)"
			}
			textsafe.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.At.Format(time.RFC3339), v, dash(p.Previous), p.By, p.Reason, gateText(p.Gate))
			if p.Gate != nil && !p.Gate.Met {
				overrides = append(overrides, p)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, p := range overrides {
			textsafe.Fprintf(w, "%s %s: the promotion policy was overridden by %s (%s); it lacked:\n", p.At.Format(time.RFC3339), p.Version, p.By, p.Gate.Override)
			for _, l := range p.Gate.Missing {
				textsafe.Fprintf(w, "  %s\n", l)
			}
		}
		if cur != "" {
			textsafe.Fprintf(w, "site %s runs %s %s\n", f.site, args[0], cur)
		}
		return nil
	})
}

// gateText is a promotion's gate in a table cell.
func gateText(g *store.Gate) string {
	switch {
	case g == nil:
		return "-"
	case g.Met:
		return "met"
	}
	return "overridden"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newGCCmd(env []string) *cobra.Command {
	cmd, c := command(env, runGC, &cobra.Command{
		Use:   "gc --site SITE --keep N [--yes]",
		Short: "Delete old versioned boot resources of the store's images from a site's MAAS",
		Long: `Gc deletes from the site's MAAS the versioned boot resources of the store's
images that are neither the version promoted there, nor the version a
rollback would promote, nor selected by one of the site's deploy profiles,
nor among the N newest versions of the image MAAS holds (newest as
published to the store). A deploy profile it cannot read stops it before
anything is deleted. Resources whose name is no version in the store are
left alone. It only says what it would delete unless --yes.`,
		Args: cobra.NoArgs,
	})
	c.register(cmd, false)
	cmd.Flags().IntVar(&c.keep, "keep", 0, "keep the N newest versions of each image MAAS holds (the promoted one is always kept)")
	cmd.Flags().BoolVar(&c.yes, "yes", false, "delete (without it, gc only says what it would delete)")
	_ = cmd.MarkFlagRequired("keep")
	return cmd
}

// runGC prints what gc deleted (or would), and what it kept and why, even
// when it stopped part way.
func runGC(ctx context.Context, c *siteCmdFlags, _ []string, s streams, env []string) error {
	o, err := c.options(ctx, s, env, false)
	if err != nil {
		return err
	}
	res, err := release.GC(ctx, c.keep, c.yes, o)
	if res == nil {
		return err
	}
	if werr := c.output.print(s.out, res, func(w io.Writer) error { gcText(w, res, c.yes); return nil }); werr != nil {
		return werr
	}
	return err
}

func gcText(w io.Writer, res *release.GCResult, yes bool) {
	verb := "would delete"
	if yes {
		verb = "deleted"
	}
	for _, h := range res.Delete {
		textsafe.Fprintf(w, "%s %s (boot resource %d, %s %s)\n", verb, h.Name, h.ID, h.Image, h.Version)
	}
	for _, k := range res.Kept {
		textsafe.Fprintf(w, "kept %s (boot resource %d): %s\n", k.Name, k.ID, k.Why)
	}
	if !yes && len(res.Delete) > 0 {
		fmt.Fprintln(w, "dry run: --yes deletes them")
	}
}
