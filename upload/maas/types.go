package maas

import (
	"strconv"
	"strings"
)

// Resource is a boot resource as MAAS returns it. gomaasclient's entity
// lacks upload_uri and progress, hence these types.
type Resource struct {
	ID           int    `json:"id"`
	Type         string `json:"type"`
	Name         string `json:"name"`
	Architecture string `json:"architecture"`
	Title        string `json:"title,omitempty"`
	BaseImage    string `json:"base_image,omitempty"`
	ResourceURI  string `json:"resource_uri"`
	// Sets are keyed by version; a list has none.
	Sets map[string]Set `json:"sets,omitempty"`
}

// Set is one version of a resource's files.
type Set struct {
	Version  string          `json:"version"`
	Label    string          `json:"label"`
	Size     int64           `json:"size"`
	Complete bool            `json:"complete"`
	Progress float64         `json:"progress,omitempty"`
	Files    map[string]File `json:"files"`
}

// File is one file of a set. UploadURI and Progress are present only while
// it is incomplete.
type File struct {
	Filename       string  `json:"filename"`
	Filetype       string  `json:"filetype"`
	SHA256         string  `json:"sha256"`
	Size           int64   `json:"size"`
	Complete       bool    `json:"complete"`
	Progress       float64 `json:"progress,omitempty"`
	UploadURI      string  `json:"upload_uri,omitempty"`
	FilenameOnDisk string  `json:"filename_on_disk,omitempty"`
}

// NewestSet returns the set with the highest version, compared as MAAS's
// YYYYmmdd[.N] (as strings "20250101.10" would sort before "20250101.9").
func (r *Resource) NewestSet() (Set, bool) {
	var best Set
	found := false
	for _, s := range r.Sets {
		if !found || VersionLess(best.Version, s.Version) {
			best, found = s, true
		}
	}
	return best, found
}

// File returns the file of the newest set (custom images have one), or
// nil when that set has none (its files went to a newer upload).
func (r *Resource) File() *File {
	s, ok := r.NewestSet()
	if !ok {
		return nil
	}
	for _, f := range s.Files {
		return &f
	}
	return nil
}

// VersionLess orders set versions as MAAS's YYYYmmdd[.N].
func VersionLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	for i := 0; i < 2; i++ {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return a < b
}

func versionParts(v string) [2]int64 {
	day, n, _ := strings.Cut(v, ".")
	d, _ := strconv.ParseInt(day, 10, 64)
	i, _ := strconv.ParseInt(n, 10, 64)
	return [2]int64{d, i}
}
