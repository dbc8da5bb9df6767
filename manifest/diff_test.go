package manifest

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/golden"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// The manifests are a real one from a demo build and a hand-edited next
// version: one package added, one removed, jq upgraded from deb12u3 to
// deb12u10 (which string order gets wrong), curl downgraded, a kernel arg,
// the Netdata retention, a file, a bundle, a layer and the artifact changed.
func loadPair(t *testing.T) (*Manifest, *Manifest) {
	a, err := Read("../testdata/manifests/demo-0.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Read("../testdata/manifests/demo-0.1.1.json")
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func TestCompare(t *testing.T) {
	a, b := loadPair(t)
	d := Compare(a, b)
	if d.Equal {
		t.Fatal("different manifests compare equal")
	}
	if len(d.Packages.Added) != 1 || d.Packages.Added[0].Name != "hugepages" {
		t.Errorf("added: %+v", d.Packages.Added)
	}
	if len(d.Packages.Removed) != 1 || d.Packages.Removed[0].Name != "less" {
		t.Errorf("removed: %+v", d.Packages.Removed)
	}
	if len(d.Packages.Upgraded) != 1 || d.Packages.Upgraded[0].Name != "jq" {
		t.Errorf("upgraded (Debian order): %+v", d.Packages.Upgraded)
	}
	if len(d.Packages.Downgraded) != 1 || d.Packages.Downgraded[0].Name != "curl" {
		t.Errorf("downgraded: %+v", d.Packages.Downgraded)
	}
	if len(d.KernelArgs.Added) != 1 || d.KernelArgs.Added[0] != "hugepages=512" {
		t.Errorf("kernel args: %+v", d.KernelArgs)
	}
	if self := Compare(a, a); !self.Equal {
		t.Errorf("a manifest differs from itself: %+v", self)
	}
	// Rebuilding the same recipe changes timings, not content.
	again := *a
	again.Build.Seconds++
	again.Builder.Accelerator = "kvm"
	if !Compare(a, &again).Equal {
		t.Error("build timings or the accelerator count as differences")
	}
}

// A diff of equal contents says so, in either format.
func TestDiffEqualRendering(t *testing.T) {
	a, _ := loadPair(t)
	d := Compare(a, a)
	for _, tc := range []struct {
		write func(io.Writer) error
		want  string
	}{
		{d.WriteText, "imagectl-demo 0.1.0 -> imagectl-demo 0.1.0\n  no differences in content\n"},
		{d.WriteMarkdown, "## imagectl-demo 0.1.0 → 0.1.0\n\nNo differences in content.\n"},
	} {
		var b bytes.Buffer
		if err := tc.write(&b); err != nil || b.String() != tc.want {
			t.Errorf("got %q, %v; want %q", b.String(), err, tc.want)
		}
	}
}

func TestDiffGolden(t *testing.T) {
	a, b := loadPair(t)
	d := Compare(a, b)
	var text, md, js bytes.Buffer
	if err := d.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		t.Fatal(err)
	}
	for path, got := range map[string][]byte{
		"../testdata/manifests/demo.diff.txt":  text.Bytes(),
		"../testdata/manifests/demo.diff.md":   md.Bytes(),
		"../testdata/manifests/demo.diff.json": js.Bytes(),
	} {
		golden.Check(t, path, got, "go test ./manifest -update")
	}
}

// A package of another architecture than most (a foreign one) is written
// name:arch, as dpkg writes it, whether or not its native twin changed.
func TestDiffMultiArchPackages(t *testing.T) {
	a := []Package{{Name: "libc6", Version: "2.36-9", Architecture: "amd64"}, {Name: "libc6", Version: "2.36-9", Architecture: "i386"},
		{Name: "jq", Version: "1.6", Architecture: "amd64"}, {Name: "tzdata", Version: "1", Architecture: "all"}}
	b := []Package{{Name: "libc6", Version: "2.36-9+deb12u4", Architecture: "amd64"}, {Name: "libc6", Version: "2.36-9+deb12u4", Architecture: "i386"},
		{Name: "jq", Version: "1.7", Architecture: "amd64"}, {Name: "tzdata", Version: "2", Architecture: "all"}}
	render := func(a, b []Package) string {
		var text bytes.Buffer
		if err := (&Diff{Packages: ComparePackages(a, b)}).WriteText(&text); err != nil {
			t.Fatal(err)
		}
		return text.String()
	}
	got := render(a, b)
	testenv.Holds(t, "the diff", got, "↑ libc6 2.36-9 -> 2.36-9+deb12u4", "↑ libc6:i386 2.36-9 -> 2.36-9+deb12u4", "↑ jq 1.6 -> 1.7", "↑ tzdata 1 -> 2")
	// Only the foreign one changed.
	b[0].Version = a[0].Version
	if got := render(a, b); !strings.Contains(got, "↑ libc6:i386 2.36-9 -> 2.36-9+deb12u4") || strings.Contains(got, "↑ libc6 ") {
		t.Errorf("only libc6:i386 upgraded:\n%s", got)
	}
}
