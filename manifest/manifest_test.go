package manifest

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
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

// TestMarkerHoldsNoBuildTime: two builds of the same inputs differ in their
// times, timings, accelerator and cached layers' ages; their markers do not.
// The marker keeps the source date, the layers and their steps, and drops
// the artifact.
func TestMarkerHoldsNoBuildTime(t *testing.T) {
	b, err := os.ReadFile("../testdata/manifests/demo-0.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	a.Build.SourceDate = &SourceDate{Epoch: 1700000000, From: "base image"}
	o := a.Clone()
	o.Build.Started = o.Build.Started.Add(time.Hour)
	o.Build.Finished = o.Build.Finished.Add(2 * time.Hour)
	o.Build.Seconds += 60
	o.Build.Timings = &Timings{Install: 3}
	o.Builder.Accelerator = "kvm"
	cached := time.Unix(1800000000, 0)
	o.Layers[0].CachedAt = &cached
	o.Layers[0].Timings = &Timings{Commands: 1}
	o.Layers[0].Steps = append(o.Layers[0].Steps, Step{Kind: "run", Summary: "s", Seconds: 2})
	a.Layers[0].Steps = append(a.Layers[0].Steps, Step{Kind: "run", Summary: "s", Seconds: 9})
	ma, err := a.Marker()
	if err != nil {
		t.Fatal(err)
	}
	mo, err := o.Marker()
	if err != nil {
		t.Fatal(err)
	}
	if string(ma) != string(mo) {
		t.Errorf("two builds' markers differ:\n%s\n%s", ma, mo)
	}
	back, err := Parse(ma)
	if err != nil {
		t.Fatal(err)
	}
	if back.Artifact != nil || !back.Build.Started.IsZero() || back.Build.Seconds != 0 || back.Build.Timings != nil ||
		back.Build.SourceDate == nil || back.Build.SourceDate.Epoch != 1700000000 {
		t.Errorf("marker's build section %+v, artifact %v", back.Build, back.Artifact)
	}
	if n := len(back.Layers[0].Steps); n == 0 || back.Layers[0].Steps[n-1].Summary != "s" {
		t.Errorf("the marker lost the layers' steps: %+v", back.Layers[0])
	}
	for _, key := range []string{`"started"`, `"seconds"`, `"cached_at"`, `"timings"`, `"accelerator"`} {
		if strings.Contains(string(ma), key) {
			t.Errorf("the marker holds %s", key)
		}
	}
	if a.Build.Started.IsZero() || a.Artifact == nil {
		t.Error("Marker changed the manifest")
	}
}
