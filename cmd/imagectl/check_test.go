package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
)

// TestCheckWaivers: imagectl check applies the waivers recorded in the
// manifest beside the tgz; only errors left unwaived fail it.
func TestCheckWaivers(t *testing.T) {
	dir := t.TempDir()
	tgz := filepath.Join(dir, "lab-1.tgz")
	f, err := os.Create(tgz)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	osRelease := "ID=debian\n"
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./etc/os-release", Mode: 0o644, Size: int64(len(osRelease))})
	tw.Write([]byte(osRelease))
	tw.Close()
	zw.Close()
	f.Close()

	out, _, code := imagectl(t, nil, "check", tgz, "-o", "json")
	var res struct {
		Findings []struct{ Check, Severity string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 {
		t.Fatalf("check without waivers: exit %d, %v\n%s", code, err, out)
	}
	var errs []string
	for _, f := range res.Findings {
		if f.Severity == "error" {
			errs = append(errs, f.Check)
		}
	}
	if len(errs) < 2 {
		t.Fatalf("want several errors on a bare Debian tree, got %v", errs)
	}
	writeManifest := func(waive []string) {
		m := manifest.Manifest{SchemaVersion: manifest.SchemaVersion, Image: manifest.Image{Name: "lab", Version: "1"}}
		for _, c := range waive {
			m.DeployWaivers = append(m.DeployWaivers, manifest.Waiver{Check: c, Reason: "lab image: " + c})
		}
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "lab-1.manifest.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	writeManifest(errs[1:])
	out, _, code = imagectl(t, nil, "check", tgz)
	if code != 1 || !strings.Contains(out, "error: "+errs[0]+":") || !strings.Contains(out, "(waived: lab image: "+errs[1]+")") {
		t.Errorf("one error left unwaived: exit %d\n%s", code, out)
	}
	writeManifest(errs)
	out, _, code = imagectl(t, nil, "check", tgz)
	if code != 0 || strings.Count(out, "(waived: ") != len(errs) {
		t.Errorf("every error waived: exit %d\n%s", code, out)
	}
}
