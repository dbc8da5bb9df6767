package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder/layercache"
)

func newCacheCmd(env []string) *cobra.Command {
	var cacheDir, output string
	dir := func() (string, error) {
		if cacheDir == "" {
			d, err := defaultCacheDir(env)
			if err != nil {
				return "", err
			}
			cacheDir = d
		}
		return filepath.Join(cacheDir, "layers"), nil
	}
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Show and bound the layer cache",
		Long: `The layer cache holds the disk state after each layer of past builds, as
deltas against the layer before, so that rebuilds apply only what changed.
ls lists the snapshots; prune removes the least recently used ones.`,
	}
	cmd.PersistentFlags().StringVar(&cacheDir, "cache-dir", "", "the cache directory builds use (default: $IMAGECTL_CACHE_DIR, else $XDG_CACHE_HOME/imagectl)")
	cmd.PersistentFlags().StringVarP(&output, "output", "o", "text", "output format: text or json")

	ls := &cobra.Command{
		Use:     "ls",
		Short:   "List the cached layer snapshots",
		Example: "  imagectl cache ls\n  imagectl cache ls -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := dir()
			if err != nil {
				return err
			}
			c := layercache.Cache{Dir: d}
			entries, err := c.List()
			if err != nil {
				return err
			}
			if output == "json" {
				if entries == nil {
					entries = []layercache.Entry{}
				}
				for i := range entries {
					entries[i].Meta = nil
				}
				return writeJSON(cmd.OutOrStdout(), map[string]any{"directory": d, "entries": entries})
			}
			var total int64
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-14s %-22s %-16s %-20s %10s %s\n", "KEY", "IMAGE", "LAYER", "CREATED", "SIZE", "LAST USED")
			for _, e := range entries {
				total += e.Bytes
				fmt.Fprintf(w, "%-14s %-22s %-16s %-20s %10s %s\n", shortKey(e.Key), e.Image, e.Layer, e.Created.Local().Format("2006-01-02 15:04:05"),
					humanBytes(e.Bytes), c.LastUsed(&e).Local().Format("2006-01-02 15:04:05"))
			}
			fmt.Fprintf(w, "%d snapshots, %s in %s\n", len(entries), humanBytes(total), d)
			return nil
		},
	}

	var maxSize string
	var olderThan time.Duration
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Remove least recently used snapshots",
		Long: `Prune removes snapshots not used for --older-than, then the least recently
used ones until the cache fits in --max-size. With neither, it empties the cache.`,
		Example: "  imagectl cache prune --max-size 50G\n  imagectl cache prune --older-than 720h",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := dir()
			if err != nil {
				return err
			}
			var limit int64
			if maxSize != "" {
				if limit, err = parseBytes(maxSize); err != nil {
					return fmt.Errorf("--max-size: %w", err)
				}
			}
			if maxSize == "" && olderThan == 0 {
				limit = -1 // everything goes
			}
			c := layercache.Cache{Dir: d}
			removed, err := c.Prune(limit, olderThan)
			if err != nil {
				return err
			}
			var freed int64
			for _, e := range removed {
				freed += e.Bytes
			}
			if output == "json" {
				if removed == nil {
					removed = []layercache.Entry{}
				}
				for i := range removed {
					removed[i].Meta = nil
				}
				return writeJSON(cmd.OutOrStdout(), map[string]any{"removed": removed, "freed_bytes": freed})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %d snapshots, %s freed\n", len(removed), humanBytes(freed))
			return nil
		},
	}
	prune.Flags().StringVar(&maxSize, "max-size", "", "keep the cache under this size (e.g. 50G, 800M)")
	prune.Flags().DurationVar(&olderThan, "older-than", 0, "remove snapshots not used for this long (e.g. 720h)")
	cmd.AddCommand(ls, prune)
	return cmd
}

func shortKey(k string) string {
	k = strings.TrimPrefix(k, "sha256:")
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

// parseBytes reads sizes such as 800M, 50G or 1073741824.
func parseBytes(s string) (int64, error) {
	orig := s
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I"))
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size such as 800M or 50G", orig)
	}
	return n * mult, nil
}
