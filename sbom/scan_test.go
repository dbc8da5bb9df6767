package sbom

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const testStatus = `Package: libc6
Status: install ok installed
Priority: optional
Section: libs
Installed-Size: 12986
Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>
Architecture: amd64
Multi-Arch: same
Source: glibc
Version: 2.36-9
Depends: libgcc-s1
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.
 Package: not-a-package
 Status: install ok installed

Package: oldpkg
Status: deinstall ok config-files
Architecture: amd64
Version: 0.9-1
Conffiles:
 /etc/oldpkg.conf 0123456789abcdef0123456789abcdef

Package: libfoo1
Status: install ok installed
Maintainer: Foo Team <foo@example.org>
Architecture: i386
Multi-Arch: same
Source: foo (1.2-1)
Version: 1.2-1+b1

Package: libfoo1
Status: install ok installed
Maintainer: Foo Team <foo@example.org>
Architecture: amd64
Multi-Arch: same
Source: foo (1.2-1)
Version: 1.2-1+b1

Package: libfoo-dev
Status: install ok installed
Maintainer: Foo Team <foo@example.org>
Architecture: amd64
Source: foo (1.2-1)
Version: 1.2-1+b1

Package: bash
Essential: yes
Status: install ok installed
Maintainer: Matthias Klose <doko@debian.org>
Architecture: amd64
Version: 1:5.2.15-2

Package: held
Status: hold ok installed
Maintainer: Nobody
Architecture: all
Version: 3.0

Package: absdoc
Status: install ok installed
Architecture: all
Version: 1

Package: halfway
Status: install reinstreq half-installed
Architecture: amd64
Version: 2
`

const libcCopyright = `Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: GNU C Library
Source: https://www.gnu.org/software/libc/

Files: *
Copyright: 1991-2023 Free Software Foundation, Inc.
License: GPL-2+ or Artistic
 This program is free software.
 .
 License: NOT-A-FIELD

Files: sunrpc/*
Copyright: Sun Microsystems
License: BSD-3-clause

Files: debian/*
license: lgpl-2.1+

Files: weird/*
License: Weird License 1.0

Files: again/*
License: GPL-2+ or Artistic

License: GPL-2+
 On Debian systems, see /usr/share/common-licenses/GPL-2.
`

const sourcesList = `# the Debian mirror
deb http://deb.debian.org/debian bookworm main contrib
deb [arch=amd64 signed-by=/usr/share/keyrings/vendor.gpg] https://user:secret@repo.example.com/apt stable main # vendor
deb [ arch=amd64 ] http://other.example/debian bookworm non-free
deb-src http://deb.debian.org/debian bookworm main
#deb http://disabled.example/debian bookworm main
deb http://broken.example/only-uri
`

const debSources = `# deb822
Types: deb deb-src
URIs: https://token:s3cr3t@mirror.example/debian
Suites: bookworm bookworm-updates
Components: main non-free-firmware
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBGPL0BUBEAC
 -----END PGP PUBLIC KEY BLOCK-----

Enabled: no
Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
`

const osRelease = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
`

// debianImage is a small Debian root filesystem exercising what Scan reads,
// with the options to scan it and the inventory it should give.
func debianImage(t testing.TB) (string, ScanOptions, *Inventory) {
	t.Helper()
	tgz := writeTgz(t,
		dir("./"),
		dir("./etc/"),
		symlink("./etc/os-release", "../usr/lib/os-release"),
		// Copyright files before and after the status file.
		reg("./usr/share/doc/libc6/copyright", libcCopyright),
		symlink("./usr/share/doc/libfoo-dev", "libfoo1"),
		symlink("./usr/share/doc/held/copyright", "../libfoo1/copyright"),
		symlink("./usr/share/doc/absdoc", "/usr/share/doc/libfoo1"),
		reg("./var/lib/dpkg/status", testStatus),
		reg("usr/share/doc/libfoo1/copyright", "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nLicense: Expat\n"),
		reg("/usr/share/doc/bash/README", "no copyright file here\n"),
		reg("./usr/lib/os-release", osRelease),
		reg("./etc/apt/sources.list", sourcesList),
		reg("./etc/apt/sources.list.d/vendor.sources", debSources),
		reg("./etc/apt/sources.list.d/notes.txt", "deb http://not.read/ x main\n"),
		reg("./etc/imagectl/recipe.conf", "answer = 42\n"),
		reg("./etc/imagectl/unwanted.conf", "nope\n"),
		reg("./opt/tool/bin/tool", "#!/bin/sh\necho tool\n"),
		hardlink("./opt/tool/bin/tool-again", "./opt/tool/bin/tool"),
		symlink("./opt/tool/bin/latest", "tool"),
		entry{Name: "./opt/tool/dev/null", Type: tar.TypeChar},
		reg("./opt/tool/share/data.txt", "data\n"),
		reg("./opt/toolbox/not-a-bundle-file", "x\n"),
		symlink("./etc/symlinked.conf", "/etc/imagectl/recipe.conf"),
	)
	opts := ScanOptions{
		Files: []string{"/etc/imagectl/recipe.conf", "/etc/apt/sources.list", "/etc/symlinked.conf", "/etc/missing.conf"},
		Dirs:  []string{"/opt/tool/"},
	}
	libfoo := func(arch string) Package {
		return Package{Name: "libfoo1", Version: "1.2-1+b1", Architecture: arch, Source: "foo", SourceVersion: "1.2-1",
			Maintainer: "Foo Team <foo@example.org>", Licenses: []string{"Expat"}, License: "MIT"}
	}
	want := &Inventory{
		OS: OSRelease{ID: "debian", VersionID: "12", VersionCodename: "bookworm", PrettyName: "Debian GNU/Linux 12 (bookworm)"},
		Packages: []Package{
			{Name: "absdoc", Version: "1", Architecture: "all", Source: "absdoc", SourceVersion: "1",
				Licenses: []string{"Expat"}, License: "MIT"},
			{Name: "bash", Version: "1:5.2.15-2", Architecture: "amd64", Source: "bash", SourceVersion: "1:5.2.15-2",
				Maintainer: "Matthias Klose <doko@debian.org>", License: "NOASSERTION"},
			{Name: "held", Version: "3.0", Architecture: "all", Source: "held", SourceVersion: "3.0",
				Maintainer: "Nobody", Licenses: []string{"Expat"}, License: "MIT"},
			{Name: "libc6", Version: "2.36-9", Architecture: "amd64", Source: "glibc", SourceVersion: "2.36-9",
				Maintainer: "GNU Libc Maintainers <debian-glibc@lists.debian.org>",
				Licenses:   []string{"GPL-2+ or Artistic", "BSD-3-clause", "lgpl-2.1+", "Weird License 1.0", "GPL-2+"},
				License:    "(GPL-2.0-or-later OR Artistic-1.0-Perl) AND BSD-3-Clause AND LGPL-2.1-or-later AND LicenseRef-Weird-License-1.0 AND GPL-2.0-or-later"},
			{Name: "libfoo-dev", Version: "1.2-1+b1", Architecture: "amd64", Source: "foo", SourceVersion: "1.2-1",
				Maintainer: "Foo Team <foo@example.org>", Licenses: []string{"Expat"}, License: "MIT"},
			libfoo("amd64"),
			libfoo("i386"),
		},
		Files: []File{
			hashed("/etc/apt/sources.list", sourcesList),
			hashed("/etc/imagectl/recipe.conf", "answer = 42\n"),
			hashed("/opt/tool/bin/tool", "#!/bin/sh\necho tool\n"),
			hashed("/opt/tool/bin/tool-again", "#!/bin/sh\necho tool\n"),
			hashed("/opt/tool/share/data.txt", "data\n"),
		},
		AptSources: []AptSource{
			{File: "/etc/apt/sources.list", Types: []string{"deb"}, URIs: []string{"http://deb.debian.org/debian"},
				Suites: []string{"bookworm"}, Components: []string{"main", "contrib"}},
			{File: "/etc/apt/sources.list", Types: []string{"deb"}, URIs: []string{"https://repo.example.com/apt"},
				Suites: []string{"stable"}, Components: []string{"main"}},
			{File: "/etc/apt/sources.list", Types: []string{"deb"}, URIs: []string{"http://other.example/debian"},
				Suites: []string{"bookworm"}, Components: []string{"non-free"}},
			{File: "/etc/apt/sources.list", Types: []string{"deb-src"}, URIs: []string{"http://deb.debian.org/debian"},
				Suites: []string{"bookworm"}, Components: []string{"main"}},
			{File: "/etc/apt/sources.list.d/vendor.sources", Types: []string{"deb", "deb-src"}, URIs: []string{"https://mirror.example/debian"},
				Suites: []string{"bookworm", "bookworm-updates"}, Components: []string{"main", "non-free-firmware"}},
		},
	}
	return tgz, opts, want
}

// debianInventory is what Scan makes of debianImage.
func debianInventory(t testing.TB) *Inventory {
	t.Helper()
	tgz, opts, _ := debianImage(t)
	inv, err := Scan(context.Background(), tgz, opts)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func TestScan(t *testing.T) {
	tgz, opts, want := debianImage(t)
	got, err := Scan(context.Background(), tgz, opts)
	if err != nil {
		t.Fatal(err)
	}
	compareInventory(t, got, want)
	for _, s := range got.AptSources {
		for _, u := range s.URIs {
			if strings.Contains(u, "secret") || strings.Contains(u, "s3cr3t") || strings.Contains(u, "@") {
				t.Errorf("credentials left in %s", u)
			}
		}
	}
}

func compareInventory(t *testing.T, got, want *Inventory) {
	t.Helper()
	if got.OS != want.OS {
		t.Errorf("OS = %+v, want %+v", got.OS, want.OS)
	}
	if len(got.Packages) != len(want.Packages) {
		t.Errorf("%d packages, want %d", len(got.Packages), len(want.Packages))
	}
	for i := 0; i < len(got.Packages) && i < len(want.Packages); i++ {
		if !reflect.DeepEqual(got.Packages[i], want.Packages[i]) {
			t.Errorf("package %d:\n got %+v\nwant %+v", i, got.Packages[i], want.Packages[i])
		}
	}
	if !reflect.DeepEqual(got.Files, want.Files) {
		t.Errorf("files:\n got %+v\nwant %+v", got.Files, want.Files)
	}
	if !reflect.DeepEqual(got.AptSources, want.AptSources) {
		t.Errorf("apt sources:\n got %+v\nwant %+v", got.AptSources, want.AptSources)
	}
}

// statusA is a dpkg status of one package, a, at version 1.
var statusA = reg("var/lib/dpkg/status", "Package: a\nStatus: install ok installed\nVersion: 1\n")

// scan scans a test tgz of entries with opts.
func scan(t testing.TB, opts ScanOptions, entries ...entry) *Inventory {
	t.Helper()
	inv, err := Scan(context.Background(), writeTgz(t, entries...), opts)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func TestScanOSReleaseFallback(t *testing.T) {
	// No etc/os-release: usr/lib/os-release. Both: etc/os-release.
	inv := scan(t, ScanOptions{}, statusA, reg("usr/lib/os-release", "ID=ubuntu\nVERSION_ID='24.04'\n"))
	if inv.OS != (OSRelease{ID: "ubuntu", VersionID: "24.04"}) {
		t.Errorf("OS = %+v", inv.OS)
	}
	inv = scan(t, ScanOptions{}, statusA, reg("usr/lib/os-release", "ID=ubuntu\n"), reg("etc/os-release", "ID=debian\n"))
	if inv.OS.ID != "debian" {
		t.Errorf("OS = %+v", inv.OS)
	}
}

func TestScanSymlinkLoop(t *testing.T) {
	inv := scan(t, ScanOptions{},
		statusA,
		symlink("usr/share/doc/a", "b"),
		symlink("usr/share/doc/b", "/usr/share/doc/a"),
		symlink("etc/os-release", "os-release"),
	)
	if p := inv.Packages[0]; p.License != NoAssertion || p.Licenses != nil {
		t.Errorf("package in a symlink loop: %+v", p)
	}
}

func TestScanLaterEntryReplaces(t *testing.T) {
	inv := scan(t, ScanOptions{Dirs: []string{"/opt/b"}},
		statusA,
		reg("usr/share/doc/a/copyright", dep5Header+"License: GPL-3\n"),
		reg("opt/b/f", "old"),
		reg("var/lib/dpkg/status", "Package: a\nStatus: install ok installed\nVersion: 2\n"),
		symlink("usr/share/doc/a", "c"),
		reg("usr/share/doc/c/copyright", dep5Header+"License: MIT\n"),
		reg("opt/b/f", "new"),
	)
	if p := inv.Packages[0]; p.Version != "2" || p.License != "MIT" {
		t.Errorf("package %+v", p)
	}
	if want := []File{hashed("/opt/b/f", "new")}; !reflect.DeepEqual(inv.Files, want) {
		t.Errorf("files %+v", inv.Files)
	}
}

func TestScanErrors(t *testing.T) {
	status := reg("var/lib/dpkg/status", testStatus)
	valid := tgzBytes(t, status, reg("opt/big", strings.Repeat("x", 1<<20)))
	for _, c := range []struct {
		name string
		tgz  []byte
		opts ScanOptions
		want string
	}{
		{"empty file", nil, ScanOptions{}, "gzip header"},
		{"not gzip", []byte("this is not a gzip stream at all"), ScanOptions{}, "gzip header"},
		{"truncated gzip", valid[:len(valid)/2], ScanOptions{}, "unexpected EOF"},
		{"truncated trailer", valid[:len(valid)-4], ScanOptions{}, "gzip stream"},
		{"gzip, not tar", gzipOf(t, bytes.Repeat([]byte("garbage!"), 200)), ScanOptions{}, "tar stream"},
		{"no status", tgzBytes(t, reg("etc/os-release", "ID=debian\n")), ScanOptions{},
			"image.tgz has no var/lib/dpkg/status: not a Debian root filesystem"},
		{"status a symlink only", tgzBytes(t, symlink("var/lib/dpkg/status", "/x")), ScanOptions{}, "not a Debian root filesystem"},
		{"hard link to nothing", tgzBytes(t, status, reg("etc/shadow", "x"), hardlink("opt/b/shadow", "etc/gshadow")),
			ScanOptions{Dirs: []string{"/opt/b"}}, "/opt/b/shadow is a hard link to /etc/gshadow, which is not a regular file in the tgz"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Scan(context.Background(), writeFile(t, "image.tgz", c.tgz), c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "image.tgz") {
				t.Errorf("error %v does not name the tgz", err)
			}
		})
	}
	if _, err := Scan(context.Background(), "/nonexistent/x.tgz", ScanOptions{}); err == nil || !strings.Contains(err.Error(), "/nonexistent/x.tgz") {
		t.Errorf("missing tgz: %v", err)
	}
}

// gzipOf gzips b as it is (no tar).
func gzipOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestScanStatusBound(t *testing.T) {
	defer func(old int64) { statusLimit = old }(statusLimit)
	statusLimit = 100
	tgz := writeTgz(t, reg("var/lib/dpkg/status", testStatus))
	_, err := Scan(context.Background(), tgz, ScanOptions{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("var/lib/dpkg/status is %d bytes, more than the 100 bytes", len(testStatus))) {
		t.Fatalf("error %v", err)
	}
}

func TestScanHugeLines(t *testing.T) {
	huge := strings.Repeat("A", 10<<20)
	inv := scan(t, ScanOptions{},
		reg("var/lib/dpkg/status", "Package: a\nStatus: install ok installed\nVersion: 1\nDescription: "+huge+"\n\nPackage: b\nStatus: install ok installed\nVersion: 2\n"),
		reg("usr/share/doc/a/copyright", dep5Header+"License: MIT\nLicense: "+huge+"\nLicense: ISC\n"),
		reg("usr/share/doc/b/copyright", dep5Header+"License: "+huge[:100<<10]+"\nLicense: Zlib\n"),
		reg("etc/os-release", huge+"\nID=debian\n"),
		reg("etc/apt/sources.list", huge),
	)
	if len(inv.Packages) != 2 {
		t.Fatalf("packages %+v", inv.Packages)
	}
	// a's copyright is read up to textLimit: the huge line and what
	// follows it are not read. b's long line (over lineLimit) is skipped.
	if a := inv.Packages[0]; !reflect.DeepEqual(a.Licenses, []string{"MIT"}) {
		t.Errorf("a: %+v", a.Licenses)
	}
	if b := inv.Packages[1]; !reflect.DeepEqual(b.Licenses, []string{"Zlib"}) {
		t.Errorf("b: %+v", b.Licenses)
	}
	if inv.OS.ID != "" || len(inv.AptSources) != 0 {
		t.Errorf("os %+v, apt %+v", inv.OS, inv.AptSources)
	}
}

func TestScanCanceled(t *testing.T) {
	tgz, opts, _ := debianImage(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Scan(ctx, tgz, opts); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

// TestCleaning checks the string cleaners: normalize (a tar entry's name
// to a path) and stripCredentials (an apt source's URI).
func TestCleaning(t *testing.T) {
	for _, fn := range []struct {
		name  string
		f     func(string) string
		cases map[string]string
	}{
		{"normalize", normalize, map[string]string{
			"./var/lib/dpkg/status": "var/lib/dpkg/status",
			"/var/lib/dpkg/status":  "var/lib/dpkg/status",
			"var//lib/./dpkg/":      "var/lib/dpkg",
			"../../etc/passwd":      "etc/passwd",
			"./":                    "",
		}},
		{"stripCredentials", stripCredentials, map[string]string{
			"https://user:pass@host.example/debian": "https://host.example/debian",
			"https://user@host.example:8443/x@y":    "https://host.example:8443/x@y",
			"http://host.example/debian":            "http://host.example/debian",
			"tor+https://u:p@onion.example/":        "tor+https://onion.example/",
			"cdrom:[Debian 12]/":                    "cdrom:[Debian 12]/",
			"file:/srv/mirror":                      "file:/srv/mirror",
		}},
	} {
		for in, want := range fn.cases {
			if got := fn.f(in); got != want {
				t.Errorf("%s(%q) = %q, want %q", fn.name, in, got, want)
			}
		}
	}
}

func TestSourceOf(t *testing.T) {
	for _, c := range []struct{ field, src, ver string }{
		{"", "libc6", "2.36-9+b1"},
		{"glibc", "glibc", "2.36-9+b1"},
		{"glibc (2.36-9)", "glibc", "2.36-9"},
		{"glibc ( 2.36-9 )", "glibc", "2.36-9"},
		{"glibc ()", "glibc", "2.36-9+b1"},
	} {
		src, ver := sourceOf(c.field, "libc6", "2.36-9+b1")
		if src != c.src || ver != c.ver {
			t.Errorf("sourceOf(%q) = %q %q, want %q %q", c.field, src, ver, c.src, c.ver)
		}
	}
}

const dep5Header = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"

// A free-form copyright file states no license Scan reads: its prose is
// not taken for License fields.
func TestScanFreeFormCopyright(t *testing.T) {
	inv := scan(t, ScanOptions{},
		statusA,
		reg("usr/share/doc/a/copyright", "This is a's copyright.\nLicense: you may do as you please, or not\n"),
	)
	if p := inv.Packages[0]; len(p.Licenses) != 0 || p.License != NoAssertion {
		t.Errorf("package %+v", p)
	}
}

// TestScanFiles checks the files and directories Scan hashes, under the
// paths asked for:
//   - merged /usr: a file the recipe wrote to /lib/... and a bundle under
//     /bin/... are found where the tgz holds them, under usr/, and reported
//     under the paths the recipe gave them;
//   - a wanted hard link reaching its first copy through an unwanted hard
//     link is followed by a further pass; one to a symlink is not hashed, as
//     the symlink itself is not;
//   - a path asked for as the tgz holds it keeps its name when another is
//     asked for through a merged-/usr symlink.
func TestScanFiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    ScanOptions
		entries []entry
		want    []File
	}{
		{"merged usr", ScanOptions{Files: []string{"/lib/systemd/system/x.service"}, Dirs: []string{"/bin/tool"}},
			[]entry{
				symlink("bin", "usr/bin"),
				symlink("lib", "/usr/lib"),
				reg("usr/bin/tool/run", "run"),
				reg("usr/lib/systemd/system/x.service", "[Unit]\n"),
				statusA,
			},
			[]File{hashed("/bin/tool/run", "run"), hashed("/lib/systemd/system/x.service", "[Unit]\n")}},
		{"hard link chains", ScanOptions{Dirs: []string{"/opt/b"}},
			[]entry{
				reg("etc/first", "first\n"),
				statusA,
				hardlink("etc/mid", "etc/first"),
				symlink("etc/sym", "first"),
				hardlink("opt/b/via-mid", "etc/mid"),
				hardlink("opt/b/to-sym", "etc/sym"),
				symlink("opt/b/own-sym", "via-mid"),
				hardlink("opt/b/to-own-sym", "opt/b/own-sym"),
			},
			[]File{hashed("/opt/b/via-mid", "first\n")}},
		{"merged usr asked both ways", ScanOptions{Files: []string{"/usr/lib/a/x"}, Dirs: []string{"/lib"}},
			[]entry{
				symlink("lib", "usr/lib"),
				reg("usr/lib/a/x", "x"),
				reg("usr/lib/b/y", "y"),
				statusA,
			},
			[]File{hashed("/lib/b/y", "y"), hashed("/usr/lib/a/x", "x")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if inv := scan(t, tc.opts, tc.entries...); !reflect.DeepEqual(inv.Files, tc.want) {
				t.Errorf("files %+v, want %+v", inv.Files, tc.want)
			}
		})
	}
}

// A wanted hard link whose first copy in the tar is not wanted is hashed
// by a second pass, under its own path; the first copy is not listed.
func TestScanHardLinkToUnwantedFile(t *testing.T) {
	inv := scan(t, ScanOptions{Dirs: []string{"/opt/b"}},
		reg("etc/a/first", "shared content\n"),
		statusA,
		hardlink("opt/b/second", "etc/a/first"),
		hardlink("opt/b/third", "opt/b/second"),
		reg("opt/b/own", "own\n"),
	)
	want := []File{hashed("/opt/b/own", "own\n"), hashed("/opt/b/second", "shared content\n")}
	if len(inv.Files) < 2 || !reflect.DeepEqual(inv.Files[:2], want) {
		t.Errorf("files %+v, want %+v first", inv.Files, want)
	}
	if len(inv.Files) != 3 || inv.Files[2].Path != "/opt/b/third" {
		t.Errorf("files %+v, want /opt/b/third last", inv.Files)
	}
}
