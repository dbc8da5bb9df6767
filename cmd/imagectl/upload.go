package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/recipes"
	"github.com/gpuaas/imagectl/upload"
	"github.com/gpuaas/imagectl/upload/maas"
)

// verifyArtifact checks a tgz's signature before it is uploaded; nil
// checks nothing beyond the manifest's sha256 and size.
var verifyArtifact func(ctx context.Context, tgz, manifest string) error

func newUploadCmd(env []string) *cobra.Command {
	var (
		site, sitesFile, manifestPath, name, baseImage, output string
	)
	cmd := &cobra.Command{
		Use:   "upload ARTIFACT.tgz --site SITE",
		Short: "Upload a built image to a MAAS site as a custom boot resource",
		Long: `Upload sends a built tgz to a MAAS site from the sites file, under the
immutable versioned name <name>-<version> with the version in its title, and
prints the distro_series a deploy uses to select it.

Before sending a byte it checks the tgz's size and sha256 against its build
manifest (the .manifest.json beside it). It creates the boot resource with
that sha256 and size, then sends 4 MiB chunks read from disk, each signed when
sent; it sends nothing when MAAS already holds the image. Timeouts, 503s,
dropped connections and hash mismatches are retried or resolved from the
resource's state, a bounded number of times. Progress goes to stderr (a bar
on a terminal); --output json prints one JSON event per line on stdout.`,
		Example: `  imagectl upload artifacts/gpuaas-h200-host-ubuntu2404-1.4.0.tgz --site maas280 --base-image ubuntu/noble
  imagectl upload x-1.4.0.tgz --site lab --sites /etc/imagectl/sites.hcl --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", output)
			}
			if sitesFile == "" {
				sitesFile = "sites.hcl"
				if v, ok := envValue(env, "IMAGECTL_SITES"); ok && v != "" {
					sitesFile = v
				}
			}
			ss, diags := upload.LoadSites(sitesFile)
			if len(diags) > 0 {
				if err := recipes.WriteDiagnostics(cmd.ErrOrStderr(), ss.Files, diags, isTerminal(cmd.ErrOrStderr(), env)); err != nil {
					return err
				}
			}
			if diags.HasErrors() {
				return exitError{1}
			}
			s, err := ss.Site(site)
			if err != nil {
				return fmt.Errorf("%s: %w", sitesFile, err)
			}
			out := cmd.OutOrStdout()
			events := uploadEvents(cmd.ErrOrStderr(), false, isTerminal(cmd.ErrOrStderr(), env))
			if output == "json" {
				events = uploadEvents(out, true, false)
			}
			res, err := upload.Artifact(cmd.Context(), s, env, args[0], upload.Options{
				Manifest: manifestPath, Name: name, BaseImage: baseImage, Verify: verifyArtifact, Events: events,
			})
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(out).Encode(map[string]any{"type": "result", "site": res.Site, "name": res.Name,
					"distro_series": res.DistroSeries, "title": res.Title, "sha256": res.SHA256, "size": res.Size,
					"resource_id": res.Resource.ID, "skipped": res.Skipped, "restarts": res.Restarts, "sent": res.Sent})
			}
			what := "uploaded"
			if res.Skipped {
				what = "already held"
			}
			fmt.Fprintf(out, "%s %s to site %s as %s (boot resource %d, %q)\ndistro_series: %s\n",
				what, args[0], res.Site, res.Name, res.Resource.ID, res.Title, res.DistroSeries)
			return nil
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "the site to upload to (a site block of the sites file)")
	cmd.Flags().StringVar(&sitesFile, "sites", "", "the sites file (default: $IMAGECTL_SITES, else ./sites.hcl)")
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "the build manifest (default: the .manifest.json beside the tgz)")
	cmd.Flags().StringVar(&name, "name", "", "the MAAS name to version (default: custom/<image name from the manifest>)")
	cmd.Flags().StringVar(&baseImage, "base-image", "", "the <os>/<series> the image is built on, which MAAS requires (the recipe's maas.base_image)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	_ = cmd.MarkFlagRequired("site")
	_ = cmd.MarkFlagRequired("base-image")
	return cmd
}

// uploadEvents draws upload events as build's are drawn; as JSON, progress
// is kept to every tenth of a phase so CI logs stay short.
func uploadEvents(w io.Writer, jsonOut, terminal bool) func(maas.Event) {
	if !jsonOut {
		draw := progress(w, false, terminal)
		return func(e maas.Event) {
			draw(builder.Event{Time: e.Time, Type: e.Type, Status: e.Status, Phase: e.Phase, Summary: e.Summary,
				Seconds: e.Seconds, Message: e.Message, Done: e.Done, Total: e.Total})
		}
	}
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	last := map[string]int64{}
	return func(e maas.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Type == "progress" && e.Total > 0 {
			tenth := e.Done * 10 / e.Total
			if seen, ok := last[e.Phase]; ok && tenth == seen {
				return
			}
			last[e.Phase] = tenth
		}
		_ = enc.Encode(e)
	}
}
