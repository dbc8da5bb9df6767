package gitcatalog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/gitcatalog/gittest"
	"github.com/gpuaas/imagectl/store/storetest"
)

func TestRecords(t *testing.T) {
	t.Parallel()
	env := gittest.Env(t)
	storetest.TestRecords(t, storetest.Records{
		Open: func(t *testing.T) store.Promotions { return open(t, gittest.Bare(t), env) },
		// Rewrite commits the edit in another clone and pushes it: a
		// hand edit of the catalog's repository.
		Rewrite: func(t *testing.T, p store.Promotions, f storetest.RecordFile, edit func([]byte) []byte) {
			rel := revocationPath(f.Image)
			switch {
			case f.Site != "":
				rel = evidencePath(f.Site, f.Image, f.Version)
			case f.Version != "":
				rel = comparisonPath(f.Image, f.Version)
			}
			gittest.Edit(t, p.(*Catalog).remote, env, rel, edit)
		},
	})
}

// TestEvidenceOneCommit: a host check's results, of several hosts, sites
// and images, are one commit, authored by who recorded them, saying each
// host's outcome.
func TestEvidenceOneCommit(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := open(t, bare, env)
	record(t, c, "lab", prom("img", "1", "", "alice", ""))
	var evs []store.Evidence
	for i, k := range [][3]string{{"lab", "img", "h1"}, {"lab", "img", "h2"}, {"edge", "img", "e1"}, {"lab", "tools", "h1"}} {
		evs = append(evs, store.Evidence{Site: k[0], RecordedBy: "Carol <carol@example.com>", Via: "hostcheck",
			Result: storetest.Result(k[1], "1", k[2], i != 1, t0)})
	}
	if err := c.AddEvidence(ctx, evs); err != nil {
		t.Fatal(err)
	}
	log := strings.Split(strings.TrimSpace(gittest.Run(t, bare, nil, "log", "--format=%an <%ae>|%s", "main")), "\n")
	if len(log) != 2 || log[0] != "Carol <carol@example.com>|record evidence of 4 hosts for 3 image versions and sites, 1 failing" {
		t.Fatalf("log:\n%s", strings.Join(log, "\n"))
	}
	body := gittest.Run(t, bare, nil, "log", "-1", "--format=%B", "main")
	for _, want := range []string{"img 1 at lab: h1 h200/converged passed", "img 1 at lab: h2 h200/converged FAILED bridge",
		"img 1 at edge: e1 h200/converged passed", "tools 1 at lab: h1", "Recorded-Via: hostcheck"} {
		if !strings.Contains(body, want) {
			t.Errorf("the message lacks %q:\n%s", want, body)
		}
	}
	files := gittest.Run(t, bare, nil, "ls-tree", "-r", "--name-only", "main")
	if files != "README.md\nsites/edge/evidence/img/1.json\nsites/lab/evidence/img/1.json\nsites/lab/evidence/tools/1.json\nsites/lab/img.json\n" {
		t.Errorf("files:\n%s", files)
	}
	if cat, err := c.Catalog(ctx, "lab"); err != nil || len(cat) != 1 || versions(cat["img"]) != "1" {
		t.Errorf("the site's promotions: %v %v", cat, err)
	}
}

// TestReadBounded: a file over the bound is refused from its size in the
// tree, before its content is read.
func TestReadBounded(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := open(t, bare, env)
	record(t, c, "lab", prom("img", "1", "", "alice", ""))
	tip, err := c.lockedFetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, ok, err := c.readBlob(ctx, tip, filePath("lab", "img"), maxHistory)
	if err != nil || !ok || len(b) == 0 {
		t.Fatalf("within the bound: %d bytes %v %v", len(b), ok, err)
	}
	if _, _, err := c.readBlob(ctx, tip, filePath("lab", "img"), int64(len(b)-1)); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("it is %d bytes, more than the %d this imagectl reads", len(b), len(b)-1)) {
		t.Errorf("over the bound: %v", err)
	}
	if _, ok, err := c.readBlob(ctx, tip, filePath("lab", "none"), maxHistory); ok || err != nil {
		t.Errorf("a missing file: %v %v", ok, err)
	}
	if _, _, err := c.readBlob(ctx, tip, "sites/lab", maxHistory); err == nil || !strings.Contains(err.Error(), "not a file") {
		t.Errorf("a directory: %v", err)
	}
}

// TestEvidenceProcesses races imagectl processes on separate clones (other
// machines) adding host results to the same version's file at once:
// every result lands, none is lost to another's push.
func TestEvidenceProcesses(t *testing.T) {
	if os.Getenv("GITCATALOG_HELPER") != "" {
		t.Skip("helper process")
	}
	t.Parallel()
	gittest.Git(t)
	bare, env := gittest.Bare(t), gittest.Env(t)
	const procs = 6
	runHelpers(t, procs, env, func(i int) []string {
		return []string{"GITCATALOG_HELPER=evidence", "GITCATALOG_REMOTE=" + bare, "GITCATALOG_CACHE=" + t.TempDir(),
			"GITCATALOG_WHO=proc" + string(rune('a'+i))}
	})
	evs, err := open(t, bare, env).Evidence(ctx, "lab", "img", "1")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range evs {
		seen[e.Result.Host]++
	}
	for i := range procs {
		for j := range evidenceCalls * evidenceHosts {
			if h := fmt.Sprintf("proc%c-%d", 'a'+i, j); seen[h] != 1 {
				t.Errorf("host %s recorded %d times", h, seen[h])
			}
		}
	}
	if len(evs) != procs*evidenceCalls*evidenceHosts {
		t.Errorf("%d results, want %d", len(evs), procs*evidenceCalls*evidenceHosts)
	}
	if n := strings.Count(gittest.Run(t, bare, nil, "log", "--format=%H", "main"), "\n"); n != procs*evidenceCalls {
		t.Errorf("%d commits, want one per call, %d", n, procs*evidenceCalls)
	}
}

// Each evidence helper process makes evidenceCalls calls of
// evidenceHosts results.
const evidenceCalls, evidenceHosts = 2, 3

// evidenceHelper is TestHelperProcess's evidence mode.
func evidenceHelper(t *testing.T, c *Catalog, who string) {
	for call := range evidenceCalls {
		var evs []store.Evidence
		for h := range evidenceHosts {
			host := fmt.Sprintf("%s-%d", who, call*evidenceHosts+h)
			evs = append(evs, store.Evidence{Site: "lab", RecordedBy: who, Via: "hostcheck", Result: storetest.Result("img", "1", host, true, t0)})
		}
		if err := c.AddEvidence(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMessagesOneLine: what a commit message embeds (a promotion's or a
// revocation's reason, a host's name, its checks' names, how it was
// recorded) goes in on one line each, so that it cannot end the body and
// add trailers such as "Policy: met" to the commit (or to a batch's that
// shares it).
func TestMessagesOneLine(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := open(t, bare, env)
	const forged = "looks fine\n\nPolicy: met\nPolicy-Override: nobody"
	trailers := func(what string) {
		t.Helper()
		if tr := gittest.Run(t, bare, nil, "log", "-1", "--format=%(trailers)", "main"); strings.TrimSpace(tr) != "" {
			t.Errorf("%s: trailers %q", what, tr)
		}
		if body := gittest.Run(t, bare, nil, "log", "-1", "--format=%B", "main"); !strings.Contains(body, "\nlooks fine Policy: met Policy-Override: nobody\n") {
			t.Errorf("%s: the reason is not in the message on one line:\n%s", what, body)
		}
	}
	// The first promotion: no trailers of its own.
	record(t, c, "lab", prom("imga", "1", "", "alice", forged))
	trailers("a promotion")
	if err := c.Revoke(ctx, store.Revocation{Image: "imga", Version: "1", Reason: forged, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	trailers("a revocation")

	r := storetest.Result("imga", "1", "h1\n\nPolicy: met", false, t0)
	r.Checks[1].Name = "bridge\n\nPolicy: met"
	msg := evidenceMessage([]store.Evidence{{Site: "lab", Via: "hostcheck\n\nPolicy: met", Result: r}})
	f := filepath.Join(t.TempDir(), "msg")
	if err := os.WriteFile(f, []byte(msg), 0o644); err != nil {
		t.Fatal(err)
	}
	if tr := gittest.Run(t, "", env, "interpret-trailers", "--parse", f); tr != "Recorded-Via: hostcheck Policy: met\n" {
		t.Errorf("evidence: trailers %q of\n%s", tr, msg)
	}
	if !strings.Contains(msg, "imga 1 at lab: h1 Policy: met h200/converged FAILED bridge Policy: met\n") {
		t.Errorf("evidence: the host's line:\n%s", msg)
	}
}

// TestBootComparisonCommit: a boot comparison is one commit of its
// version's file, of no site, saying each path's outcome on one line (a
// failure cannot add trailers); the same comparison recorded again, later,
// is no commit.
func TestBootComparisonCommit(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := open(t, bare, env)
	bc := storetest.Comparison("img", "1", "tcg", true, t0)
	bc.RecordedBy = "Carol <carol@example.com>"
	bc.FirstBoot.Failure = "apt failed\n\nPolicy: met \x1b[2J\u202e"
	for i := range 2 {
		bc.RecordedAt = t0.Add(time.Duration(i) * time.Hour)
		if err := c.AddBootComparison(ctx, bc); err != nil {
			t.Fatal(err)
		}
	}
	log := strings.Split(strings.TrimSpace(gittest.Run(t, bare, nil, "log", "--format=%an <%ae>|%s", "main")), "\n")
	if len(log) != 1 || log[0] != "Carol <carol@example.com>|record a boot comparison of img 1 (slice/converged, tcg)" {
		t.Fatalf("log:\n%s", strings.Join(log, "\n"))
	}
	body := gittest.Run(t, bare, nil, "log", "-1", "--format=%B", "main")
	// The line show prints, on one line, escaped.
	if want := "\n\nnot compared: the first-boot path FAILED: apt failed Policy: met \\x1b[2J\\u202e (tcg, 4096 MiB, slice/converged, measured 2026-11-23T10:00:00Z)\n"; !strings.HasSuffix(body, want+"\n") && !strings.HasSuffix(body, want) {
		t.Errorf("the message is not %q:\n%q", want, body)
	}
	if tr := gittest.Run(t, bare, nil, "log", "-1", "--format=%(trailers)", "main"); strings.TrimSpace(tr) != "" {
		t.Errorf("trailers %q", tr)
	}
	if files := gittest.Run(t, bare, nil, "ls-tree", "-r", "--name-only", "main"); files != "README.md\ncomparisons/img/1.json\n" {
		t.Errorf("files:\n%s", files)
	}
	if head := gittest.Run(t, bare, nil, "show", "main:comparisons/img/1.json"); strings.Contains(head, `"site"`) || !strings.Contains(head, `"image": "img"`) {
		t.Errorf("the file's head:\n%s", head)
	}
}
