package provenance_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/provenance"
	"github.com/gpuaas/imagectl/signing/signingtest"
)

const (
	tgzSum    = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	recipeSum = "1111111111111111111111111111111111111111111111111111111111111111"
	baseSum   = "2222222222222222222222222222222222222222222222222222222222222222"
	layerSum  = "3333333333333333333333333333333333333333333333333333333333333333"
	bundleSum = "4444444444444444444444444444444444444444444444444444444444444444"
	keySum    = "5555555555555555555555555555555555555555555555555555555555555555"
	sbomSum   = "6666666666666666666666666666666666666666666666666666666666666666"
	debSum    = "7777777777777777777777777777777777777777777777777777777777777777"
)

func fullBuild() provenance.Build {
	started := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	return provenance.Build{
		Subject:         provenance.Resource{Name: "gpu-1.2.3.tgz", SHA256: tgzSum},
		ImagectlVersion: "v1.4.0", Host: "builder-1", Accelerator: "kvm", Packer: "host",
		// Either form of a sha256, either case: the statement writes lowercase hex.
		Recipe:  provenance.Resource{Name: "recipes/gpu.yaml", URI: "file:///src/recipes/gpu.yaml", SHA256: "sha256:" + strings.ToUpper(recipeSum)},
		Version: "1.2.3", VersionFrom: "recipe",
		Variables: []provenance.Variable{
			{Name: "driver", Value: json.RawMessage(`"550.54"`), Source: "flag"},
			{Name: "cuda", Value: json.RawMessage(`{"major":12,"minor":4}`), Source: "env"},
		},
		SourceRevision: "0f0e0d0c0b0a09080706050403020100ffeeddcc-dirty",
		Base:           provenance.Resource{Name: "base", URI: "https://cloud-images.ubuntu.com/noble.img", SHA256: "sha256:" + baseSum},
		LayerFiles:     []provenance.Resource{{Name: "layers/cuda.yaml", URI: "file:///src/layers/cuda.yaml", SHA256: layerSum}},
		Bundles:        []provenance.Resource{{Name: "drivers", URI: "file:///src/bundles/drivers", SHA256: "sha256:" + bundleSum}},
		AptRepositories: []provenance.AptRepository{
			{Name: "cuda", URI: "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64", Suite: "/",
				KeySHA256: "sha256:" + keySum, ConfiguredIn: "recipe layer cuda"},
			{Name: "ubuntu.sources", URI: "http://archive.ubuntu.com/ubuntu", Suite: "noble",
				Components: []string{"main", "restricted"}, ConfiguredIn: "/etc/apt/sources.list.d/ubuntu.sources"},
		},
		Packages: []provenance.Package{
			{Name: "jq", Version: "1:1.6-2.1", Architecture: "amd64", URI: "http://deb.debian.org/debian/pool/main/j/jq/jq_1.6-2.1_amd64.deb", SHA256: strings.ToUpper(debSum)},
			// A package the index gave no sha256 for: its URL only.
			{Name: "less", Version: "590-2", URI: "http://deb.debian.org/debian/pool/main/l/less/less_590-2_amd64.deb"},
		},
		Byproducts: []provenance.Resource{{Name: "gpu-1.2.3.spdx.json", SHA256: sbomSum,
			Annotations: map[string]string{"mediaType": "application/spdx+json"}}},
		InvocationID: "4f1c2b",
		Started:      started,
		Finished:     started.Add(42*time.Minute + 500*time.Millisecond),
	}
}

func TestStatementRoundTrip(t *testing.T) {
	b := fullBuild()
	st, err := provenance.Statement(b)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(st) {
		t.Fatalf("not JSON: %s", st)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, st); err != nil || !bytes.Equal(compact.Bytes(), st) {
		t.Errorf("the statement is not compact JSON:\n%s", st)
	}
	// Deterministic: the same build makes the same bytes (protojson's
	// whitespace varies, and map and Struct orders must not leak out).
	for range 20 {
		again, err := provenance.Statement(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, st) {
			t.Fatalf("two statements of one build differ:\n%s\n%s", st, again)
		}
	}

	s, err := provenance.Parse(st)
	if err != nil {
		t.Fatalf("Parse of Statement's own output: %v\n%s", err, st)
	}
	want := &provenance.Summary{
		PredicateType: provenance.PredicateType,
		Subjects:      []provenance.Resource{{Name: "gpu-1.2.3.tgz", SHA256: tgzSum}},
		Builder:       provenance.BuilderID,
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Parse = %+v, want %+v", s, want)
	}
}

// TestStatementJSON checks the statement's JSON as SLSA v1 and in-toto v1
// spell it, and what each part of the build becomes.
func TestStatementJSON(t *testing.T) {
	st, err := provenance.Statement(fullBuild())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(st, &doc); err != nil {
		t.Fatal(err)
	}
	get := func(path ...any) any {
		t.Helper()
		var v any = doc
		for _, p := range path {
			switch p := p.(type) {
			case string:
				m, ok := v.(map[string]any)
				if !ok {
					t.Fatalf("%v: %v is not an object", path, v)
				}
				v = m[p]
			case int:
				l, ok := v.([]any)
				if !ok || p >= len(l) {
					t.Fatalf("%v: %v is not a list of more than %d", path, v, p)
				}
				v = l[p]
			}
		}
		return v
	}
	check := func(want any, path ...any) {
		t.Helper()
		if got := get(path...); !reflect.DeepEqual(got, want) {
			t.Errorf("%v = %#v, want %#v", path, got, want)
		}
	}
	check("https://in-toto.io/Statement/v1", "_type")
	check("gpu-1.2.3.tgz", "subject", 0, "name")
	check(map[string]any{"sha256": tgzSum}, "subject", 0, "digest")
	check(provenance.PredicateType, "predicateType")

	bd := []any{"predicate", "buildDefinition"}
	check(provenance.BuildType, append(bd, "buildType")...)
	check(map[string]any{
		"recipe":          map[string]any{"path": "recipes/gpu.yaml", "digest": "sha256:" + recipeSum},
		"version":         "1.2.3",
		"versionFrom":     "recipe",
		"variables":       map[string]any{"driver": "550.54", "cuda": map[string]any{"major": 12.0, "minor": 4.0}},
		"variableSources": map[string]any{"driver": "flag", "cuda": "env"},
	}, append(bd, "externalParameters")...)
	check(map[string]any{"host": "builder-1", "accelerator": "kvm", "packer": "host"}, append(bd, "internalParameters")...)

	deps, _ := get(append(bd, "resolvedDependencies")...).([]any)
	wantDeps := []any{
		map[string]any{"name": "recipes/gpu.yaml", "uri": "file:///src/recipes/gpu.yaml", "digest": map[string]any{"sha256": recipeSum},
			"annotations": map[string]any{"sourceRevision": "0f0e0d0c0b0a09080706050403020100ffeeddcc-dirty"}},
		map[string]any{"name": "base", "uri": "https://cloud-images.ubuntu.com/noble.img", "digest": map[string]any{"sha256": baseSum}},
		map[string]any{"name": "layers/cuda.yaml", "uri": "file:///src/layers/cuda.yaml", "digest": map[string]any{"sha256": layerSum}},
		map[string]any{"name": "bundle:drivers", "uri": "file:///src/bundles/drivers", "digest": map[string]any{"sha256": bundleSum},
			"annotations": map[string]any{"digestOf": "imagectl bundle tree"}},
		map[string]any{"name": "apt:cuda", "uri": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64",
			"annotations": map[string]any{"suite": "/", "configuredIn": "recipe layer cuda", "keySha256": keySum}},
		map[string]any{"name": "apt:ubuntu.sources", "uri": "http://archive.ubuntu.com/ubuntu",
			"annotations": map[string]any{"suite": "noble", "components": []any{"main", "restricted"},
				"configuredIn": "/etc/apt/sources.list.d/ubuntu.sources"}},
		map[string]any{"name": "deb:jq", "uri": "http://deb.debian.org/debian/pool/main/j/jq/jq_1.6-2.1_amd64.deb", "digest": map[string]any{"sha256": debSum},
			"annotations": map[string]any{"version": "1:1.6-2.1", "architecture": "amd64"}},
		map[string]any{"name": "deb:less", "uri": "http://deb.debian.org/debian/pool/main/l/less/less_590-2_amd64.deb",
			"annotations": map[string]any{"version": "590-2"}},
	}
	if !reflect.DeepEqual(deps, wantDeps) {
		t.Errorf("resolvedDependencies =\n%#v\nwant\n%#v", deps, wantDeps)
	}

	rd := []any{"predicate", "runDetails"}
	check(provenance.BuilderID, append(rd, "builder", "id")...)
	check(map[string]any{"imagectl": "v1.4.0"}, append(rd, "builder", "version")...)
	check("4f1c2b", append(rd, "metadata", "invocationId")...)
	check("2025-03-01T10:00:00Z", append(rd, "metadata", "startedOn")...)
	check("2025-03-01T10:42:00.500Z", append(rd, "metadata", "finishedOn")...)
	check([]any{map[string]any{"name": "gpu-1.2.3.spdx.json", "digest": map[string]any{"sha256": sbomSum},
		"annotations": map[string]any{"mediaType": "application/spdx+json"}}}, append(rd, "byproducts")...)
}

// TestStatementOnlyGiven: what a build leaves out (a sensitive variable
// the caller dropped, an unknown host) leaves no key behind, not even an
// empty one.
func TestStatementOnlyGiven(t *testing.T) {
	b := provenance.Build{
		Subject:   provenance.Resource{Name: "min.tgz", SHA256: tgzSum},
		Recipe:    provenance.Resource{Name: "min.yaml", SHA256: recipeSum},
		Variables: []provenance.Variable{{Name: "region", Value: json.RawMessage(`"eu"`)}},
	}
	st, err := provenance.Statement(b)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Predicate struct {
			BuildDefinition map[string]any `json:"buildDefinition"`
			RunDetails      map[string]any `json:"runDetails"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(st, &doc); err != nil {
		t.Fatal(err)
	}
	ext := doc.Predicate.BuildDefinition["externalParameters"]
	if want := map[string]any{"recipe": map[string]any{"path": "min.yaml", "digest": "sha256:" + recipeSum},
		"variables": map[string]any{"region": "eu"}}; !reflect.DeepEqual(ext, want) {
		t.Errorf("externalParameters = %#v, want %#v", ext, want)
	}
	if _, ok := doc.Predicate.BuildDefinition["internalParameters"]; ok {
		t.Error("internalParameters written with nothing in them")
	}
	if want := map[string]any{"builder": map[string]any{"id": provenance.BuilderID}}; !reflect.DeepEqual(doc.Predicate.RunDetails, want) {
		t.Errorf("runDetails = %#v, want %#v", doc.Predicate.RunDetails, want)
	}
	if _, err := provenance.Parse(st); err != nil {
		t.Error(err)
	}
}

func TestStatementRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*provenance.Build)
		want   string
	}{
		{"no subject digest", func(b *provenance.Build) { b.Subject.SHA256 = "" }, `subject "gpu-1.2.3.tgz" has no sha256`},
		{"bad subject digest", func(b *provenance.Build) { b.Subject.SHA256 = "sha256:abc" }, `is not a sha256`},
		{"non-hex digest", func(b *provenance.Build) { b.LayerFiles[0].SHA256 = strings.Repeat("g", 64) }, `resource "layers/cuda.yaml"`},
		{"finished before started", func(b *provenance.Build) { b.Finished = b.Started.Add(-time.Second) }, "finished (2025-03-01T09:59:59Z) before it started"},
		{"resource without URI or digest", func(b *provenance.Build) { b.Bundles[0].URI, b.Bundles[0].SHA256 = "", "" },
			`resource "bundle:drivers" has neither a URI nor a digest`},
		{"byproduct without URI or digest", func(b *provenance.Build) { b.Byproducts[0].SHA256 = "" },
			`resource "gpu-1.2.3.spdx.json" has neither a URI nor a digest`},
		{"apt repository without URI", func(b *provenance.Build) { b.AptRepositories[1].URI = "" }, `resource apt:ubuntu.sources has no URI`},
		{"variable not JSON", func(b *provenance.Build) { b.Variables[0].Value = json.RawMessage(`550.54"`) }, "variable driver: its value is not JSON"},
		{"variable twice", func(b *provenance.Build) { b.Variables[1].Name = "driver" }, "variable driver is given twice"},
		{"no external parameters", func(b *provenance.Build) {
			b.Recipe, b.Version, b.VersionFrom, b.Variables, b.SourceRevision = provenance.Resource{}, "", "", nil, ""
		}, "externalParameters required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fullBuild()
			tc.change(&b)
			st, err := provenance.Statement(b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Statement = %v, want an error with %q\n%s", err, tc.want, st)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	good, err := provenance.Statement(fullBuild())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(map[string]any)) []byte { return signingtest.EditJSON(t, good, f) }
	pred := func(doc map[string]any) map[string]any { return doc["predicate"].(map[string]any) }
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"not JSON", []byte("{"), "not an in-toto statement"},
		{"too large", make([]byte, provenance.MaxStatementSize+1), "more than the 64 MiB"},
		{"wrong statement type", edit(func(d map[string]any) { d["_type"] = "https://example.com/Statement" }), "wrong statement type"},
		{"no subjects", edit(func(d map[string]any) { delete(d, "subject") }), "at least one subject required"},
		{"bad subject digest", edit(func(d map[string]any) {
			d["subject"] = []any{map[string]any{"name": "x", "digest": map[string]any{"sha256": "abcd"}}}
		}), "digest has incorrect length"},
		{"another predicate type", edit(func(d map[string]any) { d["predicateType"] = "https://spdx.dev/Document" }),
			`predicate is "https://spdx.dev/Document", not SLSA provenance v1`},
		{"no builder id", edit(func(d map[string]any) {
			pred(d)["runDetails"] = map[string]any{"builder": map[string]any{"version": map[string]any{"a": "b"}}}
		}),
			"runDetails.builder.id required"},
		{"no build type", edit(func(d map[string]any) { delete(pred(d)["buildDefinition"].(map[string]any), "buildType") }),
			"buildDefinition.buildType required"},
		{"bad timestamp", edit(func(d map[string]any) {
			pred(d)["runDetails"].(map[string]any)["metadata"] = map[string]any{"startedOn": "yesterday"}
		}), "not SLSA v1 provenance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := provenance.Parse(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %+v, %v; want an error with %q", s, err, tc.want)
			}
		})
	}

	// cosign attest-blob writes in-toto v0.1's type, the same layout.
	legacy := edit(func(d map[string]any) { d["_type"] = "https://in-toto.io/Statement/v0.1" })
	if _, err := provenance.Parse(legacy); err != nil {
		t.Errorf("Parse of a v0.1 statement: %v", err)
	}
	// Unknown fields are another producer's business, not an error.
	extra := edit(func(d map[string]any) { pred(d)["extension"] = "x"; d["comment"] = "y" })
	if _, err := provenance.Parse(extra); err != nil {
		t.Errorf("Parse with unknown fields: %v", err)
	}
}
