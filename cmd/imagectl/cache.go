package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/cache"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/store/oci"
)

// cacheFlags are cache's, which ls and prune share, and prune's.
type cacheFlags struct {
	cacheDir string
	output   outputFlag
	// prune's
	maxSize   string
	olderThan time.Duration
}

func newCacheCmd(env []string) *cobra.Command {
	var f cacheFlags
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Show and bound the cache: layer snapshots, fetched registry versions and packages",
		Long: `The cache directory holds three things that grow with use. The layer cache
holds the disk state after each layer of past builds, as deltas against the
layer before, so that rebuilds apply only what changed. The registry cache
holds what reads of an OCI store fetched: every version's small files, and
the tgzs check and smoke fetched whole. The package cache holds the .deb
archives builds fetched on the host, by sha256. ls lists all three; prune
removes the least recently used of any until the whole fits. ls also lists
the records of the store tgzs that racks checks and promote's uploads
hashed, which spare later checks the hash while the tgz is unchanged;
prune removes those whose tgz is gone or changed.`,
	}
	cmd.PersistentFlags().StringVar(&f.cacheDir, "cache-dir", "", "the cache directory builds use (default: $IMAGECTL_CACHE_DIR, else $XDG_CACHE_HOME/imagectl)")
	f.output.registerIn(cmd, cmd.PersistentFlags())

	ls := &cobra.Command{
		Use:     "ls",
		Short:   "List the layer snapshots, fetched registry versions and cached packages",
		Example: "  imagectl cache ls\n  imagectl cache ls -o json",
		Args:    cobra.NoArgs,
		RunE:    runE(&f, env, runCacheLs),
	}
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Remove the least recently used layer snapshots, registry versions and packages",
		Long: `Prune removes layer snapshots, fetched registry versions and cached package
archives not used for --older-than, then the least recently used of any until
the cache fits in --max-size, the three counted together, interrupted
downloads, and the hash records whose tgz is gone or changed. With neither
flag, it empties all three, and removes every hash record. Registry versions read in
the last 15 minutes are kept: their readers may still be opening them. It
waits for running builds and registry reads to finish, and they wait while it
runs. Downloaded base images are not pruned.`,
		Example: "  imagectl cache prune --max-size 50G\n  imagectl cache prune --older-than 720h",
		Args:    cobra.NoArgs,
		RunE:    runE(&f, env, runCachePrune),
	}
	prune.Flags().StringVar(&f.maxSize, "max-size", "", "keep the cache under this size (e.g. 50G, 800M)")
	prune.Flags().DurationVar(&f.olderThan, "older-than", 0, "remove what was not used for this long (e.g. 720h)")
	cmd.AddCommand(ls, prune)
	return cmd
}

// dir checks --output and returns the cache directory.
func (f *cacheFlags) dir(env []string) (string, error) {
	if err := f.output.check(); err != nil {
		return "", err
	}
	if f.cacheDir != "" {
		return f.cacheDir, nil
	}
	return defaultCacheDir(env)
}

func runCacheLs(_ context.Context, f *cacheFlags, _ []string, s streams, env []string) error {
	d, err := f.dir(env)
	if err != nil {
		return err
	}
	c, err := cache.List(d)
	if err != nil {
		return err
	}
	return f.print(s.out, c, &c.Layers, func(w io.Writer) { lsText(w, c, cache.Layers(d)) })
}

func lsText(w io.Writer, c *cache.Contents, layers layercache.Cache) {
	fmt.Fprintf(w, "%-14s %-22s %-16s %-20s %10s %s\n", "KEY", "IMAGE", "LAYER", "CREATED", "SIZE", "LAST USED")
	for _, e := range c.Layers {
		textsafe.Fprintf(w, "%-14s %-22s %-16s %-20s %10s %s\n", shortKey(e.Key), e.Image, e.Layer, e.Created.Local().Format("2006-01-02 15:04:05"),
			humanBytes(e.Bytes), layers.LastUsed(&e).Local().Format("2006-01-02 15:04:05"))
	}
	fmt.Fprintf(w, "%d snapshots, %s in %s\n", len(c.Layers), humanBytes(c.LayerBytes), c.LayersDir)
	if len(c.Registry) > 0 {
		fmt.Fprintf(w, "\n%-60s %-4s %10s %s\n", "REGISTRY VERSION", "TGZ", "SIZE", "LAST USED")
		for _, v := range c.Registry {
			textsafe.Fprintf(w, "%-60s %-4s %10s %s\n", v.Ref, yesNo(v.Tarball), humanBytes(v.Bytes), v.LastUsed.Local().Format("2006-01-02 15:04:05"))
		}
	}
	fmt.Fprintf(w, "%d registry versions, %s in %s\n", len(c.Registry), humanBytes(c.RegistryBytes), c.RegistryDir)
	fmt.Fprintf(w, "%d packages, %s in %s\n", len(c.Packages), humanBytes(c.PackageBytes), c.PackagesDir)
	current := 0
	for _, h := range c.Hashed {
		if h.Current {
			current++
		}
	}
	fmt.Fprintf(w, "%d hash records (%d of unchanged tgzs), %s in %s\n", len(c.Hashed), current, humanBytes(c.HashedBytes), c.HashedDir)
}

func runCachePrune(ctx context.Context, f *cacheFlags, _ []string, s streams, env []string) error {
	d, err := f.dir(env)
	if err != nil {
		return err
	}
	o, err := cache.Bound(f.maxSize, f.olderThan)
	if err != nil {
		return fmt.Errorf("--max-size: %w", err)
	}
	o.Waiting = func() { fmt.Fprintln(s.err, "waiting for running builds and registry reads to finish (Ctrl-C stops)") }
	p, err := cache.Prune(ctx, d, o)
	if err != nil {
		return err
	}
	return f.print(s.out, p, &p.Layers, func(w io.Writer) { pruneText(w, p) })
}

func pruneText(w io.Writer, p *cache.Pruned) {
	fmt.Fprintf(w, "removed %d snapshots, %d registry versions, %d packages and %d hash records, %s freed\n",
		len(p.Layers), len(p.Registry), len(p.Packages), len(p.Hashed), humanBytes(p.FreedBytes))
	if len(p.InUse) > 0 {
		fmt.Fprintf(w, "kept %d registry versions read in the last %s, in use:\n", len(p.InUse), oci.InUse)
		for _, v := range p.InUse {
			textsafe.Fprintf(w, "  %s\n", v.Ref)
		}
	}
}

// print writes v as JSON without its layers' metadata, which the listing
// does not show, or as text.
func (f *cacheFlags) print(w io.Writer, v any, layers *[]layercache.Entry, text func(io.Writer)) error {
	if f.output.json() {
		*layers = withoutMeta(*layers)
	}
	return f.output.print(w, v, func(w io.Writer) error { text(w); return nil })
}

// withoutMeta drops what the builder recorded about each layer.
func withoutMeta(es []layercache.Entry) []layercache.Entry {
	out := make([]layercache.Entry, len(es))
	for i, e := range es {
		e.Meta = nil
		out[i] = e
	}
	return out
}

func shortKey(k string) string {
	k = strings.TrimPrefix(k, digest.Prefix)
	if len(k) > 12 {
		k = k[:12]
	}
	return k
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
