package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/racks"
	"github.com/gpuaas/imagectl/release"
)

// warm-racks is named as promote's --warm-racks is: one word for the
// check, whether it runs alone or within a promotion.
type warmRacksFlags struct {
	site     siteCmdFlags
	parallel int
	timeout  time.Duration
}

func newWarmRacksCmd(env []string) *cobra.Command {
	cmd, f := command(env, runWarmRacks, &cobra.Command{
		Use:   "warm-racks IMAGE VERSION --site SITE [--parallel N] [--timeout D] [--output json]",
		Short: "Prove that every rack controller of a site serves a version, warming their caches",
		Long: `Warm-racks checks that every rack controller of the site's MAAS serves the
stored version's root image to deploying machines, and so fills their
caches before a mass deploy. For each rack it reads the addresses machines
use (where it serves DHCP) and its services from the MAAS API, then fetches
the image through the rack's port 5248 as curtin will: one plain GET, no
Range, read to the end and checked against the version's sha256 and size
(compared with the store's tgz when it is on this disk; else compared with
the racks' own bytes, kept once in the cache directory and hashed once;
else hashed). On MAAS 3.4 it first makes the rack
import the image (racks hold their own copies there). Racks are checked
--parallel at a time, one fetch per rack, within --timeout.

A rack passes only when it served the version's exact bytes; it fails
when it served other bytes (naming the digest it served and the one
wanted), answered an error (502 and 504: it cannot reach a region; 503:
its agent is down), or a service it needs is not running; it is unknown
when this host cannot reach it, which is never a pass. It prints a line per
rack (verdict, cache hit or miss, bytes, time, throughput) and exits 0 when
every rack passed, 1 when one failed, and 3 ("not yet") when none failed
but some are unknown. Each rack's verdict is recorded in the store's
catalog as the site's rack proofs of the version, which status and
predeploy read. promote --warm-racks runs the same check before the
deploy profiles are pointed (docs/racks.md).`,
		Example: `  imagectl warm-racks gpuaas-h200-host-ubuntu2404 1.4.0 --site maas280
  imagectl warm-racks gpuaas-h200-host-ubuntu2404 1.4.0 --site maas280 --parallel 8 --timeout 1h -o json`,
		Args: cobra.ExactArgs(2),
	})
	f.site.register(cmd, false)
	cmd.Flags().IntVar(&f.parallel, "parallel", 4, "how many racks are checked at once (each gets one fetch at a time)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Minute, "bounds the whole check: a rack still serving by then fails, one not reached or not started is unknown")
	return cmd
}

func runWarmRacks(ctx context.Context, f *warmRacksFlags, args []string, s streams, env []string) error {
	if f.parallel < 1 {
		return fmt.Errorf("--parallel %d: want 1 or more", f.parallel)
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration", f.timeout)
	}
	o, err := f.site.options(ctx, s, env, false)
	if err != nil {
		return err
	}
	o.Racks.Parallel, o.Racks.Timeout = f.parallel, f.timeout
	o.Racks.Progress = func(r racks.Rack) { textsafe.Fprintf(s.err, "%s: %s\n", r.Verdict, r.Detail) }
	res, err := release.WarmRacks(ctx, args[0], args[1], o)
	if err != nil {
		return err
	}
	if err := f.site.output.print(s.out, res, func(w io.Writer) error { return racksText(w, res.Report) }); err != nil {
		return err
	}
	switch res.Verdict {
	case racks.Failed:
		return exitError{1}
	case racks.Unknown:
		if !f.site.output.json() {
			textsafe.Fprintf(s.err, "imagectl: no rack failed, but not every rack of site %s could be reached from here: unknown is not passed\n", res.Site)
		}
		return exitError{exitNotYet}
	}
	return nil
}

// racksText prints a racks report: a line per rack, then the verdict.
func racksText(w io.Writer, rep *racks.Report) error {
	how := ""
	switch {
	case rep.LocalCopyHashedBefore:
		how = " (each rack's bytes compared with the store's tgz, unchanged since an earlier check hashed it)"
	case rep.ComparedWithLocalCopy:
		how = " (each rack's bytes compared with the store's tgz)"
	case rep.ComparedWithEachOther:
		how = " (the racks' bytes hashed once, each rack's compared with them)"
	}
	textsafe.Fprintf(w, "%s (sha256 %s, %d bytes) on MAAS %s: %s%s\n", rep.Name, rep.SHA256, rep.Size, rep.MAASVersion, rep.Path, how)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// TIME includes HELD: how long the check held the rack's stream back
	// for a slower rack (racks.Rack.Held).
	fmt.Fprintln(tw, "RACK\tVERDICT\tCACHE\tBYTES\tTIME\tHELD\tMB/S\tDETAIL")
	for _, r := range rep.Racks {
		mbps := "-"
		if r.BytesPerSecond > 0 {
			mbps = fmt.Sprintf("%.1f", r.BytesPerSecond/1e6)
		}
		held := "-"
		if r.Held > 0 {
			held = r.Held.Round(time.Millisecond).String()
		}
		textsafe.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Hostname, r.Verdict, dash(r.Cache), r.Bytes,
			r.Duration.Round(time.Millisecond), held, mbps, r.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	textsafe.Fprintf(w, "racks: %s\n", rep.Verdict)
	return nil
}
