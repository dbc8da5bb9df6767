package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/sbom"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storeopen"
)

type diffFlags struct {
	store  storeFlags
	output outputFlag
	sboms  bool
}

func newDiffCmd(env []string) *cobra.Command {
	cmd, f := command(env, runDiff, &cobra.Command{
		Use:   "diff (A.manifest.json B.manifest.json | A.spdx.json B.spdx.json | IMAGE VERSION-A VERSION-B)",
		Short: "Show what changed between two image manifests",
		Long: `Diff compares two build manifests the way an operator asks before a
rollout: packages added, removed, upgraded and downgraded (in Debian version
order), kernel args, enabled services, layers and their digests, files and
bundles changed, Netdata settings, the base image and the artifact. Build
timings are not differences. Like diff(1) it exits 0 when the images are
equal, 1 when they differ and 2 on trouble. Given IMAGE and two versions it
compares their manifests from the store (--store; a registry's are fetched,
small, into the local cache).

Given two SBOMs, SPDX JSON or CycloneDX JSON in any mix (imagectl's
<name>-<version>.spdx.json and .cdx.json, or another tool's such as syft's
spdx-json and cyclonedx-json), it compares their Debian packages (those
with a pkg:deb purl): added, removed, upgraded and downgraded. --sbom does
the same for two versions from the store.

With --output markdown (release notes), the notes end, when boot
comparisons are recorded with the newer version ("imagectl evidence
add-comparison"), with a "Boot comparisons" section: one line each,
"validated in X s baked vs Y s at first boot (deploy A s vs B s), ...", as
show prints them. They are read from the store's catalog when the
versions come from the store, or when --store or --catalog is given with
two manifests; the notes are as they were when none is recorded.`,
		Example: `  imagectl diff artifacts/gpuaas-h200-host-ubuntu2404-1.3.0.manifest.json artifacts/gpuaas-h200-host-ubuntu2404-1.4.0.manifest.json
  imagectl diff old.manifest.json new.manifest.json --output markdown >> RELEASE-NOTES.md
  imagectl diff gpuaas-h200-host 20261120.1 20261123.1 --store oci://registry.example.com/imagectl
  imagectl diff old.spdx.json new.spdx.json
  imagectl diff old.cdx.json new.cdx.json
  imagectl diff gpuaas-h200-host 20261120.1 20261123.1 --sbom`,
		Args: cobra.RangeArgs(2, 3),
	})
	f.output = outputFlag{formats: []string{"text", "json", "markdown"}}
	f.store.registerVersions(cmd, "the image store the versions are in: a directory or "+storeopen.Scheme+"REGISTRY/PREFIX (default: $IMAGECTL_STORE, else ./"+store.DefaultDir+")")
	cmd.Flags().StringVar(&f.store.catalog, "catalog", "", "the git remote holding the catalog the newer version's boot comparisons are read from, for --output markdown (default: $IMAGECTL_CATALOG, else a directory store's own)")
	f.output.register(cmd)
	cmd.Flags().BoolVar(&f.sboms, "sbom", false, "compare the packages of the two SBOMs (given .spdx.json or .cdx.json files, this is the default)")
	return cmd
}

// runDiff compares; like diff(1) it exits 0 when equal, 1 when different
// and 2 on trouble.
func runDiff(ctx context.Context, f *diffFlags, args []string, s streams, env []string) error {
	paths, sboms := args, f.sboms
	if len(args) == 3 {
		paths = nil
		for _, ver := range args[1:] {
			v, err := f.store.version(ctx, env, args[0], ver, false)
			if err != nil {
				return failWith(s.err, 2, err)
			}
			p := v.Manifest
			if sboms {
				if p, err = sbomOf(v.Manifest, v.Dir); err != nil {
					return failWith(s.err, 2, fmt.Errorf("%s %s: %v", args[0], ver, err))
				}
			}
			paths = append(paths, p)
		}
	} else if sboms || isSBOM(paths[0]) || isSBOM(paths[1]) {
		sboms = true
	}
	d, err := compare(paths, sboms)
	if err != nil {
		return failWith(s.err, 2, err)
	}
	switch f.output.format {
	case "json":
		err = writeJSON(s.out, d)
	case "markdown":
		if err = d.WriteMarkdown(s.out); err == nil {
			if err = f.comparisonsMarkdown(ctx, s.out, env, d, len(args) == 3); err != nil {
				return failWith(s.err, 2, err)
			}
		}
	case "text":
		err = d.WriteText(s.out)
	default:
		return failWith(s.err, 2, f.output.check())
	}
	if err != nil {
		return err
	}
	if !d.Equal {
		return exitError{1}
	}
	return nil
}

// comparisonsMarkdown appends to release notes the boot comparisons
// recorded with d's newer version (release.BootComparisons, one line each,
// as show prints them): read from the store's catalog when the versions
// came from the store (fromStore) or --store or --catalog names one;
// nothing when none is recorded, so that the notes are as they were.
func (f *diffFlags) comparisonsMarkdown(ctx context.Context, w io.Writer, env []string, d *manifest.Diff, fromStore bool) error {
	if !fromStore && f.store.store == "" && f.store.catalog == "" {
		return nil
	}
	st, err := f.store.open(ctx, env)
	if err != nil {
		return err
	}
	cs, err := release.BootComparisons(ctx, f.store.catalogOf(st, env), d.B.Name, d.B.Version)
	if err != nil || len(cs) == 0 {
		return err
	}
	textsafe.Fprintf(w, "\n### Boot comparisons of %s\n\n", textsafe.MarkdownText(d.B.Version))
	for i := range cs {
		if _, err := fmt.Fprintf(w, "- %s\n", textsafe.MarkdownText(cs[i].Summary())); err != nil {
			return err
		}
	}
	return nil
}

// isSBOM is whether a file is named as an SBOM: .spdx.json, .cdx.json.
func isSBOM(path string) bool {
	return strings.HasSuffix(path, manifest.SBOMExt) || strings.HasSuffix(path, manifest.CycloneDXExt)
}

// sbomOf is the SBOM a manifest records, in dir.
func sbomOf(manifestPath, dir string) (string, error) {
	m, err := manifest.Read(manifestPath)
	if err != nil {
		return "", err
	}
	if m.SBOM == nil {
		return "", fmt.Errorf("it has no SBOM (built before imagectl made them): compare the manifests instead (no --sbom)")
	}
	return filepath.Join(dir, filepath.Base(m.SBOM.File)), nil
}

// compare diffs two manifests, or the packages of two SBOMs.
func compare(paths []string, sboms bool) (*manifest.Diff, error) {
	if sboms {
		a, b, err := readTwo(paths, sbom.ReadFile)
		if err != nil {
			return nil, err
		}
		return sbom.Diff(a, b), nil
	}
	a, b, err := readTwo(paths, manifest.Read)
	if err != nil {
		return nil, err
	}
	return manifest.Compare(a, b), nil
}

// readTwo reads the two files a diff compares.
func readTwo[T any](paths []string, read func(string) (T, error)) (a, b T, err error) {
	if a, err = read(paths[0]); err != nil {
		return a, b, err
	}
	b, err = read(paths[1])
	return a, b, err
}
