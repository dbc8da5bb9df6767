package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/validate"
)

// evidenceFlags are the flags of evidence (the list) and evidence add.
type evidenceFlags struct {
	sf     siteFlags
	st     storeFlags
	output outputFlag
	by     string
}

func newEvidenceCmd(env []string) *cobra.Command {
	cmd, f := command(env, runEvidence, &cobra.Command{
		Use:   "evidence IMAGE VERSION [--site SITE]",
		Short: "The host results recorded for an image version, per site",
		Long: `Evidence lists the validation results recorded for an image version
(by "imagectl hostcheck" or "imagectl evidence add"): per site, each
result's host, profile and stage, pass or fail, when the script ran, who
recorded it and how, and the failing checks with their remediations.
Without --site it lists every site of the sites file.`,
		Example: `  imagectl evidence gpuaas-h200-host-ubuntu2404 1.4.0 --site maas280
  imagectl evidence gpuaas-h200-host-ubuntu2404 1.4.0 -o json`,
		Args: cobra.ExactArgs(2),
	})
	cmd.Flags().StringVar(&f.sf.site, "site", "", "the site (default: every site of the sites file)")
	cmd.Flags().StringVar(&f.sf.sitesFile, "sites", "", "the sites file (default: $IMAGECTL_SITES, else ./sites.hcl)")
	f.st.register(cmd)
	f.output.register(cmd)
	cmd.AddCommand(newEvidenceAddCmd(env), newEvidenceAddComparisonCmd(env))
	return cmd
}

func runEvidence(ctx context.Context, f *evidenceFlags, args []string, s streams, env []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	names := []string{f.sf.site}
	if f.sf.site == "" {
		ss, _, err := f.sf.file(s, env)
		if err != nil {
			return err
		}
		names = names[:0]
		for _, site := range ss.Sites {
			names = append(names, site.Name)
		}
	}
	st, err := f.st.open(ctx, env)
	if err != nil {
		return err
	}
	evs, err := release.EvidenceAt(ctx, st, names, args[0], args[1])
	if err != nil {
		return err
	}
	return f.output.print(s.out, evs, func(w io.Writer) error { return evidenceText(w, args[0], args[1], evs) })
}

func evidenceText(w io.Writer, image, version string, evs []release.SiteEvidence) error {
	for _, se := range evs {
		if len(se.Evidence) == 0 {
			textsafe.Fprintf(w, "site %s: no results for %s %s\n", se.Site, image, version)
			continue
		}
		passed := 0
		for _, e := range se.Evidence {
			if e.Result.Passed() {
				passed++
			}
		}
		textsafe.Fprintf(w, "site %s: %d results for %s %s, %d passed\n", se.Site, len(se.Evidence), image, version, passed)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  HOST\tPROFILE\tSTAGE\tRESULT\tRAN\tRECORDED BY")
		for _, e := range se.Evidence {
			r := e.Result
			verdict := "PASS"
			if !r.Passed() {
				verdict = fmt.Sprintf("FAIL (%d)", r.Counts.Failures)
			}
			textsafe.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s (%s)\n", r.Host, r.Profile, r.Stage, verdict, r.Finished.UTC().Format(time.RFC3339), e.RecordedBy, e.Via)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, e := range se.Evidence {
			if !e.Result.Passed() {
				textsafe.Fprintf(w, "  %s at %s:\n", e.Result.Host, e.Result.Finished.UTC().Format(time.RFC3339))
				failing(w, &e.Result, "    ")
			}
		}
	}
	return nil
}

func newEvidenceAddCmd(env []string) *cobra.Command {
	cmd, f := command(env, runEvidenceAdd, &cobra.Command{
		Use:   "add RESULT.json... --site SITE",
		Short: "Record validation results gathered another way as evidence at a site",
		Long: `Evidence add records validation results (the documents the validation
script writes with --json, and keeps under ` + validate.StateDir + ` on a
host) that were gathered another way (a deploy's user-data, an
operator's pipeline) as evidence at a site of the sites file, all in one
update of the catalog; "-" reads one from standard input. A result is
refused, saying why, when it is not a whole validation result (or larger
than ` + readlimit.Size(validate.MaxResult) + `), is not for a version the
store holds, its script_sha256 is not the sha256 of that version's
validation script, or its profile or stage is not one the version's
manifest knows; the others are recorded. It exits 1 when any was refused.`,
		Example: `  imagectl evidence add node-01.json node-02.json --site maas280
  ssh ubuntu@node-03 cat ` + validate.StateDir + `/result.json | imagectl evidence add - --site maas280`,
		Args: cobra.MinimumNArgs(1),
	})
	f.sf.register(cmd)
	f.st.register(cmd)
	f.output.register(cmd)
	cmd.Flags().StringVar(&f.by, "by", "", "who records the results (default: $USER)")
	return cmd
}

func runEvidenceAdd(ctx context.Context, f *evidenceFlags, args []string, s streams, env []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	site, err := f.sf.load(s, env)
	if err != nil {
		return err
	}
	offered := make([]release.Offered, len(args))
	stdinRead := false
	for i, path := range args {
		offered[i].From = path
		var b []byte
		var err error
		if path == "-" {
			if stdinRead {
				offered[i].Problem = "standard input was read already"
				continue
			}
			stdinRead = true
			offered[i].From = "standard input"
			b, err = readStdin(ctx, s.in)
		} else {
			b, err = readlimit.File(path, validate.MaxResult)
		}
		if err == nil {
			offered[i].Result, err = validate.ParseResult(b)
		}
		if err != nil {
			offered[i].Problem = err.Error()
		}
	}
	st, err := f.st.open(ctx, env)
	if err != nil {
		return err
	}
	rec, err := release.Record(ctx, offered, release.ViaAdd, release.Options{Store: st, Site: site, Env: env, By: f.by})
	if err != nil {
		return err
	}
	if err := f.output.print(s.out, rec, func(w io.Writer) error { return recordedText(w, rec) }); err != nil {
		return err
	}
	if len(rec.Refused) > 0 {
		return exitError{1}
	}
	return nil
}

// readStdin reads one result from standard input, within the bound.
func readStdin(ctx context.Context, in io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(readlimit.WithContext(ctx, in), validate.MaxResult+1))
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	if len(b) > validate.MaxResult {
		return nil, fmt.Errorf("standard input holds more than the %s a validation result may have", readlimit.Size(validate.MaxResult))
	}
	return b, nil
}

func recordedText(w io.Writer, rec *release.Recorded) error {
	for _, e := range rec.Recorded {
		textsafe.Fprintf(w, "recorded %s\n", resultLine(&e.Result, "at site "+rec.Site))
		failing(w, &e.Result, "  ")
	}
	for _, r := range rec.Refused {
		textsafe.Fprintf(w, "refused %s: %s\n", r.From, r.Reason)
	}
	textsafe.Fprintf(w, "recorded %d of %d results at site %s\n", len(rec.Recorded), len(rec.Recorded)+len(rec.Refused), rec.Site)
	return nil
}
