//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/internal/tgztest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// The tests of this file plant control characters, escape sequences,
// newlines that start a fake "error:" line, and Markdown in every value
// imagectl prints that came from input; no output may carry them raw.

// hostileText retitles the terminal, clears the screen and starts a fake
// error line.
const hostileText = "\x1b]0;owned\x07\x1b[2J\u009b31m\u202e\nerror: fake"

// checkNoFakeLine fails when a line of out starts with "error: fake":
// a value's newline started a line of its own.
func checkNoFakeLine(t *testing.T, what, out string) {
	t.Helper()
	if regexp.MustCompile(`(?m)^(error: fake|# Owned)`).MatchString(out) {
		t.Errorf("%s has a line that a value started:\n%s", what, out)
	}
}

// TestCheckEscapesEntryNamesAndWaivers: a tgz whose grub.d drop-in is
// named with escape sequences and a newline, and a manifest whose waiver
// reason carries them, print escaped; JSON keeps them as they are.
func TestCheckEscapesEntryNamesAndWaivers(t *testing.T) {
	name := "./etc/default/grub.d/" + hostileText + ".cfg"
	tgz := tgztest.Write(t, filepath.Join(t.TempDir(), "lab-1.tgz"),
		tgztest.File("./etc/os-release", "ID=debian\n"), tgztest.File(name, "GRUB_CMDLINE_LINUX_DEFAULT=quiet\n"))
	manifesttest.Write(t, manifest.FilesBeside(tgz).Manifest, &manifest.Manifest{SchemaVersion: manifest.SchemaVersion,
		Image: manifest.Image{Name: "lab", Version: "1"}, DeployWaivers: []manifest.Waiver{{Check: "os-release", Reason: "lab image" + hostileText}}})

	out, errs, code := runImagectl(t, nil, "check", tgz)
	if code != 1 || !strings.Contains(out, `error: grub-dropin-default: /etc/default/grub.d/\x1b]0;owned\a\x1b[2J\u009b31m\u202e\nerror: fake.cfg assigns`) ||
		!strings.Contains(out, `(waived: lab image\x1b]0;owned\a\x1b[2J\u009b31m\u202e\nerror: fake): os-release:`) {
		t.Errorf("check: exit %d\n%s%s", code, out, errs)
	}
	checkPrintable(t, "check's stdout", out)
	checkPrintable(t, "check's stderr", errs)
	checkNoFakeLine(t, "check's stdout", out)

	out, _, _ = runImagectl(t, nil, "check", tgz, "-o", "json")
	var res struct {
		Findings []struct{ Message, WaiverReason string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	var raw bool
	for _, f := range res.Findings {
		raw = raw || strings.Contains(f.Message, hostileText) || strings.Contains(f.WaiverReason, hostileText)
	}
	if !raw {
		t.Errorf("JSON no longer carries the values as they are: %+v", res.Findings)
	}
}

// hostileManifests writes two manifests whose packages and kernel args
// carry terminal escapes, newlines and Markdown (a hostile image name or
// version is refused when a manifest is read: manifest.CheckImageName).
func hostileManifests(t *testing.T) (a, b string) {
	t.Helper()
	dir := t.TempDir()
	write := func(file, version string, pkgs []manifest.Package, args []string) string {
		return manifesttest.Write(t, filepath.Join(dir, file), &manifest.Manifest{SchemaVersion: manifest.SchemaVersion,
			Image:      manifest.Image{Name: "demo", Version: version},
			Packages:   pkgs,
			KernelArgs: args})
	}
	a = write("a.manifest.json", "1.0", []manifest.Package{{Name: "curl", Version: "8.0", Architecture: "amd64"}}, nil)
	b = write("b.manifest.json", "1.1", []manifest.Package{
		{Name: "curl", Version: "8.1" + hostileText, Architecture: "amd64"},
		{Name: "evil" + hostileText + "\n# Owned\n| a | b |\n|---|---|", Version: "1`<img src=x onerror=alert(1)>`", Architecture: "amd64"},
	}, []string{"quiet\n# Owned <b>bold</b> [link](http://evil.example)"})
	return a, b
}

// checkMarkdown fails when a line of md is not one of the diff's own
// shapes: its heading, whose values are escaped; a section title; a change
// as one code span that nothing in it closes; or empty.
func checkMarkdown(t *testing.T, md string) {
	t.Helper()
	checkPrintable(t, "markdown", md)
	section := regexp.MustCompile(`^### [A-Z][A-Za-z ]+( \([0-9a-z, ]+\))?$`)
	for i, line := range strings.Split(strings.TrimSuffix(md, "\n"), "\n") {
		switch {
		case line == "":
		case i == 0 && strings.HasPrefix(line, "## "):
			// Every Markdown character of the values is escaped.
			body := line[3:]
			for j := 0; j < len(body); j++ {
				if body[j] == '\\' {
					j++
					continue
				}
				if strings.IndexByte("`*_[]<>&!|~#$", body[j]) >= 0 {
					t.Errorf("the heading holds %q unescaped: %s", body[j], line)
					break
				}
			}
		case section.MatchString(line):
		case strings.HasPrefix(line, "- `"):
			span := line[2:]
			fence := span[:len(span)-len(strings.TrimLeft(span, "`"))]
			if len(span) < 2*len(fence)+1 || !strings.HasSuffix(span, fence) || strings.Contains(span[len(fence):len(span)-len(fence)], fence) {
				t.Errorf("a change is not one code span: %s", line)
			}
		default:
			t.Errorf("line %d is Markdown of the data's: %q", i+1, line)
		}
	}
}

// TestDiffEscapesManifestValues: diff's text shows hostile values escaped,
// one per line; its Markdown keeps them text (no heading, table, link or
// HTML of theirs); JSON keeps them as they are.
func TestDiffEscapesManifestValues(t *testing.T) {
	a, b := hostileManifests(t)
	out, errs, code := imagectl(t, nil, "diff", a, b)
	if code != 1 || !strings.Contains(out, `+ evil\x1b]0;owned\a\x1b[2J\u009b31m\u202e\nerror: fake\n# Owned\n| a | b |\n|---|---| 1`) {
		t.Errorf("diff: exit %d\n%s%s", code, out, errs)
	}
	checkPrintable(t, "diff's text", out+errs)
	checkNoFakeLine(t, "diff's text", out)

	md, errs, code := imagectl(t, nil, "diff", a, b, "--output", "markdown")
	if code != 1 || !strings.Contains(md, "- `` + evil\\x1b]0;owned\\a") {
		t.Errorf("diff markdown: exit %d\n%s%s", code, md, errs)
	}
	checkMarkdown(t, md)

	js, _, _ := imagectl(t, nil, "diff", a, b, "--output", "json")
	var d manifest.Diff
	if err := json.Unmarshal([]byte(js), &d); err != nil || len(d.Packages.Added) != 1 || !strings.HasPrefix(d.Packages.Added[0].Name, "evil"+hostileText) {
		t.Errorf("diff json: %v %+v", err, d.Packages)
	}
}

// TestDiffEscapesSBOMValues: the package names and versions of an SBOM's
// purls, and its subject, are escaped as a manifest's are.
func TestDiffEscapesSBOMValues(t *testing.T) {
	dir := t.TempDir()
	bom := func(file, name, purl string) string {
		doc := map[string]any{"bomFormat": "CycloneDX", "specVersion": "1.6",
			"metadata":   map[string]any{"component": map[string]any{"type": "operating-system", "name": name, "version": "1\n# Owned"}},
			"components": []any{map[string]any{"type": "library", "name": "p", "purl": purl}}}
		b, _ := json.Marshal(doc)
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := bom("a.cdx.json", "demo", "pkg:deb/debian/curl@8.0?arch=amd64")
	b := bom("b.cdx.json", "demo"+hostileText, "pkg:deb/debian/evil%1B%5D0%3Bowned%07%0Aerror%3A%20fake%0A%23%20Owned%20%3Cb%3E@1%3Cscript%3E?arch=amd64")
	out, errs, code := imagectl(t, nil, "diff", a, b)
	if code != 1 || !strings.Contains(out, `+ evil\x1b]0;owned\a\nerror: fake\n# owned <b> 1<script>`) {
		t.Errorf("diff of SBOMs: exit %d\n%s%s", code, out, errs)
	}
	checkPrintable(t, "diff of SBOMs", out+errs)
	checkNoFakeLine(t, "diff of SBOMs", out)
	md, errs, code := imagectl(t, nil, "diff", a, b, "-o", "markdown")
	if code != 1 {
		t.Errorf("diff of SBOMs, markdown: exit %d\n%s%s", code, md, errs)
	}
	checkMarkdown(t, md)
}

// TestDryRunEscapesTitleAndDescription: a recipe's title and a layer's
// description print escaped in the plan.
func TestDryRunEscapesTitleAndDescription(t *testing.T) {
	dir := t.TempDir()
	recipe := `image "hostile" {
  title = "Hostile\u001b]0;owned\u0007\u001b[2J\u009b31m\u202e\nerror: fake title"
  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  layer "tools" {
    description = "tools\u001b[2J\nerror: fake description"
    packages    = ["curl"]
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "recipe.hcl"), []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "base.qcow2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runImagectl(t, nil, "build", filepath.Join(dir, "recipe.hcl"), "--dry-run")
	if code != 0 || !strings.Contains(out, `title:        Hostile\x1b]0;owned\a\x1b[2J\u009b31m\u202e\nerror: fake title`) ||
		!strings.Contains(out, `     tools\x1b[2J\nerror: fake description`) {
		t.Errorf("dry run: exit %d\n%s%s", code, out, errs)
	}
	checkPrintable(t, "the plan", out+errs)
	checkNoFakeLine(t, "the plan", out)
}

// TestUploadEscapesMAASErrorBody: what MAAS writes in a refusal reaches
// the error escaped, on imagectl's line.
func TestUploadEscapesMAASErrorBody(t *testing.T) {
	sim, sites, tgz, env := uploadFixture(t)
	sim.Inject(maassim.Fault{On: maassim.OpCreate, Kind: maassim.Refuse, Status: 400, Body: `{"name": ["bad` + hostileText + `"]}`})
	out, errs, code := runImagectl(t, env, "upload", tgz, "--site", "sim", "--sites", sites, "--base-image", "ubuntu/noble", "--insecure-skip-verify")
	if code != 1 || !strings.Contains(errs, `MAAS answered 400 Bad Request: {"name": ["bad\x1b]0;owned\a\x1b[2J\u009b31m\u202e\nerror: fake"]}`) {
		t.Errorf("upload: exit %d\n%s%s", code, out, errs)
	}
	checkPrintable(t, "upload's output", out+errs)
	checkNoFakeLine(t, "upload's stderr", errs)
}

// TestStatusRefusedPortEndsWithinTimeout: a MAAS whose port refuses
// connections is reported in about the site's timeout (it took 32 s with
// timeout = "5s": every backoff of the default schedule).
func TestStatusRefusedPortEndsWithinTimeout(t *testing.T) {
	addr := testenv.RefusedAddr(t)
	dir, _ := stored(t, "1.0.0")
	sites := filepath.Join(t.TempDir(), "sites.hcl")
	src := fmt.Sprintf("site \"dead\" {\n  maas_url    = \"http://%s/MAAS\"\n  api_key_env = \"DEAD_MAAS_KEY\"\n  timeout     = \"3s\"\n}\n", addr)
	if err := os.WriteFile(sites, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"IMAGECTL_STORE=" + dir, "IMAGECTL_SITES=" + sites, "DEAD_MAAS_KEY=a:b:c"}
	start := time.Now()
	_, errs, code := imagectl(t, env, "status", "--site", "dead")
	took := time.Since(start)
	if code == 0 || !strings.Contains(errs, "connection refused") || !strings.Contains(errs, "within the timeout of 3s") {
		t.Errorf("status: exit %d\n%s", code, errs)
	}
	if took > 5*time.Second {
		t.Errorf("status against a refused port took %v with timeout = \"3s\"", took)
	}
}

// TestStatusEscapesMAASNames: a boot resource that MAAS holds under a
// hostile name (anyone with an admin key can upload one) prints escaped in
// status, in its table and in its drift.
func TestStatusEscapesMAASNames(t *testing.T) {
	sim, sites, _, env := uploadFixture(t)
	dir, _ := stored(t, "1.0.0")
	env = append(env, "IMAGECTL_STORE="+dir, "IMAGECTL_SITES="+sites)
	img := filepath.Join(t.TempDir(), "x.tgz")
	b := []byte("not an image")
	if err := os.WriteFile(img, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := maas.New(maas.Config{URL: sim.URL, APIKey: sim.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(context.Background(), maas.Image{Path: img, SHA256: digest.Bytes(b).Hex(), Size: int64(len(b)),
		Name: "demo-9-9-9" + hostileText, Title: "x", Architecture: "amd64/generic", BaseImage: "ubuntu/noble"}, nil); err != nil {
		t.Fatal(err)
	}
	out, errs, code := imagectl(t, env, "status", "--site", "sim")
	if !strings.Contains(out, `demo-9-9-9\x1b]0;owned\a\x1b[2J\u009b31m\u202e\nerror: fake`) {
		t.Errorf("status: exit %d\n%s%s", code, out, errs)
	}
	checkPrintable(t, "status", out+errs)
	checkNoFakeLine(t, "status", out)
}
