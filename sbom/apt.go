package sbom

import (
	"io"
	"path"
	"strings"

	"github.com/gpuaas/imagectl/internal/deb822"
)

// isAptSources reports whether a normalized path is an apt sources file:
// etc/apt/sources.list, or a .list or .sources file in
// etc/apt/sources.list.d.
func isAptSources(name string) bool {
	if name == "etc/apt/sources.list" {
		return true
	}
	dir, base := path.Split(name)
	return dir == "etc/apt/sources.list.d/" && (strings.HasSuffix(base, ".list") || strings.HasSuffix(base, ".sources"))
}

// parseAptSources reads an apt sources file, deb822 (.sources) or one-line,
// into its repositories; file is its absolute path in the image.
func parseAptSources(file string, r io.Reader) ([]AptSource, error) {
	r = io.LimitReader(r, textLimit)
	if strings.HasSuffix(file, ".sources") {
		return parseDeb822Sources(file, r)
	}
	var out []AptSource
	err := deb822.Lines(r, lineLimit, func(line string) error {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		words := strings.Fields(line)
		if len(words) < 3 || (words[0] != "deb" && words[0] != "deb-src") {
			return nil
		}
		s := AptSource{File: file, Types: []string{words[0]}}
		words = words[1:]
		if strings.HasPrefix(words[0], "[") {
			// Options: [arch=amd64 signed-by=...], one word or several.
			for len(words) > 0 {
				w := words[0]
				words = words[1:]
				if strings.HasSuffix(w, "]") {
					break
				}
			}
		}
		if len(words) < 2 {
			return nil
		}
		s.URIs = []string{stripCredentials(words[0])}
		s.Suites = []string{words[1]}
		s.Components = words[2:]
		out = append(out, s)
		return nil
	})
	return out, err
}

// parseDeb822Sources reads a deb822 .sources file; stanzas with
// "Enabled: no" are left out.
func parseDeb822Sources(file string, r io.Reader) ([]AptSource, error) {
	var out []AptSource
	err := deb822.Paragraphs(r, true, lineLimit, func(f map[string]string) error {
		if strings.EqualFold(strings.TrimSpace(f["enabled"]), "no") {
			return nil
		}
		s := AptSource{
			File:       file,
			Types:      strings.Fields(f["types"]),
			Suites:     strings.Fields(f["suites"]),
			Components: strings.Fields(f["components"]),
		}
		for _, u := range strings.Fields(f["uris"]) {
			s.URIs = append(s.URIs, stripCredentials(u))
		}
		if len(s.Types) == 0 || len(s.URIs) == 0 {
			return nil
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// stripCredentials removes a URI's userinfo (user:password@), leaving the
// rest as written.
func stripCredentials(uri string) string {
	i := strings.Index(uri, "://")
	if i < 0 {
		return uri
	}
	rest := uri[i+3:]
	authority := rest
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		authority = rest[:j]
	}
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return uri
	}
	return uri[:i+3] + rest[at+1:]
}
