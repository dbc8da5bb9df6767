package upload_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/upload"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// built writes a tgz of random bytes and its manifest, as a build does.
func built(t *testing.T, size int) string {
	t.Helper()
	return storetest.Random(t, t.TempDir(), size)
}

func simSite(sim *maassim.Server) *sites.Site {
	return &sites.Site{Name: "sim", URL: sim.URL, APIKeyEnv: "SIM_KEY", Architecture: "amd64/generic",
		Timeout: 5 * time.Second, LastChunkTimeout: 5 * time.Second, CompleteTimeout: 5 * time.Second}
}

func quick(c *maas.Config) {
	c.ChunkSize, c.PollInterval = 32<<10, time.Millisecond
	c.Backoff = func(int) time.Duration { return time.Millisecond }
}

func TestArtifact(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	tgz := built(t, 100<<10)
	var verified []string
	var phases []string
	res, err := upload.Artifact(context.Background(), simSite(sim), []string{"SIM_KEY=" + sim.AdminKey}, tgz, upload.Options{
		BaseImage: "ubuntu/noble", Configure: quick,
		Verify: func(ctx context.Context, tgz, m string) error {
			verified = append(verified, tgz, m)
			return nil
		},
		Events: func(e event.Event) {
			if e.Type == "phase" && e.Status == "ok" {
				phases = append(phases, e.Phase)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != "demo-1-2-0" || res.DistroSeries != "custom/demo-1-2-0" || res.Title != "Demo 1.2.0" || res.Skipped || res.Site != "sim" {
		t.Errorf("result %+v", res)
	}
	if len(verified) != 2 || verified[0] != tgz || verified[1] != strings.TrimSuffix(tgz, ".tgz")+".manifest.json" {
		t.Errorf("Verify called with %v", verified)
	}
	if strings.Join(phases, " ") != "verify lookup create upload complete" {
		t.Errorf("phases %v", phases)
	}
	rs := sim.Resources()
	r := rs[len(rs)-1]
	if r.Name != "demo-1-2-0" || r.Title != "Demo 1.2.0" || !r.Sets[0].Files[0].Verified {
		t.Errorf("MAAS holds %+v", r)
	}
}

// Nothing reaches MAAS when the artifact does not match its manifest or
// the Verify hook refuses it.
func TestArtifactRefusedBeforeSending(t *testing.T) {
	errSig := errors.New("signature does not verify")
	for _, tc := range []struct {
		name   string
		break_ func(tgz string)
		opts   upload.Options
		want   string
	}{
		{name: "tampered", break_: func(tgz string) {
			// Flip a byte: writing a fixed one left the random content
			// unchanged one run in 256.
			b, err := os.ReadFile(tgz)
			if err != nil {
				t.Fatal(err)
			}
			b[10] ^= 0xff
			if err := os.WriteFile(tgz, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "its manifest says"},
		{name: "truncated", break_: func(tgz string) { os.Truncate(tgz, 1000) }, want: "has 1000 bytes, its manifest says"},
		{name: "no manifest", break_: func(tgz string) { os.Remove(manifest.FilesBeside(tgz).Manifest) }, want: "manifest.json"},
		{name: "signature", opts: upload.Options{Verify: func(context.Context, string, string) error { return errSig }}, want: errSig.Error()},
		{name: "no base image", opts: upload.Options{BaseImage: "-"}, want: "no base image"},
		{name: "other architecture", opts: upload.Options{Name: "arm"}, want: "site \"sim\" takes arm64/generic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := maassim.New(maassim.Options{})
			defer sim.Close()
			tgz := built(t, 50<<10)
			if tc.break_ != nil {
				tc.break_(tgz)
			}
			site := simSite(sim)
			opts := tc.opts
			switch opts.BaseImage {
			case "":
				opts.BaseImage = "ubuntu/noble"
			case "-":
				opts.BaseImage = ""
			}
			if opts.Name == "arm" {
				opts.Name, site.Architecture = "", "arm64/generic"
			}
			opts.Configure = quick
			_, err := upload.Artifact(context.Background(), site, []string{"SIM_KEY=" + sim.AdminKey}, tgz, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			for _, op := range []maassim.Op{maassim.OpList, maassim.OpGet, maassim.OpCreate, maassim.OpChunk, maassim.OpLastChunk} {
				if n := sim.Count(op); n != 0 {
					t.Errorf("%d %s requests reached MAAS", n, op)
				}
			}
		})
	}
}

// The manifest's maas section names the boot resource and its base image:
// no BaseImage or Name needed.
func TestArtifactFromManifestMAAS(t *testing.T) {
	sim := maassim.New(maassim.Options{CompleteAfterGets: -1})
	defer sim.Close()
	tgz := built(t, 10<<10)
	man := manifest.FilesBeside(tgz).Manifest
	manifesttest.Edit(t, man, func(m *manifest.Manifest) {
		m.MAAS = &manifest.MAAS{Name: "custom/h200-host", Title: "H200 host 1.2.0", BaseImage: "ubuntu/jammy", Filetype: "tgz"}
	})
	res, err := upload.Artifact(context.Background(), simSite(sim), []string{"SIM_KEY=" + sim.AdminKey}, tgz, upload.Options{Configure: quick})
	if err != nil {
		t.Fatal(err)
	}
	rs := sim.Resources()
	r := rs[len(rs)-1]
	if res.Name != "h200-host-1-2-0" || res.DistroSeries != "custom/h200-host-1-2-0" || r.Title != "H200 host 1.2.0" || r.BaseImage != "ubuntu/jammy" {
		t.Errorf("result %+v, MAAS holds %+v", res, r)
	}
	// --base-image still overrides it.
	tgz2 := built(t, 10<<10)
	os.Rename(man, manifest.FilesBeside(tgz2).Manifest)
	os.Rename(tgz, tgz2)
	sim2 := maassim.New(maassim.Options{CompleteAfterGets: -1})
	defer sim2.Close()
	if _, err := upload.Artifact(context.Background(), simSite(sim2), []string{"SIM_KEY=" + sim2.AdminKey}, tgz2, upload.Options{Configure: quick, BaseImage: "ubuntu/noble"}); err != nil {
		t.Fatal(err)
	}
	rs = sim2.Resources()
	if r := rs[len(rs)-1]; r.BaseImage != "ubuntu/noble" {
		t.Errorf("override: MAAS holds %+v", r)
	}
}

// TestArtifactContent uploads a tgz read at offsets (a store version's
// stream) whose path does not exist: nothing is hashed first, and bytes
// that do not match are never completed in MAAS.
func TestArtifactContent(t *testing.T) {
	sim := maassim.New(maassim.Options{CompleteAfterGets: -1})
	defer sim.Close()
	tgz := built(t, 200<<10)
	b, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(manifest.FilesBeside(tgz).Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tgz); err != nil {
		t.Fatal(err)
	}
	content := func(b []byte) *upload.Content {
		r, err := digest.NewCheckedReaderAt(bytes.NewReader(b), int64(len(b)), m.Artifact.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		return &upload.Content{R: r, SHA256: m.Artifact.SHA256, Size: m.Artifact.Size}
	}
	env := []string{"SIM_KEY=" + sim.AdminKey}
	opts := upload.Options{Configure: quick, BaseImage: "ubuntu/noble", Content: content(bytes.Clone(b))}
	// Other bytes than the digest says: refused at the last chunk, and the
	// incomplete resource deleted.
	bad := bytes.Clone(b)
	bad[100] ^= 1
	opts.Content = content(bad)
	if _, err := upload.Artifact(context.Background(), simSite(sim), env, tgz, opts); err == nil || !strings.Contains(err.Error(), "refusing its last bytes") {
		t.Fatalf("tampered content: %v", err)
	}
	if rs := sim.Resources(); rs[len(rs)-1].Type == "Uploaded" {
		t.Fatalf("MAAS left holding %+v", rs[len(rs)-1])
	}
	// A digest other than the manifest's: refused before MAAS is asked.
	opts.Content = &upload.Content{R: bytes.NewReader(b), SHA256: strings.Repeat("0", 64), Size: int64(len(b))}
	lists := sim.Count(maassim.OpList)
	if _, err := upload.Artifact(context.Background(), simSite(sim), env, tgz, opts); err == nil || !strings.Contains(err.Error(), "its manifest says") || sim.Count(maassim.OpList) != lists {
		t.Fatalf("other digest: %v", err)
	}
	opts.Content = content(b)
	res, err := upload.Artifact(context.Background(), simSite(sim), env, tgz, opts)
	if err != nil || res.Skipped || res.Sent != int64(len(b)) {
		t.Fatalf("upload: %+v %v", res, err)
	}
}
