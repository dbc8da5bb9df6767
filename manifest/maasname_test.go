package manifest

import "testing"

func TestVersionedName(t *testing.T) {
	for _, tc := range []struct{ name, version, want string }{
		{"custom/gpuaas-h200-host-ubuntu2404", "1.2.0", "gpuaas-h200-host-ubuntu2404-1-2-0"},
		{"gpuaas-h200-host-ubuntu2404", "2026.11.21+rc1", "gpuaas-h200-host-ubuntu2404-2026-11-21-rc1"},
		{"custom/Demo_Image", "", "demo-image"},
	} {
		if got := VersionedName(tc.name, tc.version); got != tc.want {
			t.Errorf("VersionedName(%q, %q) = %q, want %q", tc.name, tc.version, got, tc.want)
		}
	}
	if got := DistroSeries("gpuaas-h200-host-ubuntu2404-1-2-0"); got != "custom/gpuaas-h200-host-ubuntu2404-1-2-0" {
		t.Errorf("DistroSeries = %q", got)
	}
}

func TestSameName(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"x-1-0", "x-1-0", true},
		{"custom/x-1-0", "x-1-0", true},
		{"x-1-0", "custom/x-1-0", true},
		{"custom/x-1-0", "custom/x-1-0", true},
		{"custom/x-1-0", "x-1-1", false},
		{"ubuntu/noble", "noble", false},
		{"custom/custom/x", "x", false},
	} {
		if got := SameName(tc.a, tc.b); got != tc.want {
			t.Errorf("SameName(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
