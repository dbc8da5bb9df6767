package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
)

var ctx = context.Background()

func publish(t *testing.T, s *store.Dir, image, version string, opts storetest.Options) (*store.Version, error) {
	t.Helper()
	tgz, man := storetest.Artifact(t, t.TempDir(), image, version, opts)
	return s.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{})
}

// entries lists what is in a directory tree, relative to it.
func entries(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != root {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func TestPublish(t *testing.T) {
	s := store.NewDir(filepath.Join(t.TempDir(), "store"))
	signer, _ := storetest.Keys(t, t.TempDir())
	v, err := publish(t, s, "demo", "1.0.0", storetest.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	if v.Existed || !v.Signed() || v.Image != "demo" || v.Version != "1.0.0" || len(v.Files) != 7 {
		t.Fatalf("version %+v", v)
	}
	want := []string{"demo-1.0.0-validate.sh", "demo-1.0.0.manifest.json", "demo-1.0.0.manifest.json.sig", "demo-1.0.0.manifest.json.sigstore.json",
		"demo-1.0.0.tgz", "demo-1.0.0.tgz.sig", "demo-1.0.0.tgz.sigstore.json", "version.json"}
	got, _ := os.ReadDir(v.Dir)
	var names []string
	for _, e := range got {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("version directory holds %v, want %v", names, want)
	}
	m, err := manifest.Read(v.Manifest)
	if err != nil || m.Artifact.SHA256 != v.SHA256 || m.Artifact.Size != v.Size {
		t.Errorf("manifest %v: %+v vs %s %d", err, m.Artifact, v.SHA256, v.Size)
	}
	if st, err := os.Stat(v.ValidationScript); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("validation script: %v %v", st.Mode(), err)
	}
	got2, err := s.Version(ctx, "demo", "1.0.0")
	if err != nil || got2.Tarball != v.Tarball || got2.SHA256 != v.SHA256 {
		t.Errorf("Version: %+v %v", got2, err)
	}
	if _, err := s.Version(ctx, "demo", "9.9.9"); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "demo version 9.9.9 is not in the store") {
		t.Errorf("missing version: %v", err)
	}
	if _, err := publish(t, s, "demo", "1.1.0", storetest.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := publish(t, s, "other", "20260101.1", storetest.Options{}); err != nil {
		t.Fatal(err)
	}
	imgs, err := s.Images(ctx)
	if err != nil || len(imgs) != 2 || imgs[0].Name != "demo" || len(imgs[0].Versions) != 2 || imgs[0].Versions[1].Version != "1.1.0" || imgs[1].Name != "other" {
		t.Errorf("Images: %+v %v", imgs, err)
	}
	if l, err := s.Latest(ctx, "demo"); err != nil || l.Version != "1.1.0" {
		t.Errorf("Latest: %+v %v", l, err)
	}
	if l, err := s.Latest(ctx, "nothing"); err != nil || l != nil {
		t.Errorf("Latest of nothing: %+v %v", l, err)
	}
	if e := entries(t, filepath.Join(s.Root, ".staging")); len(e) != 0 {
		t.Errorf("staging not empty: %v", e)
	}
}

func TestPublishIsImmutable(t *testing.T) {
	s := store.NewDir(t.TempDir())
	dir := t.TempDir()
	tgz, man := storetest.Artifact(t, dir, "demo", "1.0.0", storetest.Options{})
	first, err := s.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(first.Dir, "version.json"))

	// The same bytes again, from elsewhere and signed this time: a no-op.
	signer, _ := storetest.Keys(t, t.TempDir())
	again, err := publish(t, s, "demo", "1.0.0", storetest.Options{Signer: signer})
	if err != nil || !again.Existed || again.Signed() {
		t.Fatalf("identical publish: %+v %v", again, err)
	}
	// Other bytes under the same version: refused, nothing changes.
	_, err = publish(t, s, "demo", "1.0.0", storetest.Options{Deploy: []manifest.DeployFinding{{Check: "x", Severity: "warning", Message: "m"}}})
	if !errors.Is(err, store.ErrExists) || !strings.Contains(err.Error(), "its manifest has sha256") || !strings.Contains(err.Error(), "publish under a new version") {
		t.Fatalf("different manifest: %v", err)
	}
	os.Remove(strings.TrimSuffix(tgz, ".tgz") + "-validate.sh")
	if _, err := s.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("without the validation script: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(first.Dir, "version.json"))
	if string(before) != string(after) {
		t.Error("the index changed")
	}
}

func TestPublishRefusesBadInput(t *testing.T) {
	s := store.NewDir(t.TempDir())
	dir := t.TempDir()
	tgz, man := storetest.Artifact(t, dir, "demo", "1.0.0", storetest.Options{})
	f, _ := os.OpenFile(tgz, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("x"))
	f.Close()
	_, err := s.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{})
	if err == nil || !strings.Contains(err.Error(), "is not the tgz its manifest describes") {
		t.Errorf("tampered tgz: %v", err)
	}
	_, err = s.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: filepath.Join(dir, "nope.json")}, store.PublishOptions{})
	if err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("missing manifest: %v", err)
	}
	// A manifest naming a path outside the store.
	tgz2, man2 := storetest.Artifact(t, t.TempDir(), "demo", "2.0.0", storetest.Options{})
	manifesttest.Edit(t, man2, func(m *manifest.Manifest) { m.Image.Version = "../../etc" })
	_, err = s.Publish(ctx, manifest.Files{Tarball: tgz2, Manifest: man2}, store.PublishOptions{})
	if err == nil || !strings.Contains(err.Error(), `"../../etc" is not a valid version name`) {
		t.Errorf("bad version: %v", err)
	}
	// Cancelled: nothing published.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	tgz3, man3 := storetest.Artifact(t, t.TempDir(), "demo", "3.0.0", storetest.Options{})
	if _, err := s.Publish(cctx, manifest.Files{Tarball: tgz3, Manifest: man3}, store.PublishOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if e := entries(t, s.Root); strings.Join(e, " ") != ".staging" {
		t.Errorf("the store holds %v after failed publishes", e)
	}
}

func TestPublishMove(t *testing.T) {
	s := store.NewDir(t.TempDir())
	stage, remove, err := s.Staging()
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	tgz, man := storetest.Artifact(t, stage, "demo", "1.0.0", storetest.Options{})
	v, err := s.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{Move: true})
	if err != nil {
		t.Fatal(err)
	}
	if e := entries(t, stage); len(e) != 0 {
		t.Errorf("moved files left behind: %v", e)
	}
	if _, err := os.Stat(v.Tarball); err != nil {
		t.Error(err)
	}
}

func TestNextVersion(t *testing.T) {
	s := store.NewDir(t.TempDir())
	now := time.Date(2026, 11, 22, 23, 59, 0, 0, time.FixedZone("x", -3600))
	v, err := s.NextVersion(ctx, "demo", now)
	if err != nil || v != "20261123.1" {
		t.Fatalf("first: %q %v", v, err)
	}
	for _, ver := range []string{"20261123.1", "20261123.9", "20261122.30"} {
		if _, err := publish(t, s, "demo", ver, storetest.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := s.NextVersion(ctx, "demo", now); err != nil || v != "20261123.10" {
		t.Errorf("next: %q %v", v, err)
	}
}

// StartBuild: a generated version, the parent, staging inside the store,
// publishing by rename, and a published version refused before building.
func TestStartBuild(t *testing.T) {
	s := store.NewDir(filepath.Join(t.TempDir(), "store"))
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	first, err := store.StartBuild(ctx, s, store.BuildOptions{Image: "demo", DryRun: true, Stage: true, Now: now})
	if err != nil || first.Version != "20261123.1" || !first.Generated || first.Parent != "" || first.OutputDir != "" {
		t.Fatalf("dry run on an empty store: %+v %v", first, err)
	}
	if _, err := os.Stat(s.Root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run created the store: %v", err)
	}
	if _, err := publish(t, s, "demo", "20261123.1", storetest.Options{}); err != nil {
		t.Fatal(err)
	}

	b, err := store.StartBuild(ctx, s, store.BuildOptions{Image: "demo", Stage: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Version != "20261123.2" || !b.Generated || b.Parent != "20261123.1" || !strings.HasPrefix(b.OutputDir, filepath.Join(s.Root, ".staging")+"/") {
		t.Fatalf("build %+v", b)
	}
	signer, _ := storetest.Keys(t, t.TempDir())
	tgz, man := storetest.Artifact(t, b.OutputDir, "demo", b.Version, storetest.Options{Signer: signer})
	v, err := b.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man})
	if err != nil {
		t.Fatal(err)
	}
	if v.Version != "20261123.2" || !v.Signed() || v.ValidationScript == "" || v.Path(tgz+".sig") != v.Tarball+".sig" {
		t.Errorf("published %+v", v)
	}
	if e := entries(t, b.OutputDir); len(e) != 0 {
		t.Errorf("publishing copied rather than moved: %v left", e)
	}
	b.Close()
	if _, err := os.Stat(b.OutputDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the staging directory: %v", err)
	}

	// A given version: kept, refused when published, planned anyway.
	if _, err := store.StartBuild(ctx, s, store.BuildOptions{Image: "demo", Version: "20261123.2"}); err == nil ||
		!strings.Contains(err.Error(), "demo 20261123.2 is already in the store") {
		t.Errorf("building a published version: %v", err)
	}
	dry, err := store.StartBuild(ctx, s, store.BuildOptions{Image: "demo", Version: "20261123.2", DryRun: true})
	if err != nil || dry.Generated || dry.Parent != "" {
		t.Errorf("dry run of the latest version: %+v %v", dry, err)
	}
	given, err := store.StartBuild(ctx, s, store.BuildOptions{Image: "demo", Version: "2.0.0"})
	if err != nil || given.Version != "2.0.0" || given.Generated || given.Parent != "20261123.2" || given.OutputDir != "" {
		t.Errorf("a given version, written elsewhere: %+v %v", given, err)
	}
	if _, err := store.StartBuild(ctx, s, store.BuildOptions{Image: "Not/An/Image"}); err == nil {
		t.Error("a bad image name was accepted")
	}
}

func TestStoreConcurrentGoroutines(t *testing.T) {
	s := store.NewDir(t.TempDir())
	const n = 8
	// The same version with the same bytes from n goroutines: one
	// publishes, the others find it there.
	var wg sync.WaitGroup
	arts := make([][2]string, n)
	for i := range arts {
		arts[i][0], arts[i][1] = storetest.Artifact(t, t.TempDir(), "demo", "1.0.0", storetest.Options{})
	}
	results := make([]*store.Version, n)
	errs := make([]error, n)
	// publishAll publishes the n artifacts at once.
	publishAll := func() {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = s.Publish(ctx, manifest.Files{Tarball: arts[i][0], Manifest: arts[i][1]}, store.PublishOptions{})
			}()
		}
		wg.Wait()
	}
	publishAll()
	fresh := 0
	for i := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !results[i].Existed {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d publishes wrote the version, want 1", fresh)
	}
	// Different bytes under one version: exactly one wins.
	for i := range arts {
		arts[i][0], arts[i][1] = storetest.Artifact(t, t.TempDir(), "demo", "2.0.0",
			storetest.Options{Deploy: []manifest.DeployFinding{{Check: strconv.Itoa(i), Severity: "warning"}}})
	}
	publishAll()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrExists):
			t.Errorf("unexpected error: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d publishes of different bytes under one version succeeded, want 1", won)
	}
	// Promotions from n goroutines, each retrying on conflict.
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = promoteRetrying(s, "lab", "demo", fmt.Sprintf("g%d", i), 5)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkChain(t, s, "lab", "demo", n*5)
}

// promoteRetrying records k promotions of made-up versions, retrying each
// when another writer got there first.
func promoteRetrying(s *store.Dir, site, image, who string, k int) error {
	for j := 0; j < k; j++ {
		for {
			h, err := s.History(ctx, site, image)
			if err != nil {
				return err
			}
			cur, _ := store.State(h)
			err = s.Record(ctx, site, store.Promotion{Image: image, Version: fmt.Sprintf("%s.%d", who, j), Previous: cur, By: who})
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// checkChain checks a history has n entries, each following the one
// before it.
func checkChain(t *testing.T, s *store.Dir, site, image string, n int) {
	t.Helper()
	h, err := s.History(ctx, site, image)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != n {
		t.Fatalf("%d promotions recorded, want %d", len(h), n)
	}
	prev := ""
	for i, p := range h {
		if p.Previous != prev {
			t.Fatalf("entry %d follows %q, but %q came before it", i, p.Previous, prev)
		}
		prev = p.Version
	}
}

// TestStoreConcurrentProcesses runs this test binary several times at
// once, each publishing and promoting into one store.
func TestStoreConcurrentProcesses(t *testing.T) {
	if os.Getenv("STORETEST_HELPER") != "" {
		t.Skip("helper process")
	}
	root := t.TempDir()
	src := t.TempDir()
	tgz, man := storetest.Artifact(t, src, "demo", "1.0.0", storetest.Options{})
	const n = 4
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "STORETEST_HELPER=1", "STORETEST_ROOT="+root, "STORETEST_TGZ="+tgz, "STORETEST_MANIFEST="+man,
			"STORETEST_WHO=p"+strconv.Itoa(i))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i].String())
		}
	}
	s := store.NewDir(root)
	imgs, err := s.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// demo 1.0.0 from every process, and each process's own version.
	if len(imgs) != 1 || len(imgs[0].Versions) != n+1 {
		t.Fatalf("images %+v", imgs)
	}
	checkChain(t, s, "lab", "demo", n*10)
	if e := entries(t, filepath.Join(root, ".staging")); len(e) != 0 {
		t.Errorf("staging not empty: %v", e)
	}
}

func TestHelperProcess(t *testing.T) {
	if os.Getenv("STORETEST_HELPER") == "" {
		t.Skip("run by TestStoreConcurrentProcesses")
	}
	s := store.NewDir(os.Getenv("STORETEST_ROOT"))
	who := os.Getenv("STORETEST_WHO")
	if _, err := s.Publish(ctx, manifest.Files{Tarball: os.Getenv("STORETEST_TGZ"), Manifest: os.Getenv("STORETEST_MANIFEST")}, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := publish(t, s, "demo", "2.0.0-"+who, storetest.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := promoteRetrying(s, "lab", "demo", who, 10); err != nil {
		t.Fatal(err)
	}
}

func TestState(t *testing.T) {
	p := func(v string) store.Promotion { return store.Promotion{Version: v} }
	rb := func(v string) store.Promotion { return store.Promotion{Version: v, Rollback: true} }
	for _, tc := range []struct {
		h             []store.Promotion
		current, back string
	}{
		{nil, "", ""},
		{[]store.Promotion{p("a")}, "a", ""},
		{[]store.Promotion{p("a"), p("b")}, "b", "a"},
		{[]store.Promotion{p("a"), p("b"), p("c"), rb("b")}, "b", "a"},
		{[]store.Promotion{p("a"), p("b"), p("c"), rb("b"), rb("a")}, "a", ""},
		{[]store.Promotion{p("a"), p("b"), rb("a"), p("c")}, "c", "a"},
		{[]store.Promotion{p("a"), p("b"), p("b")}, "b", "a"},
		// A rollback that skipped revoked versions takes them all off.
		{[]store.Promotion{p("a"), p("b"), p("c"), p("d"), rb("b")}, "b", "a"},
		{[]store.Promotion{p("a"), p("b"), p("c"), rb("a"), p("d")}, "d", "a"},
		// A rollback to a version not on the stack (none is recorded so)
		// is a promotion of it.
		{[]store.Promotion{p("a"), p("b"), rb("x")}, "x", "b"},
	} {
		cur, back := store.State(tc.h)
		if cur != tc.current || back != tc.back {
			t.Errorf("State(%v) = %q, %q, want %q, %q", tc.h, cur, back, tc.current, tc.back)
		}
	}
}

func TestRecordRefuses(t *testing.T) {
	s := store.NewDir(t.TempDir())
	if err := s.Record(ctx, "lab", store.Promotion{Image: "demo", Version: "1", By: "me"}); err != nil {
		t.Fatal(err)
	}
	err := s.Record(ctx, "lab", store.Promotion{Image: "demo", Version: "2", Previous: "0", By: "me"})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), `it runs "1" now, not "0"`) {
		t.Errorf("stale previous: %v", err)
	}
	if err := s.Record(ctx, "../x", store.Promotion{Image: "demo", Version: "2"}); err == nil {
		t.Error("a bad site name was accepted")
	}
	os.WriteFile(filepath.Join(s.Root, ".sites", "lab.json"), []byte("{"), 0o644)
	if _, err := s.History(ctx, "lab", "demo"); err == nil || !strings.Contains(err.Error(), "lab.json") {
		t.Errorf("corrupt catalog: %v", err)
	}
}
