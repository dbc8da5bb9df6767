package manifest

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// TestCheckJSON: the plan's JSON had "Name" and "Command" keys where
// every other key is snake_case.
func TestCheckJSON(t *testing.T) {
	b, err := json.Marshal(Check{Name: "n", Command: "c"})
	if err != nil || string(b) != `{"name":"n","command":"c"}` {
		t.Errorf("%s %v", b, err)
	}
	var back Check
	if err := json.Unmarshal([]byte(`{"Name":"n","Command":"c"}`), &back); err != nil || back != (Check{"n", "c"}) {
		t.Errorf("the old keys no longer decode: %+v %v", back, err)
	}
}

// TestCloneKeepsEverything: Clone copies through JSON, so a field JSON does
// not carry (json:"-", unexported) would silently vanish from every
// build's manifest. Every field reachable from Manifest must be one JSON
// carries, and a full manifest must clone to an equal value that shares
// nothing with it.
func TestCloneKeepsEverything(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] || ty.PkgPath() != reflect.TypeFor[Manifest]().PkgPath() {
			return
		}
		seen[ty] = true
		for f := range ty.Fields() {
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				t.Errorf("%s.%s: JSON does not carry it, so Clone drops it", path, f.Name)
			}
			walk(f.Type, path+"."+f.Name)
		}
	}
	walk(reflect.TypeFor[Manifest](), "Manifest")

	b, err := os.ReadFile("../testdata/manifests/demo-0.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	if !reflect.DeepEqual(m, c) {
		t.Fatalf("the clone differs:\n%+v\n%+v", m, c)
	}
	if len(m.Packages) == 0 || len(m.Layers) == 0 {
		t.Fatal("the fixture has no packages or layers: it tests nothing")
	}
	c.Packages[0].Name, c.Layers[0].Name = "changed", "changed"
	if m.Packages[0].Name == "changed" || m.Layers[0].Name == "changed" {
		t.Error("the clone shares slices with the original")
	}
}
