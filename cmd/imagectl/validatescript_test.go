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
	checkGoldens(t, ".validate.txt", "go test ./cmd/imagectl -run TestGoldenValidateScripts -update", []goldenCase{
		// A fixed version (the default is the time), and the bundles by a
		// relative path: the layer keys in the marker check hash the
		// bundle's source path, which must not depend on the checkout's.
		{"h200", []string{"validate-script", "recipes/h200.hcl", "--root", "testdata/bundles", "-var", "site_bootstrap_dir=testdata/bundles", "-var", "version=1.0.0"}},
		{"h200-debian", append([]string{"validate-script", "testdata/h200-debian.hcl"}, goldenBase...)},
		{"demo", append([]string{"validate-script", "examples/demo.hcl"}, goldenBase...)},
		{"demo-0.1.0.manifest", []string{"validate-script", "testdata/manifests/demo-0.1.0.json"}},
	}, nil)
}

// goldenBase are the -var flags that pin the base image of the golden
// files' recipes.
var goldenBase = []string{"-var", "base_image=/var/cache/base.qcow2", "-var", "base_checksum=sha256:" + strings.Repeat("ab", 32)}

// goldenCase is one golden file: testdata/golden/<name><suffix> holds what
// imagectl args prints.
type goldenCase struct {
	name string
	args []string
}

// checkGoldens runs each case as a subtest: imagectl must exit 0 and print
// its golden file's bytes (update is the command that rewrites them);
// then check, if not nil, looks further at the output.
func checkGoldens(t *testing.T, suffix, update string, cases []goldenCase, check func(t *testing.T, out string)) {
	t.Helper()
	golden.NormalizeModes(t, "examples/site-bootstrap", "testdata/bundles")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := imagectl(t, nil, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			golden.Check(t, "testdata/golden/"+tc.name+suffix, []byte(out), update)
			if check != nil {
				check(t, out)
			}
		})
	}
}
