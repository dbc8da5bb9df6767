//go:build !guestfs

package main

import (
	"strings"
	"testing"
)

func TestBuildWithoutLibguestfsSaysWhy(t *testing.T) {
	_, errs, code := imagectl(t, nil, h200("build")...)
	if code == 0 || !strings.Contains(errs, "-tags guestfs") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}
