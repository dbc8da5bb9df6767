package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/store"
)

// smokeCompareFile writes a smoke comparison file of demo version, as
// imagectl smoke --compare-first-boot writes it of the tgz the store in
// dir holds (a made-up digest for a version it lacks), with the fields a
// version does not keep, and a ratio, 0.9, not kept either, when both
// paths passed, and extra top-level fields (JSON, each ending in a
// comma), and returns its path.
func smokeCompareFile(t *testing.T, dir, version, accel, baked, firstBoot string, extra ...string) string {
	t.Helper()
	ratio := `"ratio": 0.9, `
	if strings.Contains(baked+firstBoot, `"passed": false`) {
		ratio = ""
	}
	sum := strings.Repeat("0", 64)
	if v, err := store.NewDir(dir).Version(context.Background(), "demo", version); err == nil {
		sum = v.SHA256
	}
	doc := `{"schema_version": 1, "image": "demo", "version": "` + version + `", "profile": "slice", "stage": "converged",
  "accelerator": "` + accel + `", "memory_mb": 4096, "measured_at": "2026-11-26T10:00:00Z", ` + ratio + `
  "artifact_sha256": "sha256:` + sum + `", "base_sha256": "sha256:` + strings.Repeat("b", 64) + `", ` + strings.Join(extra, " ") + `
  "baked": ` + baked + `, "first_boot": ` + firstBoot + `, "milestones": [{"name": "validated"}]}`
	p := filepath.Join(t.TempDir(), "demo-"+version+".smoke-compare.json")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvidenceAddComparison: a comparison file recorded with its version
// is what show prints (one line per profile, stage and accelerator, the
// ratio computed, a failed path and why, escaped) and gives as JSON;
// show of a version without one is as it was; a file of a version the
// store lacks is refused.
func TestEvidenceAddComparison(t *testing.T) {
	dir, _ := stored(t, "1.0.0", "1.1.0")
	env := []string{"IMAGECTL_STORE=" + dir, "USER=carol"}
	before, _, code := imagectl(t, env, "show", "demo", "1.0.0")
	beforeJSON, _, _ := imagectl(t, env, "show", "demo", "1.0.0", "-o", "json")
	if code != 0 || strings.Contains(beforeJSON, "boot_comparisons") {
		t.Fatalf("show before: exit %d\n%s", code, beforeJSON)
	}

	passed := `{"passed": true, "validated_seconds": 41.2, "deploy_seconds": 61, "download_bytes": 1024, "console_log": "/tmp/b.log", "timeline_file": "/tmp/b.json"}`
	slow := `{"passed": true, "validated_seconds": 152.6, "deploy_seconds": 12.5, "download_bytes": 314572800, "archive_bytes": 1, "index_bytes": 2}`
	hostile := `{"passed": false, "failure": "apt-get: could not reach\n\u001b[2Jdeb.example.com\u202e", "download_bytes": 0}`
	out, errs, code := imagectl(t, env, "evidence", "add-comparison", smokeCompareFile(t, dir, "1.1.0", "tcg", passed, slow))
	if code != 0 || !strings.Contains(out, "validated in 41.2 s baked vs 152.6 s at first boot (deploy 61.0 s vs 12.5 s), 0.27x (tcg, 4096 MiB, slice/converged, measured 2026-11-26T10:00:00Z)") {
		t.Fatalf("add-comparison: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = imagectl(t, env, "evidence", "add-comparison", smokeCompareFile(t, dir, "1.1.0", "kvm", passed, hostile,
		`"differences": ["not-at-first-boot bundle h200-ib (why: 200 MiB, over 16 MiB)", "missing-optional nvtop\u001b[2J"],`), "-o", "json")
	var rec struct {
		store.BootComparison
		LikeForLike *bool  `json:"like_for_like"`
		Summary     string `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &rec); code != 0 || err != nil || rec.Ratio != nil || rec.RecordedBy != "carol" || rec.FirstBoot.Passed ||
		rec.LikeForLike == nil || *rec.LikeForLike || len(rec.Differences) != 2 || !strings.Contains(rec.Summary, "; not like for like: not-at-first-boot bundle h200-ib") {
		t.Fatalf("add-comparison json: exit %d %v\n%s%s", code, err, out, errs)
	}
	// Another memory is another comparison: it does not replace 4096 MiB's.
	if out, errs, code := imagectl(t, env, "evidence", "add-comparison", smokeCompareFile(t, dir, "1.1.0", "tcg", `{"passed": true, "validated_seconds": 30, "download_bytes": 0}`, slow, `"memory_mb": 2048,`)); code != 0 {
		t.Fatalf("add-comparison 2048 MiB: exit %d\n%s%s", code, out, errs)
	}

	out, _, code = imagectl(t, env, "show", "demo", "1.1.0")
	lines := strings.Split(out, "\n")
	if code != 0 || len(lines) < 4 ||
		lines[1] != `  not compared: the first-boot path FAILED: apt-get: could not reach\n\x1b[2Jdeb.example.com\u202e (kvm, 4096 MiB, slice/converged, measured 2026-11-26T10:00:00Z); not like for like: not-at-first-boot bundle h200-ib (why: 200 MiB, over 16 MiB); missing-optional nvtop\x1b[2J` ||
		lines[2] != "  validated in 30.0 s baked vs 152.6 s at first boot (deploy ? vs 12.5 s), 0.20x (tcg, 2048 MiB, slice/converged, measured 2026-11-26T10:00:00Z)" ||
		lines[3] != "  validated in 41.2 s baked vs 152.6 s at first boot (deploy 61.0 s vs 12.5 s), 0.27x (tcg, 4096 MiB, slice/converged, measured 2026-11-26T10:00:00Z)" {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	if strings.ContainsAny(out, "\x1b\u202e") {
		t.Errorf("show prints a control character: %q", out)
	}
	out, _, _ = imagectl(t, env, "show", "demo", "1.1.0", "-o", "json")
	var shown struct {
		BootComparisons []store.BootComparison `json:"boot_comparisons"`
	}
	baked, first := 41.2, 152.6 // divided as the store does, not as constants
	if err := json.Unmarshal([]byte(out), &shown); err != nil || len(shown.BootComparisons) != 3 || shown.BootComparisons[2].Ratio == nil ||
		*shown.BootComparisons[2].Ratio != baked/first || shown.BootComparisons[0].FirstBoot.Failure == "" || *shown.BootComparisons[2].Baked.DeploySeconds != 61 ||
		!strings.Contains(out, `"like_for_like": false`) || !strings.Contains(out, `"like_for_like": true`) {
		t.Errorf("show json: %v\n%s", err, out)
	}
	// The other version has none: its output is as it was.
	if after, _, _ := imagectl(t, env, "show", "demo", "1.0.0"); after != before {
		t.Errorf("show without a comparison changed:\n%s\nwas\n%s", after, before)
	}
	if after, _, _ := imagectl(t, env, "show", "demo", "1.0.0", "-o", "json"); after != beforeJSON {
		t.Errorf("show json without a comparison changed:\n%s\nwas\n%s", after, beforeJSON)
	}

	for _, tc := range []struct {
		name string
		file string
		want string
	}{
		{"a version the store lacks", smokeCompareFile(t, dir, "2.0.0", "tcg", passed, slow), "demo 2.0.0 is not a version of the store"},
		{"passed without seconds", smokeCompareFile(t, dir, "1.1.0", "tcg", `{"passed": true}`, slow), "the baked path passed but has no validated_seconds"},
		{"another version's tgz", func() string {
			p := smokeCompareFile(t, dir, "1.0.0", "tcg", passed, slow)
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"version": "1.0.0"`, `"version": "1.1.0"`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}(), "a comparison is kept only with the version whose tgz it measured"},
		{"a file that is none", filepath.Join(t.TempDir(), "none.json"), "reading the boot comparison"},
	} {
		if _, errs, code := imagectl(t, env, "evidence", "add-comparison", tc.file); code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, %s", tc.name, code, errs)
		}
	}
}

// TestShowUnreadableComparisons: a comparisons file show cannot read is a
// warning, escaped; the version, and its revocation, still show.
func TestShowUnreadableComparisons(t *testing.T) {
	dir, _ := stored(t, "1.0.0")
	env := []string{"IMAGECTL_STORE=" + dir, "USER=carol"}
	if _, errs, code := imagectl(t, env, "revoke", "demo", "1.0.0", "--reason", "bad kernel"); code != 0 {
		t.Fatalf("revoke: exit %d %s", code, errs)
	}
	p := filepath.Join(dir, ".comparisons", "demo", "1.0.0.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("{\"schema_version\": 1, \x1b[2J"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := imagectl(t, env, "show", "demo", "1.0.0")
	if code != 0 || !strings.HasPrefix(out, "demo 1.0.0: ") || !strings.Contains(out, "  REVOKED by carol") ||
		!strings.Contains(out, "  WARNING: its boot comparisons cannot be read: reading the boot comparisons of demo 1.0.0") || strings.Contains(out, "\x1b") {
		t.Errorf("show: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = imagectl(t, env, "show", "demo", "1.0.0", "-o", "json")
	var j struct {
		Revoked *store.Revocation `json:"revoked"`
		Error   string            `json:"boot_comparisons_error"`
	}
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || j.Revoked == nil || j.Error == "" {
		t.Errorf("show json: exit %d %v\n%s", code, err, out)
	}
}

// TestDiffMarkdownComparisons: release notes (diff --output markdown) of
// two stored versions end with the newer one's recorded comparisons, as
// show prints them; without one they are byte for byte as they were, and
// the older version's are not the notes'.
func TestDiffMarkdownComparisons(t *testing.T) {
	dir, _ := stored(t, "1.0.0", "1.1.0")
	env := []string{"IMAGECTL_STORE=" + dir, "USER=carol"}
	before, errs, code := imagectl(t, env, "diff", "demo", "1.0.0", "1.1.0", "--output", "markdown")
	if code == 2 || strings.Contains(before, "Boot comparisons") {
		t.Fatalf("diff: exit %d\n%s%s", code, before, errs)
	}
	passed := `{"passed": true, "validated_seconds": 41.2, "deploy_seconds": 61, "download_bytes": 1024}`
	slow := `{"passed": true, "validated_seconds": 152.6, "deploy_seconds": 12.5, "download_bytes": 314572800}`
	if out, errs, code := imagectl(t, env, "evidence", "add-comparison", smokeCompareFile(t, dir, "1.0.0", "tcg", passed, slow)); code != 0 {
		t.Fatalf("add-comparison: exit %d\n%s%s", code, out, errs)
	}
	if out, _, c := imagectl(t, env, "diff", "demo", "1.0.0", "1.1.0", "--output", "markdown"); out != before || c != code {
		t.Errorf("the older version's comparison is in the notes (exit %d):\n%s", c, out)
	}
	if out, errs, code := imagectl(t, env, "evidence", "add-comparison", smokeCompareFile(t, dir, "1.1.0", "kvm", passed, slow,
		`"differences": ["missing-optional *nvtop*"],`)); code != 0 {
		t.Fatalf("add-comparison: exit %d\n%s%s", code, out, errs)
	}
	out, _, c := imagectl(t, env, "diff", "demo", "1.0.0", "1.1.0", "--output", "markdown")
	want := before + "\n### Boot comparisons of 1.1.0\n\n- validated in 41.2 s baked vs 152.6 s at first boot (deploy 61.0 s vs 12.5 s), 0.27x (kvm, 4096 MiB, slice/converged, measured 2026-11-26T10:00:00Z); not like for like: missing-optional \\*nvtop\\*\n"
	if out != want || c != code {
		t.Errorf("notes (exit %d):\n%s\nwant\n%s", c, out, want)
	}
	// The text and JSON outputs are not notes: as they were.
	if out, _, _ := imagectl(t, env, "diff", "demo", "1.0.0", "1.1.0"); strings.Contains(out, "validated in") {
		t.Errorf("text diff:\n%s", out)
	}
}
