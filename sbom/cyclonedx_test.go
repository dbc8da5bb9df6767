package sbom

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// cdxSchema compiles CycloneDX 1.6's JSON schema as the cyclonedx-go
// module ships it (with the SPDX license list and JSF schemas it refers
// to), asserting formats.
func cdxSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/CycloneDX/cyclonedx-go").Output()
	if err != nil {
		t.Fatalf("finding the cyclonedx-go module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "schema")
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	// The schemas the BOM schema refers to by their ids, from the module.
	for id, file := range map[string]string{
		"http://cyclonedx.org/schema/spdx.schema.json":     "spdx.schema.json",
		"http://cyclonedx.org/schema/jsf-0.82.schema.json": "jsf-0.82.schemax.json",
	} {
		f, err := os.Open(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Compile(filepath.Join(dir, "bom-1.6.schema.json"))
	if err != nil {
		t.Fatalf("compiling the CycloneDX 1.6 schema: %v", err)
	}
	return s
}

// The BOM of the scanned test image validates against CycloneDX 1.6's
// schema, reads back with cyclonedx-go, and has what the SPDX document
// has: the packages with their purls and licenses, the bundles with their
// files, the recipe's other files.
func TestCycloneDX(t *testing.T) {
	inv := debianInventory(t)
	bom, b := cycloneDX(t, testImage(), inv)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	schema := cdxSchema(t)
	if err := schema.Validate(inst); err != nil {
		t.Fatalf("the BOM does not validate against CycloneDX 1.6:\n%v\n%s", err, b)
	}
	// The schema is enforced: a serial number that is no URN fails.
	inst.(map[string]any)["serialNumber"] = "not-a-urn"
	if err := schema.Validate(inst); err == nil {
		t.Error("the schema accepted a bad serial number")
	}
	again, _ := CycloneDX(testImage(), inv)
	if b2, _ := MarshalCycloneDX(again); !bytes.Equal(b, b2) {
		t.Error("the same inputs made two BOMs")
	}

	var back cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&back); err != nil {
		t.Fatal(err)
	}
	if back.SpecVersion != cdx.SpecVersion1_6 || !regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(back.SerialNumber) {
		t.Errorf("spec %v, serial %q", back.SpecVersion, back.SerialNumber)
	}
	// Another BOM of the same tgz (a rebuild, later) is another serial.
	later := testImage()
	later.Created = later.Created.Add(time.Hour)
	if other, err := CycloneDX(later, inv); err != nil || other.SerialNumber == bom.SerialNumber {
		t.Errorf("a BOM made later has the serial %q too (%v)", bom.SerialNumber, err)
	}
	root := back.Metadata.Component
	if root == nil || root.Type != cdx.ComponentTypeOS || root.Name != "gpu-node" || root.Version != "2024.06.1" ||
		(*root.Hashes)[0].Value != tgzSHA256 || back.Metadata.Timestamp != "2024-06-01T12:30:05Z" {
		t.Errorf("metadata %+v", back.Metadata)
	}
	if tools := *back.Metadata.Tools.Components; len(tools) != 1 || tools[0].Name != "imagectl" || tools[0].Version != "1.4.0" {
		t.Errorf("tools %+v", tools)
	}

	comps := map[string]cdx.Component{}
	var purls []string
	for _, c := range *back.Components {
		comps[c.BOMRef] = c
		if c.PackageURL != "" {
			purls = append(purls, c.PackageURL)
		}
	}
	var want []string
	for _, p := range inv.Packages {
		want = append(want, Purl(inv.OS, p))
	}
	if !reflect.DeepEqual(purls, want) || len(want) == 0 {
		t.Errorf("purls %q, want %q", purls, want)
	}
	for _, p := range inv.Packages {
		c := comps[Purl(inv.OS, p)]
		if c.Name != p.Name || c.Version != p.Version || c.Type != cdx.ComponentTypeLibrary {
			t.Errorf("component %+v for %+v", c, p)
		}
		switch {
		case p.License == NoAssertion && c.Licenses != nil:
			t.Errorf("%s: licenses %+v where the copyright file states none", p.Name, c.Licenses)
		case p.License != NoAssertion && (c.Licenses == nil || (*c.Licenses)[0].Expression != p.License):
			t.Errorf("%s: licenses %+v, want %q", p.Name, c.Licenses, p.License)
		}
	}
	bundle, ok := comps["bundle:tool"]
	if !ok || bundle.Version != "sha256:0123abcd" || bundle.Components == nil {
		t.Fatalf("bundle %+v", bundle)
	}
	var inBundle []string
	for _, f := range *bundle.Components {
		inBundle = append(inBundle, f.Name)
		if f.Type != cdx.ComponentTypeFile || len(*f.Hashes) != 2 {
			t.Errorf("bundle file %+v", f)
		}
	}
	if want := []string{"/opt/tool/bin/tool", "/opt/tool/bin/tool-again", "/opt/tool/share/data.txt"}; !reflect.DeepEqual(inBundle, want) {
		t.Errorf("bundle files %q, want %q", inBundle, want)
	}
	for _, p := range []string{"/etc/apt/sources.list", "/etc/imagectl/recipe.conf"} {
		if c, ok := comps["file:"+p]; !ok || c.Type != cdx.ComponentTypeFile {
			t.Errorf("recipe file %s: %+v", p, c)
		}
	}
	deps := *back.Dependencies
	if len(deps) != 1 || deps[0].Ref != root.BOMRef || len(*deps[0].Dependencies) != len(*back.Components) {
		t.Errorf("dependencies %+v", deps)
	}
}

// cycloneDX makes the BOM of img and inv and marshals it.
func cycloneDX(t *testing.T, img Image, inv *Inventory) (*cdx.BOM, []byte) {
	t.Helper()
	bom, err := CycloneDX(img, inv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MarshalCycloneDX(bom)
	if err != nil {
		t.Fatal(err)
	}
	return bom, b
}

// Repeated names get distinct bom-refs (CycloneDX requires them unique),
// and a BOM with no packages or files still validates.
func TestCycloneDXRefsAndEmpty(t *testing.T) {
	s := cdxSchema(t)
	inv := &Inventory{Packages: []Package{{Name: "a", Version: "1", Architecture: "amd64"}, {Name: "a", Version: "1", Architecture: "amd64"}}}
	for _, inv := range []*Inventory{inv, {}} {
		img := testImage()
		img.Bundles = nil
		bom, b := cycloneDX(t, img, inv)
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%v\n%s", err, b)
		}
		seen := map[string]bool{}
		if bom.Components != nil {
			for _, c := range *bom.Components {
				if seen[c.BOMRef] {
					t.Errorf("bom-ref %s twice", c.BOMRef)
				}
				seen[c.BOMRef] = true
			}
		}
	}
	if _, err := CycloneDX(testImage(), nil); err == nil {
		t.Error("no inventory: no error")
	}
}
