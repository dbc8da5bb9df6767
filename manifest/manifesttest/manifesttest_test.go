package manifesttest

import (
	"path/filepath"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
)

func TestWriteAndEdit(t *testing.T) {
	p := Write(t, filepath.Join(t.TempDir(), "x-1.manifest.json"),
		&manifest.Manifest{SchemaVersion: manifest.SchemaVersion, Image: manifest.Image{Name: "x", Version: "1"}})
	Edit(t, p, func(m *manifest.Manifest) { m.Image.Version = "2" })
	m, err := manifest.Read(p)
	if err != nil || m.Image.Name != "x" || m.Image.Version != "2" {
		t.Fatalf("read back %+v, %v", m, err)
	}
}
