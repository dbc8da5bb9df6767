package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/hostcheck"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/validate"
)

// hostcheckFlags are hostcheck's flags.
type hostcheckFlags struct {
	sf         siteFlags
	st         storeFlags
	output     outputFlag
	image      string
	profile    string
	stage      string
	user       string
	sshOptions []string
	parallel   int
	timeout    time.Duration
	by         string
}

func newHostcheckCmd(env []string) *cobra.Command {
	cmd, f := command(env, runHostcheck, &cobra.Command{
		Use:   "hostcheck HOST... --site SITE [--image IMAGE] [--profile P] [--stage S] [--user U] [--ssh-option KEY=VALUE]",
		Short: "Run the image's validation script on deployed hosts over ssh and record the results as evidence",
		Long: `Hostcheck runs the validation script baked into the image (the path its
manifest names) on each HOST over your OpenSSH client, as
"sudo -n sh SCRIPT --json --profile P --stage S" (without sudo as root),
--parallel hosts at a time. ssh runs with BatchMode=yes and a 10 s
ConnectTimeout; your ~/.ssh/config applies, and --ssh-option KEY=VALUE
passes -o options (they win over the ConnectTimeout; host keys are checked
as your config says). The image is --image, else the one image the site's
catalog says the site runs; the script's path comes from the manifest of
the version the site runs, else the store's latest.

It prints each host's outcome, with the failing checks and their
remediations, and records every result that is for a version the store
holds and ran that version's validation script (see "imagectl evidence
add") as evidence at the site, all in one update of the catalog. A host
that could not be reached, or whose output is not a validation result, is
reported and not recorded. It exits 0 when every host passed and was
recorded, 1 otherwise.`,
		Example: `  imagectl hostcheck gpu-node-01 gpu-node-02 --site maas280 --stage converged
  imagectl hostcheck 10.0.4.17 --site maas280 --image gpuaas-h200-host-ubuntu2404 --profile slice --ssh-option ProxyJump=bastion`,
		Args: cobra.MinimumNArgs(1),
	})
	f.sf.register(cmd)
	f.st.register(cmd)
	f.output.register(cmd)
	cmd.Flags().StringVar(&f.image, "image", "", "the image whose validation script runs (default: the one image the site runs)")
	cmd.Flags().StringVar(&f.profile, "profile", "", "the profile checked: bare-metal or slice (default: the script's)")
	cmd.Flags().StringVar(&f.stage, "stage", "", "the stage checked: image or converged (default: the script's)")
	cmd.Flags().StringVar(&f.user, "user", hostcheck.DefaultUser, "the login on the hosts (not root: the script runs with sudo -n)")
	cmd.Flags().StringArrayVar(&f.sshOptions, "ssh-option", nil, "an ssh -o option KEY=VALUE; repeat it for several")
	cmd.Flags().IntVar(&f.parallel, "parallel", hostcheck.DefaultParallel, "how many hosts are checked at once")
	cmd.Flags().DurationVar(&f.timeout, "timeout", hostcheck.DefaultTimeout, "how long one host's check may take")
	cmd.Flags().StringVar(&f.by, "by", "", "who records the results (default: $USER)")
	return cmd
}

func runHostcheck(ctx context.Context, f *hostcheckFlags, args []string, s streams, env []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	if f.parallel < 1 {
		return fmt.Errorf("--parallel %d: want 1 or more", f.parallel)
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s: want more than 0", f.timeout)
	}
	site, err := f.sf.load(s, env)
	if err != nil {
		return err
	}
	st, err := f.st.open(ctx, env)
	if err != nil {
		return err
	}
	check := hostcheck.Options{Profile: f.profile, Stage: f.stage, User: f.user, SSHOptions: f.sshOptions,
		Parallel: f.parallel, Timeout: f.timeout, Env: env}
	if !f.output.json() {
		// One line on stderr as each host ends: a fleet takes a while.
		var mu sync.Mutex
		done := 0
		check.Done = func(r hostcheck.HostResult) {
			mu.Lock()
			defer mu.Unlock()
			done++
			state := "no result"
			if r.Result != nil {
				state = "result read"
			}
			textsafe.Fprintf(s.err, "hostcheck: %s: %s (%d of %d)\n", r.Host, state, done, len(args))
		}
	}
	res, err := release.Hostcheck(ctx, args, f.image, check, release.Options{Store: st, Site: site, Env: env, By: f.by})
	if err != nil {
		return err
	}
	if err := f.output.print(s.out, res, func(w io.Writer) error { return hostcheckText(w, res) }); err != nil {
		return err
	}
	if !res.OK() {
		return exitError{1}
	}
	return nil
}

func hostcheckText(w io.Writer, res *release.HostcheckResult) error {
	for _, h := range res.Hosts {
		if h.Result == nil {
			textsafe.Fprintf(w, "%s: NOT CHECKED: %s\n", h.Host, h.Error)
			continue
		}
		recorded := "recorded"
		if !h.Recorded {
			recorded = "NOT recorded: " + h.Refused
		}
		textsafe.Fprintf(w, "%s: %s\n", h.Host, resultLine(h.Result, recorded))
		failing(w, h.Result, "  ")
	}
	textsafe.Fprintf(w, "recorded %d of %d hosts' results at site %s (%s %s's script %s)\n",
		res.Recorded, len(res.Hosts), res.Site, res.Target.Image, res.Target.Version, res.Target.Script)
	return nil
}

// resultLine sums a result up on one line: pass or fail, what ran, the
// counts, and a note.
func resultLine(r *validate.Result, note string) string {
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s %s %s, %s at stage %s, host %s: %d checks, %d failed, %d warnings (%s)",
		verdict, r.Image, r.Version, r.Profile, r.Stage, r.Host, r.Counts.Checks, r.Counts.Failures, r.Counts.Warnings, note)
}

// failing prints a result's failing checks with their remediations.
func failing(w io.Writer, r *validate.Result, indent string) {
	for _, c := range r.Failing() {
		textsafe.Fprintf(w, "%sFAIL %s: %s\n", indent, c.Name, c.Detail)
		if c.Remediation != "" {
			textsafe.Fprintf(w, "%s     fix: %s\n", indent, c.Remediation)
		}
	}
}
