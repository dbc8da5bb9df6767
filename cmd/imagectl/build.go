package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/store/storeopen"
)

func newBuildCmd(env []string) *cobra.Command {
	var (
		rf        recipeFlags
		dryRun    bool
		version   string
		cacheDir  string
		workDir   string
		outputDir string
		accel     string
		packer    string
		noCache   bool
		refresh   bool
		maxAge    time.Duration
		signKey   string
		st        storeFlags
	)
	cmd := &cobra.Command{
		Use:   "build RECIPE",
		Short: "Build an image from a recipe (--dry-run prints the plan)",
		Long: `Build resolves a recipe's variables and layers into the ordered steps a
build executes. With --dry-run it prints that plan - base image and checksum,
each layer with its steps and digest, kernel args, Netdata, bundles with their
file hashes, artifact names and the MAAS target - and touches nothing. A
bundle whose source needs a variable without a value is shown unresolved,
with one warning naming what a build needs; a build refuses it.

Without --dry-run it runs the plan: verifies the base image's checksum
(downloading it once into the cache), customizes a raw working copy of it
in one libguestfs appliance (KVM when it works, TCG otherwise), and writes
<name>-<version>.tgz, .manifest.json and -validate.sh into the artifact
directory, all or none of them. Ctrl-C stops the build and cleans up.

The layer cache keeps the disk after each layer, keyed by the layer's
definition chained with everything before it: a rebuild restores the deepest
unchanged layer and applies only the rest (with nothing changed, it repacks
the cached result: the same tgz bytes). Layers that install packages or run
commands are reused up to --cache-max-age; --refresh rebuilds them all;
imagectl cache ls|prune shows and bounds it.

With --sign-key (or the recipe's artifact sign_key) it signs the tgz and the
manifest as imagectl sign does. The key is decrypted (password from
$COSIGN_PASSWORD) before the build starts; the outputs are signed before they
are published and appear with their signatures, or not at all.

With --store (or $IMAGECTL_STORE) it publishes the outputs into that image
store, a directory (as <image>/<version>/) or an OCI registry
(oci://REGISTRY/PREFIX: PREFIX/<image>:<version>, its OCI manifest signed in
cosign's format with the build's key), immutable; without a version from the recipe or
--version, the version is the UTC date and the store's next sequence number
for the day (20261122.1). The manifest's lineage.parent_version is the
store's latest version of the image.`,
		Example: `  imagectl build recipes/h200.hcl --dry-run
  imagectl build recipes/h200.hcl --dry-run --output json > plan.json
  imagectl build recipes/h200.hcl --dry-run -var version=1.4.0 -var-file site.hcl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rf.dryRun = dryRun
			// A version names files and store paths: refused before the
			// recipe is read (plan.New holds every caller to the same rule).
			if version != "" {
				if err := manifest.CheckVersion(version); err != nil {
					return fmt.Errorf("--version: %w", err)
				}
			}
			r, err := rf.load(cmd, args[0], env)
			if err != nil {
				return err
			}
			// The key is decrypted before anything starts, and a
			// registry store signs what it publishes with it.
			var signer *signing.Signer
			if key := signing.BuildKeyPath(signKey, r.Image.Artifact.SignKey, r.Path); key != "" && !dryRun {
				if signer, err = loadSigner(key, env); err != nil {
					return err
				}
			}
			sb, err := startStoreBuild(cmd.Context(), &st, env, signer, release.BuildOptions{Image: r.Image.Name,
				Version: cmp.Or(version, r.Image.Version), DryRun: dryRun, OutputDir: outputDir})
			if err != nil {
				return err
			}
			defer sb.Close()
			version = sb.Version(version)
			plan, err := plan.New(r, plan.Options{Version: version, SignKey: signKey})
			if err != nil {
				return err
			}
			if from := sb.VersionFrom(); from != "" {
				plan.VersionFrom = from
			}
			if dryRun {
				if rf.output.json() {
					return plan.WriteJSON(cmd.OutOrStdout())
				}
				return plan.WriteText(cmd.OutOrStdout())
			}
			if cacheDir == "" {
				if cacheDir, err = defaultCacheDir(env); err != nil {
					return err
				}
			}
			events := progress(cmd.ErrOrStderr(), false, isTerminal(cmd.ErrOrStderr(), env))
			if rf.output.json() {
				events = progress(cmd.OutOrStdout(), true, false)
			}
			res, err := builder.Build(cmd.Context(), plan, builder.BuildOptions{
				Executor:      newExecutor(),
				CacheDir:      cacheDir,
				WorkDir:       workDir,
				OutputDir:     sb.OutputDir(outputDir),
				ParentVersion: sb.Parent(),
				Accel:         accel,
				Packer:        packer,
				Events:        events,
				LayerCache:    layerCacheDir(cacheDir, noCache),
				Refresh:       refresh,
				CacheMaxAge:   maxAge,
				Sign:          buildSigner(cmd.Context(), signer),
			})
			if err != nil {
				return err
			}
			sigs, ref, err := publishBuild(cmd.Context(), sb, res, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if rf.output.json() {
				// One object per line, like the events before it.
				f := res.Files
				result := map[string]any{"type": "result", "tarball": f.Tarball,
					"manifest": f.Manifest, "validation_script": f.ValidationScript, "sbom": f.SBOM, "cyclonedx": f.CycloneDX, "provenance": f.Provenance,
					"sha256": res.Manifest.Artifact.SHA256,
					"size":   res.Manifest.Artifact.Size, "signatures": sigs}
				if ref != "" {
					result["ref"] = ref
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(result)
			}
			f := res.Files
			tgz := f.Tarball
			if tgz == "" { // pushed to a registry store, not kept here
				tgz = ref
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n  sha256 %s, %d bytes\n%s\n%s\n%s\n%s\n%s\n", tgz, res.Manifest.Artifact.SHA256,
				res.Manifest.Artifact.Size, f.Manifest, f.ValidationScript, f.SBOM, f.CycloneDX, f.Provenance)
			for _, s := range sigs {
				fmt.Fprintln(cmd.OutOrStdout(), s)
			}
			return nil
		},
	}
	rf.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and touch nothing")
	cmd.Flags().StringVar(&version, "version", "", "image version (overrides the recipe's)")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "where downloaded base images and the layer cache (layers/) are kept (default: $IMAGECTL_CACHE_DIR, else $XDG_CACHE_HOME/imagectl)")
	cmd.Flags().StringVar(&workDir, "work-dir", "", "where the temporary working disk goes, as large as the data in the image (default: $TMPDIR)")
	st.registerVersions(cmd, "publish the build into this image store: a directory or "+storeopen.Scheme+"REGISTRY/PREFIX (default: $IMAGECTL_STORE; with neither, no store)")
	cmd.Flags().StringVar(&outputDir, "output-dir", "", "write artifacts here instead of the recipe's artifact directory")
	cmd.Flags().StringVar(&signKey, "sign-key", "", "sign with this cosign private key (overrides the recipe's sign_key; password from $COSIGN_PASSWORD)")
	cmd.Flags().StringVar(&accel, "accel", "auto", "appliance accelerator: auto (KVM when it works, else TCG), kvm or tcg")
	cmd.Flags().BoolVar(&noCache, "no-cache", false, "build every layer without the layer cache (neither reading nor writing it)")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "rebuild every layer and replace what the layer cache holds for them")
	cmd.Flags().DurationVar(&maxAge, "cache-max-age", builder.DefaultCacheMaxAge, "reuse cached layers that install packages or run commands only up to this age")
	cmd.Flags().StringVar(&packer, "packer", "auto", "how the root filesystem is read for the tgz: host (from the disk image, fast), appliance (tar-out), or auto (host when supported, else appliance)")
	return cmd
}

// layerCacheDir is where the layer cache lives: beside the base images.
func layerCacheDir(cacheDir string, disabled bool) string {
	if disabled {
		return ""
	}
	return filepath.Join(cacheDir, cachedir.Layers)
}

// defaultCacheDir is the cache directory without --cache-dir.
func defaultCacheDir(env []string) (string, error) {
	dir, err := cachedir.Default(env)
	if err != nil {
		return "", fmt.Errorf("%w (pass --cache-dir)", err)
	}
	return dir, nil
}
