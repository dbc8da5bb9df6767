// Package manifesttest writes the manifests tests hand to imagectl: one
// made whole, or one read back, changed and written again (a tampered
// digest, a hostile version, a recorded waiver). Only tests import it.
package manifesttest

import (
	"os"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
)

// Write writes m to path (mode 0644) as a build does and returns path.
func Write(t testing.TB, path string, m *manifest.Manifest) string {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Edit reads the manifest at path, lets change alter it and writes it
// back.
func Edit(t testing.TB, path string, change func(*manifest.Manifest)) {
	t.Helper()
	m, err := manifest.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	change(m)
	Write(t, path, m)
}
