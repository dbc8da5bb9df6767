package manifest

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

func TestNameRule(t *testing.T) {
	for _, n := range []string{"demo", "gpuaas-h200-host-image", "a", "x.y_z-1", strings.Repeat("a", MaxNameLen)} {
		if err := CheckImageName(n); err != nil {
			t.Errorf("image name %q refused: %v", n, err)
		}
	}
	for _, n := range []string{"", ".", "..", "a..b", "-a", ".a", "A", "a/b", "a b", "a\nb", "a\x00", "ä", strings.Repeat("a", MaxNameLen+1)} {
		if err := CheckImageName(n); err == nil {
			t.Errorf("image name %q accepted", n)
		}
	}
	for _, v := range []string{"1", "0.1.0", "1.4.0+build.2~rc1", "20261122.1", "V2_b-c", strings.Repeat("1", MaxVersionLen)} {
		if err := CheckVersion(v); err != nil {
			t.Errorf("version %q refused: %v", v, err)
		}
	}
	for _, v := range []string{"", "..", "../../../../etc/x", "0.1\ntouch x", "1 0", "a/b", `a\b`, "-1", "1..2", "$(id)", "1;x", strings.Repeat("1", MaxVersionLen+1)} {
		if err := CheckVersion(v); err == nil {
			t.Errorf("version %q accepted", v)
		}
	}
	err := CheckVersion("0.1\ntouch x" + strings.Repeat("y", 200))
	if err == nil || strings.ContainsAny(err.Error(), "\n") || len(err.Error()) > 300 {
		t.Errorf("the error shows the value raw or whole: %q", err)
	}
}

// TestParseRefusesHostileNames: a manifest read back names files and
// store paths after its image name and version.
func TestParseRefusesHostileNames(t *testing.T) {
	for field, js := range map[string]string{
		"image.version": `{"schema_version": 1, "image": {"name": "demo", "version": "../../../../etc/x"}}`,
		"image.name":    `{"schema_version": 1, "image": {"name": "demo\ntouch x", "version": "1"}}`,
	} {
		if _, err := Parse([]byte(js)); err == nil || !strings.HasPrefix(err.Error(), field+": ") {
			t.Errorf("%s: %v", field, err)
		}
	}
	if _, err := Parse([]byte(`{"schema_version": 1, "image": {"name": "demo", "version": "1.0"}}`)); err != nil {
		t.Error(err)
	}
}

// FuzzNames: whatever the name rule accepts, every file a build names
// after the image name and version is a single, local path element that
// fits a file name and holds nothing a shell or a terminal would read as
// more than text.
func FuzzNames(f *testing.F) {
	f.Add("demo", "0.1.0")
	f.Add("a..b", "../../etc/x")
	f.Add("x", "0.1\ntouch x")
	f.Add(strings.Repeat("a", MaxNameLen), strings.Repeat("1", MaxVersionLen))
	f.Fuzz(func(t *testing.T, name, version string) {
		if CheckImageName(name) != nil || CheckVersion(version) != nil {
			return
		}
		files := FilesFor(name, version)
		v := reflect.ValueOf(files)
		for i := range v.NumField() {
			f := v.Field(i).String()
			switch {
			case f != filepath.Base(f) || !filepath.IsLocal(f) || f == "." || f == "..":
				t.Errorf("%s of %q %q is not a single path element: %q", v.Type().Field(i).Name, name, version, f)
			case len(f) > 255:
				t.Errorf("%s of %q %q is longer than a file name may be: %d bytes", v.Type().Field(i).Name, name, version, len(f))
			case strings.ContainsFunc(f, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) || unicode.IsSpace(r) }):
				t.Errorf("%s of %q %q holds a space, control or non-ASCII character: %q", v.Type().Field(i).Name, name, version, f)
			case strings.ContainsAny(f, "/\\$`'\";|&<>(){}*?[]#"):
				t.Errorf("%s of %q %q holds a shell metacharacter: %q", v.Type().Field(i).Name, name, version, f)
			}
		}
	})
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{"maas280": true, "lab-1.a_b": true, "0": true,
		"": false, "Lab": false, "-a": false, ".": false, "..": false, "a/b": false, "a b": false} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}
