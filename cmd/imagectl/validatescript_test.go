package main

import (
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/golden"
)

// TestGoldenValidateScripts pins, byte for byte, the validation script that
// validate-script writes for the shipped recipes, the Debian stand-in and a
// build manifest. Run with -update to rewrite them after an intended change.
// The goldens are .txt, as the plans' are: data to compare, not shell to
// lint or count (the script's shell is validate/sh/*.sh).
func TestGoldenValidateScripts(t *testing.T) {
	golden.NormalizeModes(t, "examples/site-bootstrap", "testdata/bundles")
	base := []string{"-var", "base_image=/var/cache/base.qcow2", "-var", "base_checksum=sha256:" + strings.Repeat("ab", 32)}
	for _, tc := range []struct {
		name string
		args []string
	}{
		// A fixed version (the default is the time), and the bundles by a
		// relative path: the layer keys in the marker check hash the
		// bundle's source path, which must not depend on the checkout's.
		{"h200", []string{"validate-script", "recipes/h200.hcl", "--root", "testdata/bundles", "-var", "site_bootstrap_dir=testdata/bundles", "-var", "version=1.0.0"}},
		{"h200-debian", append([]string{"validate-script", "testdata/h200-debian.hcl"}, base...)},
		{"demo", append([]string{"validate-script", "examples/demo.hcl"}, base...)},
		{"demo-0.1.0.manifest", []string{"validate-script", "testdata/manifests/demo-0.1.0.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := imagectl(t, nil, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			golden.Check(t, "testdata/golden/"+tc.name+".validate.txt", []byte(out), "go test ./cmd/imagectl -run TestGoldenValidateScripts -update")
		})
	}
}
