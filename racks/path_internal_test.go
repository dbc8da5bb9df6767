package racks

import (
	"testing"

	"github.com/gpuaas/imagectl/upload/maas"
)

// The URL curtin fetches, per MAAS version (the reference's table).
func TestImagePath(t *testing.T) {
	sha := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	res := &maas.Resource{Name: "x-1-4-0", Architecture: "amd64/generic"}
	for _, c := range []struct {
		version string
		file    maas.File
		want    string
	}{
		{"3.6.5", maas.File{Filename: "root.tgz", SHA256: sha, FilenameOnDisk: "0123456"}, "/images/0123456/custom/amd64/generic/x-1-4-0/uploaded/root.tgz"},
		{"3.5.1", maas.File{Filename: "root.tgz", SHA256: sha}, "/images/" + sha + "/custom/amd64/generic/x-1-4-0/uploaded/root.tgz"},
		{"3.5.2", maas.File{Filename: "root-tgz", SHA256: sha, FilenameOnDisk: "01234567"}, "/images/01234567/custom/amd64/generic/x-1-4-0/uploaded/root-tgz"},
		{"3.4.10", maas.File{Filename: "root-tgz", SHA256: sha}, "/images/custom/amd64/generic/x-1-4-0/uploaded/root-tgz"},
		{"3.8.0~beta1", maas.File{Filename: "root.tgz", SHA256: sha, FilenameOnDisk: "0123456"}, "/images/0123456/custom/amd64/generic/x-1-4-0/uploaded/root.tgz"},
	} {
		if got := imagePath(c.version, res, c.file); got != c.want {
			t.Errorf("MAAS %s: %s, want %s", c.version, got, c.want)
		}
	}
	// master keeps custom/ in uploaded names: the series is without it.
	withPrefix := &maas.Resource{Name: "custom/x-1-4-0", Architecture: "amd64/generic"}
	if got := imagePath("3.9.0", withPrefix, maas.File{Filename: "root.tgz", FilenameOnDisk: "0123456"}); got != "/images/0123456/custom/amd64/generic/x-1-4-0/uploaded/root.tgz" {
		t.Errorf("custom/ kept: %s", got)
	}
}
