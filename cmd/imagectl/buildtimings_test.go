package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/manifest"
)

// TestWriteTimings: the text summary of a build's timings has a row per
// layer that ran, says which were cached, and totals every part.
func TestWriteTimings(t *testing.T) {
	cached := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	m := &manifest.Manifest{
		Layers: []manifest.Layer{
			{Name: "base-tools", CachedAt: &cached},
			{Name: "packages", Timings: &manifest.Timings{Resolve: 7.2, Download: 12.3, Install: 80, Commands: 1.5, Snapshot: 4}},
			{Name: "finalize", Timings: &manifest.Timings{Commands: 3}},
		},
		Build: manifest.Build{Seconds: 130.04, Timings: &manifest.Timings{Base: 2, Launch: 9.5, Resolve: 7.2, Download: 12.3, Install: 80, Commands: 4.5,
			Snapshot: 4, Pack: 11, SBOM: 5, DownloadBytes: 3 << 20}},
	}
	var out bytes.Buffer
	writeTimings(&out, m)
	got := out.String()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	want := [][]string{
		{"where", "the", "time", "went", "(seconds,", "130.0", "in", "all):"},
		{"base", "launch", "resolve", "download", "install", "commands", "snapshot", "pack", "sbom"},
		{"layer", "base-tools", "cached"},
		{"layer", "packages", "-", "-", "7.2", "12.3", "80.0", "1.5", "4.0", "-", "-"},
		{"layer", "finalize", "-", "-", "0.0", "0.0", "0.0", "3.0", "0.0", "-", "-"},
		{"total", "2.0", "9.5", "7.2", "12.3", "80.0", "4.5", "4.0", "11.0", "5.0"},
		{"packages:", "3.0", "MiB", "downloaded,", "0", "B", "from", "the", "package", "cache"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), got)
	}
	for i, w := range want {
		if fields := strings.Fields(lines[i]); strings.Join(fields, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want the fields %q", i, lines[i], w)
		}
	}
	// Without timings (a manifest of an older build) nothing is printed.
	out.Reset()
	writeTimings(&out, &manifest.Manifest{})
	if out.Len() != 0 {
		t.Errorf("printed %q without timings", out.String())
	}
}
