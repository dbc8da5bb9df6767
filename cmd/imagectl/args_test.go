package main

import (
	"strings"
	"testing"
)

// TestOutputFlag: every command that prints a result takes --output
// through one helper, which refuses a format the command does not print.
func TestOutputFlag(t *testing.T) {
	for _, args := range [][]string{
		{"version", "-o", "yaml"},
		{"cache", "ls", "--cache-dir", t.TempDir(), "-o", "yaml"},
		{"images", "--store", t.TempDir(), "-o", "yaml"},
		{"validate", "../../recipes/h200.hcl", "-o", "yaml"},
	} {
		out, errs, code := imagectl(t, nil, args...)
		if code != 1 || out != "" || !strings.Contains(errs, `--output must be text or json, not "yaml"`) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	if got := orList([]string{"text", "json", "markdown"}); got != "text, json or markdown" {
		t.Errorf("orList: %q", got)
	}
}

// TestFromStore: IMAGE VERSION refuses the flags that apply to a tgz.
func TestFromStore(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		set       bool
		flags     []string
		versioned bool
		err       string
	}{
		{[]string{"x.tgz"}, true, []string{"--manifest"}, false, ""},
		{[]string{"x", "1.0"}, false, []string{"--manifest"}, true, ""},
		{[]string{"x", "1.0"}, true, []string{"--manifest"}, true, "--manifest applies to a tgz, not to a version from the store"},
		{[]string{"x", "1.0"}, true, []string{"--manifest", "--name"}, true, "--manifest and --name apply to a tgz, not to a version from the store"},
	} {
		versioned, err := fromStore(tc.args, tc.set, tc.flags...)
		if versioned != tc.versioned || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("fromStore(%v, %v, %v) = %v, %v", tc.args, tc.set, tc.flags, versioned, err)
		}
	}
	_, errs, code := imagectl(t, nil, "check", "x", "1.0", "--manifest", "m.json", "--store", t.TempDir())
	if code != 1 || !strings.Contains(errs, "--manifest applies to a tgz, not to a version from the store") {
		t.Errorf("check IMAGE VERSION --manifest: exit %d, %q", code, errs)
	}
}
