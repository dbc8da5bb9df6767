package manifest

import (
	"fmt"
	"sort"
	"strings"

	debversion "github.com/knqyf263/go-deb-version"
)

// Diff is what changed from manifest A to manifest B, grouped the way an
// operator asks before a rollout.
type Diff struct {
	A          Ref            `json:"a"`
	B          Ref            `json:"b"`
	Equal      bool           `json:"equal"`
	Base       []FieldChange  `json:"base"`
	Packages   PackageChanges `json:"packages"`
	KernelArgs ListChanges    `json:"kernel_args"`
	Layers     []Change       `json:"layers"`
	Files      []Change       `json:"files"`
	Bundles    []Change       `json:"bundles"`
	Netdata    []FieldChange  `json:"netdata"`
	Services   ListChanges    `json:"services_enabled"`
	Artifact   []FieldChange  `json:"artifact"`
}

// Ref names one side of a diff.
type Ref struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// PackageChanges are package differences, by Debian version order.
type PackageChanges struct {
	Added      []Package        `json:"added"`
	Removed    []Package        `json:"removed"`
	Upgraded   []PackageVersion `json:"upgraded"`
	Downgraded []PackageVersion `json:"downgraded"`
	// NativeArchitecture is the architecture most of the packages have
	// (not "all"); a change in another is written name:arch, as dpkg
	// writes a foreign package.
	NativeArchitecture string `json:"native_architecture,omitempty"`
}

// PackageVersion is a package whose version changed.
type PackageVersion struct {
	Name         string `json:"name"`
	Architecture string `json:"architecture,omitempty"`
	From         string `json:"from"`
	To           string `json:"to"`
}

// ListChanges are items added to and removed from a list.
type ListChanges struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
}

// Change is an item (layer, file, bundle) added, removed or changed.
type Change struct {
	Name   string `json:"name"`
	Change string `json:"change"` // added, removed, changed
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
}

// FieldChange is a setting whose value changed.
type FieldChange struct {
	Field string `json:"field"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// Compare computes the differences from a to b. Build timings, dates and
// the builder's accelerator are not differences: they say how an image was
// built, not what it holds.
func Compare(a, b *Manifest) *Diff {
	d := &Diff{
		A: Ref{a.Image.Name, a.Image.Version},
		B: Ref{b.Image.Name, b.Image.Version},
	}
	field := func(list *[]FieldChange, name, from, to string) {
		if from != to {
			*list = append(*list, FieldChange{name, from, to})
		}
	}
	field(&d.Base, "source", a.Base.Source, b.Base.Source)
	field(&d.Base, "sha256", a.Base.SHA256, b.Base.SHA256)
	field(&d.Base, "size", fmt.Sprint(a.Base.Size), fmt.Sprint(b.Base.Size))

	d.Packages = ComparePackages(a.Packages, b.Packages)
	d.KernelArgs = compareLists(a.KernelArgs, b.KernelArgs)
	d.Services = compareLists(a.Services.Enabled, b.Services.Enabled)

	layerKey := func(l Layer) string {
		if !l.Enabled {
			return "disabled"
		}
		return l.Digest
	}
	d.Layers = compareKeyed(keyed(a.Layers, func(l Layer) (string, string) { return l.Name, layerKey(l) }),
		keyed(b.Layers, func(l Layer) (string, string) { return l.Name, layerKey(l) }))
	fileKey := func(f File) (string, string) { return f.Path, f.SHA256 + " " + f.Mode + " " + f.Owner }
	d.Files = compareKeyed(keyed(a.Files, fileKey), keyed(b.Files, fileKey))
	bundleKey := func(bd Bundle) (string, string) { return bd.Name, bd.Digest + " " + bd.Destination }
	d.Bundles = compareKeyed(keyed(a.Bundles, bundleKey), keyed(b.Bundles, bundleKey))

	na, nb := a.Netdata, b.Netdata
	if na == nil {
		na = &Netdata{}
	}
	if nb == nil {
		nb = &Netdata{}
	}
	field(&d.Netdata, "enabled", fmt.Sprint(na.Enabled), fmt.Sprint(nb.Enabled))
	field(&d.Netdata, "bind", na.Bind, nb.Bind)
	field(&d.Netdata, "retention_mb", fmt.Sprint(na.RetentionMB), fmt.Sprint(nb.RetentionMB))
	field(&d.Netdata, "update_every", fmt.Sprint(na.UpdateEvery), fmt.Sprint(nb.UpdateEvery))
	field(&d.Netdata, "collectors", strings.Join(na.Collectors, " "), strings.Join(nb.Collectors, " "))

	if a.Artifact != nil && b.Artifact != nil {
		field(&d.Artifact, "size", fmt.Sprint(a.Artifact.Size), fmt.Sprint(b.Artifact.Size))
		field(&d.Artifact, "sha256", a.Artifact.SHA256, b.Artifact.SHA256)
	}

	d.Equal = len(d.Base) == 0 && d.Packages.Empty() && d.KernelArgs.empty() && d.Services.empty() &&
		len(d.Layers) == 0 && len(d.Files) == 0 && len(d.Bundles) == 0 && len(d.Netdata) == 0 && len(d.Artifact) == 0
	return d
}

// Empty says whether nothing changed.
func (p PackageChanges) Empty() bool {
	return len(p.Added)+len(p.Removed)+len(p.Upgraded)+len(p.Downgraded) == 0
}

func (l ListChanges) empty() bool { return len(l.Added)+len(l.Removed) == 0 }

// ComparePackages is the package changes from a to b, by name and
// architecture, versions ordered as dpkg orders them.
func ComparePackages(a, b []Package) PackageChanges {
	pc := PackageChanges{Added: []Package{}, Removed: []Package{}, Upgraded: []PackageVersion{}, Downgraded: []PackageVersion{}}
	index := func(ps []Package) map[string]Package {
		m := map[string]Package{}
		for _, p := range ps {
			m[p.Name+":"+p.Architecture] = p
		}
		return m
	}
	ma, mb := index(a), index(b)
	pc.NativeArchitecture = nativeArchitecture(b)
	if pc.NativeArchitecture == "" {
		pc.NativeArchitecture = nativeArchitecture(a)
	}
	for _, k := range sortedKeys(ma, mb) {
		pa, inA := ma[k]
		pb, inB := mb[k]
		switch {
		case !inA:
			pc.Added = append(pc.Added, pb)
		case !inB:
			pc.Removed = append(pc.Removed, pa)
		case pa.Version != pb.Version:
			change := PackageVersion{Name: pa.Name, Architecture: pa.Architecture, From: pa.Version, To: pb.Version}
			if debLess(pb.Version, pa.Version) {
				pc.Downgraded = append(pc.Downgraded, change)
			} else {
				pc.Upgraded = append(pc.Upgraded, change)
			}
		}
	}
	return pc
}

// nativeArchitecture is the architecture most packages have, "all" aside
// (the first in name order on a tie); "" for none.
func nativeArchitecture(ps []Package) string {
	count := map[string]int{}
	best := ""
	for _, p := range ps {
		if p.Architecture == "" || p.Architecture == "all" {
			continue
		}
		count[p.Architecture]++
		if n := count[p.Architecture]; n > count[best] || n == count[best] && p.Architecture < best {
			best = p.Architecture
		}
	}
	return best
}

// debLess orders versions as dpkg does; unparsable ones by string.
func debLess(x, y string) bool {
	vx, errx := debversion.NewVersion(x)
	vy, erry := debversion.NewVersion(y)
	if errx != nil || erry != nil {
		return x < y
	}
	return vx.LessThan(vy)
}

func compareLists(a, b []string) ListChanges {
	lc := ListChanges{Added: []string{}, Removed: []string{}}
	inA, inB := set(a), set(b)
	for _, x := range b {
		if !inA[x] {
			lc.Added = append(lc.Added, x)
		}
	}
	for _, x := range a {
		if !inB[x] {
			lc.Removed = append(lc.Removed, x)
		}
	}
	return lc
}

func set(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func keyed[T any](items []T, key func(T) (string, string)) map[string]string {
	m := map[string]string{}
	for _, it := range items {
		k, v := key(it)
		m[k] = v
	}
	return m
}

func compareKeyed(a, b map[string]string) []Change {
	out := []Change{}
	for _, k := range sortedKeys(a, b) {
		va, inA := a[k]
		vb, inB := b[k]
		switch {
		case !inA:
			out = append(out, Change{Name: k, Change: "added", To: vb})
		case !inB:
			out = append(out, Change{Name: k, Change: "removed", From: va})
		case va != vb:
			out = append(out, Change{Name: k, Change: "changed", From: va, To: vb})
		}
	}
	return out
}

func sortedKeys[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range []map[string]V{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}
