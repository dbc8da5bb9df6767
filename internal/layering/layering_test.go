package layering

import (
	"bufio"
	"errors"
	"fmt"
	"go/build"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// layer is one height of the architecture. A package may import the
// packages of the layers below its own; those of its own layer only when
// the layer is sideways (small helpers that may build on each other);
// never those above.
type layer struct {
	name     string
	sideways bool
	pkgs     []string // import paths relative to the module
}

// layers is the module's architecture, bottom first: every package is in
// exactly one. Place a new package in the lowest layer whose packages it
// needs nothing above. Storage sits below the operations (build, upload,
// smoke test), which stay siblings that do not know each other; only
// release ties a build, a store and a site together (and only it may use
// a store and the MAAS client at once), and the CLI calls it.
var layers = []layer{
	{name: "foundation (internal helpers, progress events, the libguestfs appliance)", sideways: true, pkgs: []string{
		"internal/appliance", "internal/atomicfile", "internal/backoff", "internal/buildinfo", "internal/cachedir", "internal/digest", "internal/environ", "internal/event",
		"internal/deb822",
		"internal/filelock", "internal/fsmode", "internal/golden", "internal/hashstamp", "internal/hclkit", "internal/hclkit/hclkittest", "internal/heappeak", "internal/layering", "internal/qemuproc", "internal/readlimit", "internal/redact", "internal/shell", "internal/simfault", "internal/tcpport", "internal/testbase",
		"internal/testenv", "internal/textsafe", "internal/textsafe/textsafetest", "internal/tgztest",
	}},
	{name: "records (the build manifest and the MAAS names beside it)", pkgs: []string{
		"manifest",
	}},
	{name: "the manifest's test helpers (manifests written and edited: over manifest)", pkgs: []string{
		"manifest/manifesttest",
	}},
	{name: "the step vocabulary (customization steps as plain data, and the bundle entries a recipe's bundle is read into)", pkgs: []string{
		"builder/steps",
	}},
	{name: "definitions (recipes, validation, signing, the SBOM and provenance documents, the seam to the appliance)", pkgs: []string{
		"builder/guest", "provenance", "recipes", "sbom", "signing", "validate",
	}},
	{name: "signing's test helpers (a real artifact, loaded keys, tampered documents, cosign: over signing)", pkgs: []string{
		"signing/signingtest",
	}},
	{name: "site definitions (the sites file: MAAS sites, deploy profiles, groups, the verify-key policy)", pkgs: []string{
		"sites",
	}},
	{name: "compilation (recipes' layers into steps)", pkgs: []string{
		"builder/compile",
	}},
	{name: "the first-boot executor (the compiled steps as a POSIX sh script a host booted from the base image runs, and its NoCloud user-data)", pkgs: []string{
		"builder/firstboot",
	}},
	{name: "plans (what a build will do, before anything runs: the static manifest, the steps, the local inputs)", pkgs: []string{
		"builder/plan",
	}},
	{name: "parts (what one operation is made of)", pkgs: []string{
		"builder/attest", "builder/base", "builder/debcache", "builder/ext4tar", "builder/ext4tar/ext4tartest", "builder/layercache", "deploycheck", "profile", "profile/profilesim", "upload/maas", "upload/maassim",
	}},
	{name: "build parts (the step interpreter and the packer, on the parts above)", pkgs: []string{
		"builder/apply", "builder/pack",
	}},
	{name: "storage (the store's interfaces, the directory store, Latest and NextVersion over one core)", pkgs: []string{
		"store",
	}},
	{name: "remote stores (versions in an OCI registry, promotions in git)", pkgs: []string{
		"store/gitcatalog", "store/gitcatalog/gittest", "store/oci", "store/oci/ocitest",
	}},
	{name: "operations (build, upload, smoke test, the check of deployed hosts: siblings)", pkgs: []string{
		"builder", "hostcheck", "hostcheck/sshdtest", "smoke", "upload",
		"racks",
	}},
	{name: "executors and stores by name (the libguestfs executor, opening a store by name, the cache directory as a whole)", pkgs: []string{
		"builder/guestfs", "cache", "store/storeopen", "store/storetest",
	}},
	{name: "release (a build into a store, the verified upload, promotion to sites: store, signing, MAAS and the admin API together)", pkgs: []string{
		"release",
	}},
	{name: "the CLI", pkgs: []string{
		"cmd/imagectl",
	}},
}

// testOnly are helpers that only test files may import (from any layer):
// they never link into imagectl.
var testOnly = map[string]bool{
	"internal/golden":          true,
	"internal/heappeak":        true,
	"internal/simfault":        true,
	"internal/testbase":        true,
	"internal/testenv":         true,
	"hostcheck/sshdtest":       true,
	"internal/tgztest":         true,
	"manifest/manifesttest":    true,
	"profile/profilesim":       true,
	"signing/signingtest":      true,
	"store/gitcatalog/gittest": true,
	"store/oci/ocitest":        true,
	"store/storetest":          true,
	"upload/maassim":           true,

	"builder/ext4tar/ext4tartest":    true,
	"internal/hclkit/hclkittest":     true,
	"internal/textsafe/textsafetest": true,
}

// testUp are the imports of a higher or sibling package that a package's
// test files may make, each with why: a test that checks one package
// against another, or needs what another operation makes. Production code
// never gets these.
var testUp = map[string]map[string]string{
	"builder/firstboot": {
		"builder/ext4tar": "the first-boot script's real test unpacks the test base image's root filesystem to run the script in a chroot",
	},
	"recipes": {
		"builder/plan": "the fuzz test plans every recipe it parses",
	},
	"validate": {
		"builder/compile": "the validation script's tests read the files the compiled layers write",
	},
	"smoke": {
		"builder":         "the smoke tests boot the stand-in image a real build makes",
		"builder/guestfs": "the smoke tests boot the stand-in image a real build makes",
	},
}

// restricted are third-party packages only the packages in by may import
// in production code (tests and test helpers never link into imagectl),
// and why; one that needs cgo no untagged file may import, test or not.
var restricted = []struct {
	prefix   string
	by       []string
	untagged bool // whether the untagged (CGO-free) build may import it
	why      string
}{
	{"libguestfs.org/guestfs", []string{"internal/appliance", "builder/guestfs", "smoke"}, false,
		"libguestfs is cgo: only guestfs-tagged code of the appliance, the executor and the smoke deploy uses it"},
	{"github.com/canonical/gomaasclient", []string{"upload/maas"}, true,
		"the MAAS client stays out of builds, smoke tests and --dry-run"},
	{"github.com/juju/gomaasapi", []string{"upload/maas"}, true,
		"the MAAS client stays out of builds, smoke tests and --dry-run"},
	{"oras.land/oras-go", []string{"store/oci"}, true,
		"the registry client is the registry store's own"},
	{"github.com/spdx/tools-golang", []string{"sbom"}, true,
		"the SPDX document is the sbom package's own"},
	{"github.com/CycloneDX/cyclonedx-go", []string{"sbom"}, true,
		"the CycloneDX BOM is the sbom package's own"},
	{"github.com/in-toto/attestation", []string{"provenance"}, true,
		"in-toto statements and SLSA provenance are the provenance package's own"},
}

// orchestrator is the one package that may import both a store and the
// MAAS client: release, which ties a stored version to a site. Anything
// else that did would be a second place where promotion happens.
const orchestrator = "release"

// isStore reports whether an import path (relative to the module) is a
// store: store itself, a remote store, or opening one by name.
func isStore(p string) bool {
	return (p == "store" || strings.HasPrefix(p, "store/")) && !testOnly[p]
}

// isMAASClient reports whether an import path (relative to the module) is
// the MAAS client, or the upload operation built on it.
func isMAASClient(p string) bool { return p == "upload/maas" || p == "upload" }

// tagSets are the builds the fence checks: the untagged (CGO-free) one and
// the one with libguestfs.
var tagSets = [][]string{nil, {"guestfs"}}

const untagged = "the untagged build"

// edge is one import of one package in one build.
type edge struct {
	from, to string // to is relative to the module when internal
	internal bool
	test     bool
	tags     string
	pos      string
}

// scan lists the module's packages (import paths relative to root's
// module) and their imports in every tag set, test files' included.
func scan(root string) (pkgs map[string]bool, edges []edge, err error) {
	module, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, nil, err
	}
	pkgs = map[string]bool{}
	err = filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if dir != root && (name == "testdata" || name == "third_party" || name == "vendor" ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, dir)
		rel = filepath.ToSlash(rel)
		for _, tags := range tagSets {
			ctx := build.Default
			ctx.CgoEnabled = true
			ctx.BuildTags = tags
			p, err := ctx.ImportDir(dir, 0)
			var noGo *build.NoGoError
			if errors.As(err, &noGo) {
				continue
			}
			if err != nil {
				return fmt.Errorf("reading package %s: %w", rel, err)
			}
			pkgs[rel] = true
			tagName := untagged
			if len(tags) > 0 {
				tagName = "the build with -tags " + strings.Join(tags, ",")
			}
			for _, set := range []struct {
				imports []string
				pos     map[string][]token.Position
				test    bool
			}{
				{p.Imports, p.ImportPos, false},
				{p.TestImports, p.TestImportPos, true},
				{p.XTestImports, p.XTestImportPos, true},
			} {
				for _, imp := range set.imports {
					e := edge{from: rel, to: imp, test: set.test, tags: tagName}
					if ps := set.pos[imp]; len(ps) > 0 {
						e.pos = fmt.Sprintf("%s:%d", path.Join(rel, filepath.Base(ps[0].Filename)), ps[0].Line)
					}
					if imp == module || strings.HasPrefix(imp, module+"/") {
						e.to, e.internal = strings.TrimPrefix(strings.TrimPrefix(imp, module), "/"), true
					}
					edges = append(edges, e)
				}
			}
		}
		return nil
	})
	return pkgs, edges, err
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	return "", fmt.Errorf("%s has no module line", gomod)
}

// check returns every breach of the fence by the scanned packages and
// edges, as messages that say what to change.
func check(pkgs map[string]bool, edges []edge) []string {
	const where = "internal/layering/layering_test.go"
	var errs []string
	level := map[string]int{}
	for i, l := range layers {
		for _, p := range l.pkgs {
			if _, dup := level[p]; dup {
				errs = append(errs, fmt.Sprintf("package %s is in two layers of the table in %s", p, where))
			}
			level[p] = i
		}
	}
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if _, ok := level[p]; !ok {
			errs = append(errs, fmt.Sprintf("package %s is in no layer: place it in the table in %s (the lowest layer whose packages it needs nothing above; a test-only helper goes in testOnly too)", p, where))
		}
	}
	for _, l := range layers {
		for _, p := range l.pkgs {
			if !pkgs[p] {
				errs = append(errs, fmt.Sprintf("the table in %s places %s, which is no package of the module: remove it", where, p))
			}
		}
	}
	for p, ok := range testOnly {
		if ok && !pkgs[p] {
			errs = append(errs, fmt.Sprintf("testOnly in %s names %s, which is no package of the module: remove it", where, p))
		}
	}

	usedUp := map[[2]string]bool{}
	// A breach is reported once, naming the builds it is in.
	var order []string
	builds := map[string][]string{}
	report := func(e edge, msg string) {
		if _, ok := builds[msg]; !ok {
			order = append(order, msg)
		}
		if !slices.Contains(builds[msg], e.tags) {
			builds[msg] = append(builds[msg], e.tags)
		}
	}
	for _, e := range edges {
		what := "imports"
		if e.test {
			what = "imports in a test"
		}
		at := e.from
		if e.pos != "" {
			at = e.pos
		}
		if !e.internal {
			for _, r := range restricted {
				if e.to != r.prefix && !strings.HasPrefix(e.to, r.prefix+"/") {
					continue
				}
				// Tests and test helpers never link into imagectl, but
				// nothing untagged may need cgo.
				allowed := e.test || testOnly[e.from] || slices.Contains(r.by, e.from)
				if !allowed || (!r.untagged && e.tags == untagged) {
					report(e, fmt.Sprintf("%s: %s %s %s: %s", at, e.from, what, e.to, r.why))
				}
			}
			continue
		}
		if e.to == e.from {
			continue // an external test of the package
		}
		from, okFrom := level[e.from]
		to, okTo := level[e.to]
		if !okFrom || !okTo {
			continue // reported above
		}
		switch {
		case strings.HasPrefix(e.to, "cmd/"):
			report(e, fmt.Sprintf("%s: %s %s %s: nothing imports the CLI; move what it needs into a lower package", at, e.from, what, e.to))
		case testOnly[e.to] && !e.test && !testOnly[e.from]:
			report(e, fmt.Sprintf("%s: %s %s test-only helper %s: only tests and test helpers may import it", at, e.from, what, e.to))
		case testOnly[e.to]:
		case to < from:
		case to == from && layers[from].sideways:
		case e.test && testUp[e.from][e.to] != "":
			usedUp[[2]string{e.from, e.to}] = true
		default:
			rel := "a higher layer"
			if to == from {
				rel = "a sibling in its own layer"
			}
			report(e, fmt.Sprintf("%s: %s (layer %q) %s %s (layer %q), %s: imports point down only; move the shared part into a lower package (table in %s)",
				at, e.from, layers[from].name, what, e.to, layers[to].name, rel, where))
		}
	}
	// No package but the orchestrator imports both a store and the MAAS
	// client in production code (tests may bring both up).
	type both struct{ store, maas *edge }
	seen := map[string]*both{}
	for i := range edges {
		e := &edges[i]
		if !e.internal || e.test || e.from == orchestrator || testOnly[e.from] {
			continue
		}
		key := e.from + "\x00" + e.tags
		b := seen[key]
		if b == nil {
			b = &both{}
			seen[key] = b
		}
		switch {
		case isStore(e.to) && b.store == nil:
			b.store = e
		case isMAASClient(e.to) && b.maas == nil:
			b.maas = e
		default:
			continue
		}
		if b.store != nil && b.maas != nil {
			at := e.from
			if e.pos != "" {
				at = e.pos
			}
			report(*e, fmt.Sprintf("%s: %s imports both the store %s and the MAAS client %s: only %s ties a stored version to a site; call it (table in %s)",
				at, e.from, b.store.to, b.maas.to, orchestrator, where))
		}
	}
	for _, msg := range order {
		errs = append(errs, msg+" ["+strings.Join(builds[msg], "; ")+"]")
	}
	for from, tos := range testUp {
		for to := range tos {
			if !usedUp[[2]string{from, to}] {
				errs = append(errs, fmt.Sprintf("testUp in %s lets the tests of %s import %s, which they no longer need to: remove it", where, from, to))
			}
		}
	}
	return errs
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestImportFence holds the module to its layers.
func TestImportFence(t *testing.T) {
	pkgs, edges, err := scan(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages: the scan is broken", len(pkgs))
	}
	for _, msg := range check(pkgs, edges) {
		t.Error(msg)
	}
}

// TestFenceCatches feeds the check the breaches it exists for.
func TestFenceCatches(t *testing.T) {
	pkgs := map[string]bool{}
	for _, l := range layers {
		for _, p := range l.pkgs {
			pkgs[p] = true
		}
	}
	var used []edge
	for from, tos := range testUp {
		for to := range tos {
			used = append(used, edge{from: from, to: to, internal: true, test: true, tags: untagged})
		}
	}
	for _, tc := range []struct {
		name string
		add  string // a package missing from the table
		e    edge
		more []edge // edges besides e
		want string
	}{
		{name: "builder imports upload", e: edge{from: "builder", to: "upload", internal: true}, want: "imports upload"},
		{name: "smoke imports builder", e: edge{from: "smoke", to: "builder", internal: true}, want: "a sibling in its own layer"},
		{name: "manifest imports recipes", e: edge{from: "manifest", to: "recipes", internal: true}, want: "a higher layer"},
		{name: "a test of builder imports the CLI", e: edge{from: "builder", to: "cmd/imagectl", internal: true, test: true}, want: "nothing imports the CLI"},
		{name: "a test helper in production code", e: edge{from: "store", to: "store/storetest", internal: true}, want: "only tests and test helpers may import it"},
		{name: "gomaasclient in the builder", e: edge{from: "builder", to: "github.com/canonical/gomaasclient/client"}, want: "stays out of builds"},
		{name: "libguestfs untagged", e: edge{from: "smoke", to: "libguestfs.org/guestfs", tags: untagged}, want: "libguestfs is cgo"},
		{name: "a new package", add: "internal/newthing", want: "package internal/newthing is in no layer: place it"},
		{name: "the CLI promotes by itself", e: edge{from: "cmd/imagectl", to: "upload/maas", internal: true},
			more: []edge{{from: "cmd/imagectl", to: "store/oci", internal: true, tags: "the build with -tags guestfs"}},
			want: "imports both the store store/oci and the MAAS client upload/maas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pkgs
			if tc.add != "" {
				p = map[string]bool{tc.add: true}
				for k := range pkgs {
					p[k] = true
				}
			}
			edges := append([]edge{}, used...)
			if tc.e.from != "" {
				if tc.e.tags == "" {
					tc.e.tags = "the build with -tags guestfs"
				}
				edges = append(edges, tc.e)
			}
			edges = append(edges, tc.more...)
			errs := check(p, edges)
			if len(errs) != 1 || !strings.Contains(errs[0], tc.want) {
				t.Errorf("got %q, want one message with %q", errs, tc.want)
			}
		})
	}
	if errs := check(pkgs, used); len(errs) != 0 {
		t.Errorf("the table alone breaks the fence: %q", errs)
	}
	// The orchestrator, and tests, may import both.
	used = append(used,
		edge{from: orchestrator, to: "store", internal: true, tags: untagged},
		edge{from: orchestrator, to: "upload/maas", internal: true, tags: untagged},
		edge{from: "cmd/imagectl", to: "store", internal: true, test: true, tags: untagged},
		edge{from: "cmd/imagectl", to: "upload/maas", internal: true, test: true, tags: untagged},
	)
	if errs := check(pkgs, used); len(errs) != 0 {
		t.Errorf("release or a test importing a store and the MAAS client breaks the fence: %q", errs)
	}
}
