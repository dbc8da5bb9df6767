package release_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/smoke"
)

// smokeCompare is a smoke comparison file as imagectl smoke
// --compare-first-boot writes it, with the fields a version does not keep
// (timelines, local paths, others), its paths' JSON given.
func smokeCompare(version, baked, firstBoot string) string {
	return `{"schema_version": 1, "image": "demo", "version": "` + version + `", "profile": "slice", "stage": "converged",
  "accelerator": "tcg", "memory_mb": 4096, "measured_at": "2026-11-26T10:00:00Z", "ratio": 0.5, "recipe": "/home/op/h200.hcl",
  "baked": ` + baked + `, "first_boot": ` + firstBoot + `, "timelines": [{"milestone": "validated", "at": "2026-11-26T10:01:00Z"}]}`
}

const (
	passedIn = `{"passed": true, "validated_seconds": %s, "download_bytes": 2048, "console_log": "/tmp/x/console.log", "timeline_file": "/tmp/x/t.json"}`
	failedFB = `{"passed": false, "failure": "apt-get: could not reach deb.example.com", "download_bytes": 100, "archive_bytes": 5, "index_bytes": 7}`
)

// booted is file saying it booted the tgz of digest sum (hex).
func booted(file, sum string) string {
	return strings.Replace(file, `"schema_version": 1, `, `"schema_version": 1, "artifact_sha256": "sha256:`+sum+`", `, 1)
}

func passed(secs string) string { return strings.Replace(passedIn, "%s", secs, 1) }

func TestParseBootComparison(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	c, err := release.ParseBootComparison([]byte(smokeCompare("1.0.0", passed("30"), passed("120"))), "alice", now)
	if err != nil {
		t.Fatal(err)
	}
	// The file's ratio (0.5) is not kept: the store computes 30/120.
	if c.Ratio == nil || *c.Ratio != 0.25 || c.RecordedBy != "alice" || !c.RecordedAt.Equal(now) || *c.Baked.ValidatedSeconds != 30 || c.FirstBoot.DownloadBytes != 2048 {
		t.Errorf("parsed: %+v", c)
	}
	// What the first boot did not do, and each path's deploy, are kept.
	c, err = release.ParseBootComparison([]byte(strings.Replace(smokeCompare("1.0.0", passed("30"), strings.Replace(passed("120"), `"passed": true,`, `"passed": true, "deploy_seconds": 7.5,`, 1)),
		`"ratio": 0.5, `, `"differences": ["missing-optional nvtop"], `, 1)), "alice", now)
	if err != nil || len(c.Differences) != 1 || c.LikeForLike() || c.FirstBoot.DeploySeconds == nil || *c.FirstBoot.DeploySeconds != 7.5 {
		t.Errorf("parsed: %+v %v", c, err)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"a ratio with a failed path", smokeCompare("1.0.0", passed("30"), failedFB), "a ratio, and a path that failed"},
		{"passed without seconds", smokeCompare("1.0.0", `{"passed": true}`, passed("1")), "the baked path passed but has no validated_seconds"},
		{"passed not said", smokeCompare("1.0.0", `{"validated_seconds": 3}`, passed("1")), "the baked path says not whether it passed"},
		{"another schema", strings.Replace(smokeCompare("1.0.0", passed("1"), passed("2")), `"schema_version": 1`, `"schema_version": 2`, 1), "schema_version is 2"},
		{"two values", smokeCompare("1.0.0", passed("1"), passed("2")) + "{}", "more than one JSON value"},
		{"not JSON", "validated in 3 s", "not a smoke comparison"},
		{"a bad version", smokeCompare("../1", passed("1"), passed("2")), "not a valid version name"},
		{"too big", strings.Repeat(" ", smoke.MaxComparison+1), "more than the"},
	} {
		if _, err := release.ParseBootComparison([]byte(tc.file), "alice", now); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestRecordBootComparison(t *testing.T) {
	cs, o, _ := evidenceFixture(t)
	v, err := cs.Version(ctx, "demo", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	other, err := cs.Version(ctx, "demo", "1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	base := "sha256:" + strings.Repeat("b", 64)
	noRatio := strings.Replace(booted(smokeCompare("1.0.0", passed("30"), failedFB), v.SHA256), `"ratio": 0.5, `, `"base_sha256": "`+base+`", `, 1)
	c, err := release.RecordBootComparison(ctx, []byte(noRatio), "x.json", o)
	if err != nil {
		t.Fatal(err)
	}
	if c.Ratio != nil || c.FirstBoot.Passed || c.RecordedBy != "alice" || c.ArtifactSHA256 != "sha256:"+v.SHA256 || c.BaseSHA256 != base {
		t.Errorf("recorded: %+v", c)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"a version not in the store", booted(smokeCompare("9.9.9", passed("1"), passed("2")), v.SHA256), "demo 9.9.9 is not a version of the store"},
		{"a profile that is none", booted(strings.Replace(smokeCompare("1.0.0", passed("1"), passed("2")), `"slice"`, `"gpu"`, 1), v.SHA256), `profile "gpu" is not one of`},
		{"no artifact digest", smokeCompare("1.0.0", passed("1"), passed("2")), "says not which tgz it booted (no artifact_sha256"},
		{"another tgz", booted(smokeCompare("1.0.0", passed("1"), passed("2")), other.SHA256),
			"it booted the tgz sha256:" + other.SHA256 + ", and the store's demo 1.0.0 is sha256:" + v.SHA256},
		{"not a digest", strings.Replace(booted(smokeCompare("1.0.0", passed("1"), passed("2")), v.SHA256), "sha256:", "md5:", 1), `artifact_sha256 "md5:`},
	} {
		_, err := release.RecordBootComparison(ctx, []byte(tc.file), "y.json", o)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "y.json") {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	got, err := release.BootComparisons(ctx, cs, "demo", "1.0.0")
	if err != nil || len(got) != 1 || got[0].FirstBoot.Failure == "" {
		t.Errorf("read back: %+v %v", got, err)
	}
	if got, err := release.BootComparisons(ctx, nil, "demo", "1.0.0"); err != nil || got != nil {
		t.Errorf("without a catalog: %+v %v", got, err)
	}
}
