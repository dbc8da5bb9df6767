package debcache

import (
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/gpuaas/imagectl/internal/deb822"
)

// URI is one line of apt-get install --print-uris: the URL apt would
// fetch, the file name it would give the download in
// /var/cache/apt/archives, its size and the hash apt prints (apt 2.6
// prints the MD5Sum when the index has one, else nothing: the sha256
// comes from the index's record, Record).
type URI struct {
	URL      string
	Filename string
	Size     int64
	Hash     string
}

// ParseURIs reads apt-get install --print-uris -qq output: one
// 'URL' FILENAME SIZE [HASH] line per archive; other lines (apt's notes)
// are left alone.
func ParseURIs(out string) ([]URI, error) {
	var us []URI
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "'") {
			continue
		}
		end := strings.Index(line[1:], "'")
		if end < 0 {
			return nil, fmt.Errorf("apt's --print-uris line %q has no closing quote", line)
		}
		u := URI{URL: line[1 : end+1]}
		f := strings.Fields(line[end+2:])
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("apt's --print-uris line %q is not 'URL' FILENAME SIZE [HASH]", line)
		}
		u.Filename = f[0]
		if u.Filename != path.Base(u.Filename) || u.Filename == "." || u.Filename == ".." || !strings.HasSuffix(u.Filename, ".deb") {
			return nil, fmt.Errorf("apt's --print-uris line %q names no .deb file", line)
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("apt's --print-uris line %q has no size", line)
		}
		u.Size = size
		if len(f) == 3 {
			u.Hash = f[2]
		}
		us = append(us, u)
	}
	return us, nil
}

// NameVersion is the package name, version and architecture apt's file
// name encodes (name_version_arch.deb, the epoch's colon as %3a).
func (u URI) NameVersion() (name, version, arch string, err error) {
	base := strings.TrimSuffix(u.Filename, ".deb")
	f := strings.Split(base, "_")
	if len(f) != 3 || f[0] == "" || f[1] == "" || f[2] == "" {
		return "", "", "", fmt.Errorf("%s is not name_version_arch.deb", u.Filename)
	}
	v, err := url.PathUnescape(f[1])
	if err != nil {
		return "", "", "", fmt.Errorf("%s: %w", u.Filename, err)
	}
	return f[0], v, f[2], nil
}

// Record is one package record of apt-cache show: what the signed index
// says of one archive.
type Record struct {
	Package, Version, Architecture, Filename string
	Size                                     int64
	SHA256                                   string
}

// ParseRecords reads apt-cache show output: deb822 paragraphs, of which
// it keeps the fields that identify an archive.
func ParseRecords(out string) []Record {
	var rs []Record
	// Reading a string fails only in fn, which does not.
	_ = deb822.Paragraphs(strings.NewReader(out), false, maxRecordLine, func(f map[string]string) error {
		r := Record{Package: f["package"], Version: f["version"], Architecture: f["architecture"],
			Filename: f["filename"], SHA256: strings.ToLower(f["sha256"])}
		r.Size, _ = strconv.ParseInt(f["size"], 10, 64)
		if r.Package != "" && r.Filename != "" && r.SHA256 != "" {
			rs = append(rs, r)
		}
		return nil
	})
	return rs
}

// maxRecordLine is the longest line of apt-cache show's output ParseRecords
// reads; a longer one (a description's, never a field it keeps) is skipped.
const maxRecordLine = 64 << 10

// Deb is one archive to fetch: what the package is, where apt would fetch
// it from, the file name apt gives it, and its size and sha256 from the
// signed index.
type Deb struct {
	Name, Version, Architecture string
	URL, Filename               string
	Size                        int64
	SHA256                      string
}

// Resolve pairs each URI with the index record of the same archive (the
// record's Filename ends the URL's path, and the sizes agree). URIs no
// record matches are returned apart, with the reason.
func Resolve(us []URI, rs []Record) (debs []Deb, unresolved map[string]string) {
	unresolved = map[string]string{}
	for _, u := range us {
		name, version, arch, err := u.NameVersion()
		if err != nil {
			unresolved[u.Filename] = err.Error()
			continue
		}
		p, err := url.Parse(u.URL)
		if err != nil {
			unresolved[u.Filename] = "its URL: " + err.Error()
			continue
		}
		var match *Record
		for i := range rs {
			r := &rs[i]
			if r.Package == name && r.Version == version && r.Size == u.Size && strings.HasSuffix(p.Path, "/"+strings.TrimPrefix(r.Filename, "./")) {
				match = r
				break
			}
		}
		if match == nil {
			unresolved[u.Filename] = "the index gives no sha256 for " + name + " " + version
			continue
		}
		debs = append(debs, Deb{Name: name, Version: version, Architecture: arch, URL: u.URL, Filename: u.Filename, Size: u.Size, SHA256: match.SHA256})
	}
	return debs, unresolved
}
