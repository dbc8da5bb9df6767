package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/sites"
)

type uploadFlags struct {
	site                      siteFlags
	verify                    verifyFlags
	manifest, name, baseImage string
	output                    outputFlag
	store                     storeFlags
}

func newUploadCmd(env []string) *cobra.Command {
	cmd, f := command(env, runUpload, &cobra.Command{
		Use:   "upload (IMAGE VERSION | ARTIFACT.tgz) --site SITE",
		Short: "Upload a built image to a MAAS site as a custom boot resource",
		Long: `Upload sends an image version from the store (IMAGE VERSION), or a built
tgz (ARTIFACT.tgz), to a MAAS site from the sites file, under the immutable
versioned name <name>-<version> with the version in its title, and prints
the distro_series a deploy uses to select it. The name, title and base image
come from the manifest's maas section (the recipe's maas block); --name and
--base-image override them.

Before sending a byte it checks the tgz's size and sha256 against its build
manifest and verifies the tgz's and the manifest's signatures with a cosign
public key: --key, else $IMAGECTL_VERIFY_KEY, else the site's verify_key in
the sites file. Without a key it refuses, unless --insecure-skip-verify.
It creates the boot resource with that sha256 and size, then sends 4 MiB
chunks read from disk, each signed when sent; it sends nothing when MAAS
already holds the image. Timeouts, 503s, dropped connections and hash
mismatches are retried or resolved from the resource's state, a bounded
number of times. Progress goes to stderr (a bar on a terminal); --output
json prints one JSON event per line on stdout.`,
		Example: `  imagectl upload gpuaas-h200-host-ubuntu2404 1.4.0 --site maas280 --key cosign.pub
  imagectl upload artifacts/gpuaas-h200-host-ubuntu2404-1.4.0.tgz --site maas280 --key cosign.pub
  imagectl upload x-1.4.0.tgz --site lab --sites /etc/imagectl/sites.hcl --base-image ubuntu/noble --output json`,
		Args: cobra.RangeArgs(1, 2),
	})
	f.site.register(cmd)
	f.verify.register(cmd)
	f.store.register(cmd)
	cmd.Flags().StringVar(&f.manifest, "manifest", "", "the build manifest of a tgz (default: the .manifest.json beside it)")
	cmd.Flags().StringVar(&f.name, "name", "", "the MAAS name to version (default: the manifest's maas.name, else custom/<image name>)")
	cmd.Flags().StringVar(&f.baseImage, "base-image", "", "the <os>/<series> the image is built on, which MAAS requires (default: the manifest's maas.base_image)")
	f.output.register(cmd)
	return cmd
}

func runUpload(ctx context.Context, f *uploadFlags, args []string, s streams, env []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	site, err := f.site.load(s, env)
	if err != nil {
		return err
	}
	v, err := f.verify.verifier(env, site)
	if err != nil {
		return err
	}
	events := uploadEvents(s.err, false, isTerminal(s.err, env))
	if f.output.json() {
		events = uploadEvents(s.out, true, false)
	}
	o := release.Options{Site: site, Env: env, Verifier: v, InsecureSkipVerify: f.verify.insecure, BaseImage: f.baseImage, Events: events}
	versioned, err := fromStore(args, f.manifest != "" || f.name != "", "--manifest", "--name")
	if err != nil {
		return err
	}
	what := args[0]
	var r *release.Result
	if versioned {
		if o.Store, err = f.store.open(ctx, env); err != nil {
			return err
		}
		r, err = release.Upload(ctx, args[0], args[1], o)
		what = args[0] + " " + args[1]
	} else {
		r, err = release.UploadFile(ctx, args[0], o, release.FileOptions{Manifest: f.manifest, Name: f.name})
	}
	if err != nil {
		return err
	}
	res := r.Upload
	if f.output.json() {
		return json.NewEncoder(s.out).Encode(map[string]any{"type": "result", "site": res.Site, "name": res.Name,
			"distro_series": res.DistroSeries, "title": res.Title, "sha256": res.SHA256, "size": res.Size,
			"resource_id": res.Resource.ID, "skipped": res.Skipped, "restarts": res.Restarts, "sent": res.Sent, "verified": r.Verified})
	}
	verb := "uploaded"
	if res.Skipped {
		verb = "already held"
	}
	textsafe.Fprintf(s.out, "%s %s to site %s as %s (boot resource %d, \"%s\")\ndistro_series: %s\n",
		verb, what, res.Site, res.Name, res.Resource.ID, res.Title, res.DistroSeries)
	return nil
}

// siteFlags choose a site of the sites file.
type siteFlags struct {
	site, sitesFile string
	// sites are the values of a repeatable --site (promote's rollout).
	sites []string
	multi bool
	// loaded is the sites file once read (its diagnostics printed once).
	loaded     *sites.File
	loadedPath string
}

func (f *siteFlags) register(cmd *cobra.Command) {
	if f.multi {
		cmd.Flags().StringArrayVar(&f.sites, "site", nil, "a MAAS site (a site block of the sites file) or a group of sites (a group block); repeat it for several")
	} else {
		cmd.Flags().StringVar(&f.site, "site", "", "the MAAS site (a site block of the sites file)")
	}
	cmd.Flags().StringVar(&f.sitesFile, "sites", "", "the sites file (default: $IMAGECTL_SITES, else ./sites.hcl)")
	_ = cmd.MarkFlagRequired("site")
}

// load reads the sites file, printing its diagnostics, and returns the site.
func (f *siteFlags) load(s streams, env []string) (*sites.Site, error) {
	ss, path, err := f.file(s, env)
	if err != nil {
		return nil, err
	}
	site, err := ss.Site(f.site)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return site, nil
}

// file reads the sites file, printing its diagnostics.
func (f *siteFlags) file(s streams, env []string) (*sites.File, string, error) {
	if f.loaded != nil {
		return f.loaded, f.loadedPath, nil
	}
	path := sites.FilePath(f.sitesFile, env)
	ss, diags := sites.Load(path)
	if len(diags) > 0 {
		if err := hclkit.WriteDiagnostics(s.err, ss.Files, diags, isTerminal(s.err, env)); err != nil {
			return nil, "", err
		}
	}
	if diags.HasErrors() {
		return nil, "", exitError{1}
	}
	f.loaded, f.loadedPath = ss, path
	return ss, path, nil
}

// verifyFlags choose the key artifacts are verified with before they reach
// a site.
type verifyFlags struct {
	key      string
	insecure bool
}

func (f *verifyFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.key, "key", "", "cosign public key to verify the artifact with (default: $IMAGECTL_VERIFY_KEY, else the site's verify_key)")
	cmd.Flags().BoolVar(&f.insecure, "insecure-skip-verify", false, "send the artifact without verifying its signatures (when no key is configured)")
}

// verifier loads the key artifacts sent to s are verified with
// (sites.VerifyPolicy); nil with --insecure-skip-verify and no key.
func (f *verifyFlags) verifier(env []string, s *sites.Site) (*signing.Verifier, error) {
	return sites.VerifyPolicy{Key: f.key, Insecure: f.insecure}.Verifier(s, env)
}

// uploadEvents draws upload events as build's are drawn; as JSON, progress
// is kept to every tenth of a phase so CI logs stay short.
func uploadEvents(w io.Writer, jsonOut, terminal bool) func(event.Event) {
	if !jsonOut {
		return progress(w, false, terminal)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	last := map[string]int64{}
	return func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Type == event.TypeProgress && e.Total > 0 {
			tenth := e.Done * 10 / e.Total
			if seen, ok := last[e.Phase]; ok && tenth == seen {
				return
			}
			last[e.Phase] = tenth
		}
		_ = enc.Encode(e)
	}
}
