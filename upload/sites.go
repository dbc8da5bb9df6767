package upload

import (
	"bytes"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/recipes"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/profile"
)

// Site is one MAAS from sites.hcl. It names where its API key is, never
// the key.
type Site struct {
	Name string
	// URL is the MAAS root, such as http://maas.example:5240/MAAS.
	URL string
	// APIKeyEnv or APIKeyFile (resolved against the sites file's
	// directory) holds the key; exactly one is set.
	APIKeyEnv  string
	APIKeyFile string
	// VerifyKey is the cosign public key uploads to the site verify
	// artifacts with (resolved against the sites file's directory), if any.
	VerifyKey string
	// Architecture is the MAAS architecture images are uploaded as.
	Architecture string
	// Timeout bounds each API request, LastChunkTimeout the last chunk
	// (MAAS hashes the whole file in it), CompleteTimeout the wait for MAAS
	// to report an upload complete.
	Timeout, LastChunkTimeout, CompleteTimeout time.Duration
	// Profiles are the GPUaaS deploy profiles promote and rollback point
	// at the promoted version through the admin API; none when the site's
	// operators set them by hand.
	Profiles []*DeployProfile
	// DeclRange is the site block's header, for diagnostics.
	DeclRange hcl.Range
}

// DeployProfile is a deploy_profile block of a site: a GPUaaS MAAS site
// profile whose distro_series promote and rollback set through the admin
// API. It names where its bearer token is, never the token.
type DeployProfile struct {
	// Site is the sites.hcl site it belongs to.
	Site string
	// APIURL is the admin API's base URL: https, or http to loopback.
	APIURL string
	// SiteID and ProfileID are the admin API's ids of the MAAS site and
	// the profile.
	SiteID, ProfileID string
	// TokenEnv or TokenFile (resolved against the sites file's directory)
	// holds the bearer token; exactly one is set.
	TokenEnv, TokenFile string
	// Image is the store image whose promotions the profile follows.
	Image string
	// Timeout bounds each admin API request.
	Timeout time.Duration
	// DeclRange is the block's header, for diagnostics.
	DeclRange hcl.Range
}

// Group is a named set of sites (a group block of the sites file), which a
// rollout (imagectl promote --site GROUP) promotes to together.
type Group struct {
	Name  string
	Sites []string
	// DeclRange is the block's header, for diagnostics.
	DeclRange hcl.Range
}

// Sites is a parsed sites file.
type Sites struct {
	Sites  []*Site
	Groups []*Group
	// Files holds the parsed source for diagnostic snippets, with every
	// value written in it starred out (maskValues).
	Files map[string]*hcl.File
}

var siteSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "site", LabelNames: []string{"name"}}, {Type: "group", LabelNames: []string{"name"}}},
}

var groupBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "sites", Required: true}},
}

var siteBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "maas_url", Required: true},
		{Name: "api_key_env"},
		{Name: "api_key_file"},
		{Name: "architecture"},
		{Name: "verify_key"},
		{Name: "timeout"},
		{Name: "last_chunk_timeout"},
		{Name: "complete_timeout"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "deploy_profile"}},
}

var profileBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "api_url", Required: true},
		{Name: "site_id", Required: true},
		{Name: "profile_id", Required: true},
		{Name: "token_env"},
		{Name: "token_file"},
		// image is required: a profile selects one image, and promoting
		// another image at the site must not repoint it.
		{Name: "image", Required: true},
		{Name: "timeout"},
	},
}

var (
	reSiteName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	reArch     = regexp.MustCompile(`^[a-z0-9_]+/[a-z0-9_.-]+$`)
	reEnvName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// reKeyShape is what a MAAS API key looks like.
	reKeyShape = regexp.MustCompile(`^[A-Za-z0-9]+:[A-Za-z0-9]+:[A-Za-z0-9]+$`)
	// reTokenShape is what a bearer token written in clear looks like: a
	// JWT, or a value that starts with "Bearer ".
	reTokenShape = regexp.MustCompile(`^(eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*|(?i:bearer)\s+\S+)$`)
	reImageName  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	reProfileID  = regexp.MustCompile(`^[^/\s]+$`)
	// tokenNames are attributes that would hold an admin token in clear.
	tokenNames = map[string]bool{"token": true, "admin_token": true, "api_token": true, "bearer_token": true}
)

// Default site settings.
const (
	DefaultArchitecture     = "amd64/generic"
	DefaultTimeout          = 60 * time.Second
	DefaultLastChunkTimeout = 15 * time.Minute
	DefaultCompleteTimeout  = 10 * time.Minute
	DefaultProfileTimeout   = 30 * time.Second
)

// LoadSites reads and parses a sites file, within the input limits of
// every HCL file imagectl reads (recipes.ReadInput, recipes.ParseConfig).
func LoadSites(path string) (*Sites, hcl.Diagnostics) {
	src, err := recipes.ReadInput(path)
	if err != nil {
		return &Sites{Files: map[string]*hcl.File{}}, hcl.Diagnostics{{Severity: hcl.DiagError,
			Summary: "Cannot read sites file", Detail: fmt.Sprintf("Reading %s: %v.", path, err)}}
	}
	return ParseSites(src, path)
}

// ParseSites parses a sites file's content; filename is for diagnostics
// and resolves relative api_key_file paths.
func ParseSites(src []byte, filename string) (*Sites, hcl.Diagnostics) {
	out := &Sites{Files: map[string]*hcl.File{}}
	f, diags := recipes.ParseConfig(src, filename)
	if diags.HasErrors() {
		out.Files[filename] = &hcl.File{Bytes: maskUnparsed(src)}
		return out, diags
	}
	// No value of the file is shown in a snippet: any may be a key or a
	// token written in the wrong place. Those written in clear are errors.
	shown := append([]byte(nil), src...)
	maskValues(f.Body.(*hclsyntax.Body), shown)
	checkClearSecrets(f.Body.(*hclsyntax.Body), &diags)
	out.Files[filename] = &hcl.File{Body: f.Body, Bytes: shown}
	if diags.HasErrors() {
		return out, diags
	}
	content, d := f.Body.Content(siteSchema)
	diags = append(diags, d...)
	seen := map[string]hcl.Range{}
	var groups []*hcl.Block
	for _, b := range content.Blocks {
		if b.Type == "group" {
			groups = append(groups, b)
			continue
		}
		if prev, dup := seen[b.Labels[0]]; dup {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate site", Subject: b.LabelRanges[0].Ptr(),
				Detail: fmt.Sprintf("Site %q is already declared at %s.", b.Labels[0], prev)})
			continue
		}
		seen[b.Labels[0]] = b.DefRange
		s, d := decodeSite(b, filepath.Dir(filename))
		diags = append(diags, d...)
		if s != nil {
			out.Sites = append(out.Sites, s)
		}
	}
	for _, b := range groups {
		name := b.Labels[0]
		if prev, dup := seen[name]; dup {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate site or group name", Subject: b.LabelRanges[0].Ptr(),
				Detail: fmt.Sprintf("%q is already declared at %s: a group's name is used like a site's (--site), so it must differ from every site's and group's.", name, prev)})
			continue
		}
		seen[name] = b.DefRange
		g, d := decodeGroup(b, out)
		diags = append(diags, d...)
		if g != nil {
			out.Groups = append(out.Groups, g)
		}
	}
	return out, diags
}

// decodeGroup decodes a group block; its sites must be sites of ss.
func decodeGroup(b *hcl.Block, ss *Sites) (*Group, hcl.Diagnostics) {
	g := &Group{Name: b.Labels[0], DeclRange: b.DefRange}
	var diags hcl.Diagnostics
	if !reSiteName.MatchString(g.Name) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid group name", Subject: b.LabelRanges[0].Ptr(),
			Detail: fmt.Sprintf("%q: a group name is lowercase letters, digits, '.', '_' and '-', as a site name.", g.Name)})
	}
	content, d := b.Body.Content(groupBodySchema)
	diags = append(diags, d...)
	a := content.Attributes["sites"]
	if a == nil {
		return nil, diags
	}
	v, d := a.Expr.Value(nil)
	diags = append(diags, d...)
	if d.HasErrors() {
		return nil, diags
	}
	if v.IsNull() || !v.IsKnown() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid sites", Subject: a.Expr.Range().Ptr(),
			Detail: `A group's sites are a list of site names, such as ["maas280", "maas281"].`})
	}
	known := map[string]bool{}
	var names []string
	for _, s := range ss.Sites {
		known[s.Name] = true
		names = append(names, s.Name)
	}
	sort.Strings(names)
	inGroup := map[string]bool{}
	for _, e := range v.AsValueSlice() {
		if e.IsNull() || e.Type() != cty.String {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid sites", Subject: a.Expr.Range().Ptr(),
				Detail: fmt.Sprintf("Group %q: every site is a name in quotes.", g.Name)})
			continue
		}
		n := e.AsString()
		switch {
		case !known[n]:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown site in group", Subject: a.Expr.Range().Ptr(),
				Detail: fmt.Sprintf("Group %q names site %q, which the sites file does not declare (sites: %s).%s", g.Name, n, strings.Join(names, ", "), closest(n, names))})
		case inGroup[n]:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate site in group", Subject: a.Expr.Range().Ptr(),
				Detail: fmt.Sprintf("Group %q names site %q twice.", g.Name, n)})
		default:
			inGroup[n] = true
			g.Sites = append(g.Sites, n)
		}
	}
	if len(g.Sites) == 0 && !diags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Empty group", Subject: a.Expr.Range().Ptr(),
			Detail: fmt.Sprintf("Group %q names no site.", g.Name)})
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return g, diags
}

// closest is a " Did you mean …?" hint for a misspelt name, or "".
func closest(name string, names []string) string {
	best, bestD := "", 4
	for _, n := range names {
		if d := levenshtein.Distance(name, n, nil); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

// Resolve returns the sites that names (sites and groups) stand for, each
// once, in the order named; an unknown name is an error as Site's.
func (ss *Sites) Resolve(names []string) ([]*Site, error) {
	var out []*Site
	seen := map[string]bool{}
	add := func(n string) error {
		if seen[n] {
			return nil
		}
		s, err := ss.Site(n)
		if err != nil {
			return err
		}
		seen[n] = true
		out = append(out, s)
		return nil
	}
	for _, n := range names {
		if g := ss.Group(n); g != nil {
			for _, m := range g.Sites {
				if err := add(m); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := add(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Group returns the named group, nil when there is none.
func (ss *Sites) Group(name string) *Group {
	for _, g := range ss.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// checkClearSecrets finds, in every attribute of body and its blocks, an
// api_key or token, a value shaped like a MAAS API key or a bearer token
// (surrounding spaces and newlines aside), a token_env that is no
// variable name, an api_key_env or token_env that looks like a token
// itself (decodeSite refuses other bad names, unquoted), or a URL with
// credentials (redact.URL's, a malformed URL's included): each is an
// error that does not quote the value.
func checkClearSecrets(body *hclsyntax.Body, diags *hcl.Diagnostics) {
	for _, a := range body.Attributes {
		v, d := a.Expr.Value(nil)
		literal := !d.HasErrors() && v.Type() == cty.String && v.IsKnown() && !v.IsNull()
		val := ""
		if literal {
			val = v.AsString()
		}
		summary, detail := "", ""
		switch {
		case a.Name == "api_key" || (literal && reKeyShape.MatchString(strings.TrimSpace(val))):
			summary, detail = "API key written in clear", "A MAAS API key may not be written in the sites file: put it in an environment variable named by api_key_env, or in a file (mode 0600) named by api_key_file."
		case tokenNames[a.Name] || (literal && reTokenShape.MatchString(strings.TrimSpace(val))):
			summary, detail = "Token written in clear", "An admin API token may not be written in the sites file: put it in an environment variable named by token_env, or in a file (mode 0600) named by token_file, in the deploy_profile block."
		case literal && ((a.Name == "token_env" && !reEnvName.MatchString(val)) || ((a.Name == "token_env" || a.Name == "api_key_env") && looksLikeToken(val))):
			what := "the admin API token"
			if a.Name == "api_key_env" {
				what = "the MAAS API key"
			}
			summary, detail = "Invalid "+a.Name, a.Name+" names the environment variable that holds "+what+" (letters, digits and '_'), not "+what+" itself; its value is not shown."
		case literal && redact.HasCredentials(val):
			summary, detail = "Credentials in a URL", "A URL in the sites file may not carry a user, a password or a token: MAAS authenticates with the API key (api_key_env or api_key_file), the admin API with the token (token_env or token_file)."
		default:
			continue
		}
		rng := a.SrcRange
		*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Subject: &rng, Detail: detail})
	}
	for _, b := range body.Blocks {
		checkClearSecrets(b.Body, diags)
	}
}

// looksLikeToken reports whether a value that is a valid variable name is
// more likely a token: a run of 20 letters and digits of both cases, or
// of 32 letters and digits, without a '_' (variable names are words).
func looksLikeToken(v string) bool {
	for _, run := range strings.FieldsFunc(v, func(r rune) bool { return r == '_' }) {
		lower := strings.ContainsFunc(run, func(r rune) bool { return r >= 'a' && r <= 'z' })
		upper := strings.ContainsFunc(run, func(r rune) bool { return r >= 'A' && r <= 'Z' })
		digit := strings.ContainsFunc(run, func(r rune) bool { return r >= '0' && r <= '9' })
		if (len(run) >= 20 && lower && upper && digit) || (len(run) >= 32 && digit && (lower || upper)) {
			return true
		}
	}
	return false
}

// maskValues stars out, in shown (a copy of the source body was parsed
// from), the value of every attribute of body and its blocks, keeping
// newlines so that snippets keep their lines.
func maskValues(body *hclsyntax.Body, shown []byte) {
	for _, a := range body.Attributes {
		r := a.Expr.Range()
		star(shown[r.Start.Byte:r.End.Byte])
	}
	for _, b := range body.Blocks {
		maskValues(b.Body, shown)
	}
}

// star replaces every byte of b but whitespace with '*' (byte for byte,
// so that diagnostics' columns still point where they did).
func star(b []byte) {
	for i, c := range b {
		if c != '\n' && c != '\r' && c != ' ' && c != '\t' {
			b[i] = '*'
		}
	}
}

// maskUnparsed hides every value in a sites file that failed to parse,
// where no attribute is known: each line keeps its indentation and an
// attribute's name and "=", a block header (type, labels, "{") or closing
// braces; everything else (values, continued strings, heredocs, comments)
// is starred out.
func maskUnparsed(src []byte) []byte {
	out := append([]byte(nil), src...)
	for off := 0; off < len(out); {
		end := bytes.IndexByte(out[off:], '\n')
		if end < 0 {
			end = len(out)
		} else {
			end += off
		}
		line := out[off:end]
		switch m := reAttrLine.FindSubmatchIndex(line); {
		case m != nil:
			star(line[m[3]:])
		case reBlockLine.Match(line) || reBracesLine.Match(line):
		default:
			star(line)
		}
		off = end + 1
	}
	return out
}

var (
	reAttrLine   = regexp.MustCompile(`^(\s*[A-Za-z_][A-Za-z0-9_-]*\s*=)`)
	reBlockLine  = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_-]*(\s+("[^"]*"|[A-Za-z_][A-Za-z0-9_-]*))*\s*\{\s*$`)
	reBracesLine = regexp.MustCompile(`^[\s{}]*$`)
)

func decodeSite(b *hcl.Block, dir string) (*Site, hcl.Diagnostics) {
	s := &Site{Name: b.Labels[0], DeclRange: b.DefRange, Architecture: DefaultArchitecture,
		Timeout: DefaultTimeout, LastChunkTimeout: DefaultLastChunkTimeout, CompleteTimeout: DefaultCompleteTimeout}
	var diags hcl.Diagnostics
	if !reSiteName.MatchString(s.Name) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid site name", Subject: b.LabelRanges[0].Ptr(),
			Detail: fmt.Sprintf("%q: a site name is lowercase letters, digits, '.', '_' and '-'.", s.Name)})
	}
	content, d := b.Body.Content(siteBodySchema)
	diags = append(diags, d...)
	at := &attrs{content: content}
	str, dur := at.str, at.dur
	str("maas_url", &s.URL, func(v string) string {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fmt.Sprintf("%q is not an http(s) URL of a MAAS without credentials, such as \"http://maas.example:5240/MAAS\".", redact.URL(v))
		}
		return ""
	})
	s.URL = strings.TrimSuffix(s.URL, "/")
	// Never quoted: a key put here by mistake must not be shown.
	str("api_key_env", &s.APIKeyEnv, func(v string) string {
		if !reEnvName.MatchString(v) {
			return "api_key_env must name an environment variable (letters, digits and '_')."
		}
		return ""
	})
	str("api_key_file", &s.APIKeyFile, func(v string) string {
		if v == "" {
			return "api_key_file is empty."
		}
		return ""
	})
	if s.APIKeyFile != "" && !filepath.IsAbs(s.APIKeyFile) {
		s.APIKeyFile = filepath.Join(dir, s.APIKeyFile)
	}
	str("verify_key", &s.VerifyKey, func(v string) string {
		if v == "" {
			return "verify_key is empty."
		}
		return ""
	})
	if s.VerifyKey != "" && !filepath.IsAbs(s.VerifyKey) {
		s.VerifyKey = filepath.Join(dir, s.VerifyKey)
	}
	str("architecture", &s.Architecture, func(v string) string {
		if !reArch.MatchString(v) {
			return fmt.Sprintf("%q is not a MAAS architecture such as %q.", v, DefaultArchitecture)
		}
		return ""
	})
	dur("timeout", &s.Timeout)
	dur("last_chunk_timeout", &s.LastChunkTimeout)
	dur("complete_timeout", &s.CompleteTimeout)
	_, hasEnv := content.Attributes["api_key_env"]
	_, hasFile := content.Attributes["api_key_file"]
	if hasEnv == hasFile {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Where is the API key?", Subject: b.DefRange.Ptr(),
			Detail: fmt.Sprintf("Site %q needs exactly one of api_key_env (an environment variable) and api_key_file (a file) holding its MAAS API key.", s.Name)})
	}
	diags = append(diags, at.diags...)
	seen := map[string]hcl.Range{}
	for _, pb := range content.Blocks {
		p, d := decodeProfile(s.Name, pb, dir)
		diags = append(diags, d...)
		if p == nil {
			continue
		}
		id := p.APIURL + " " + p.SiteID + " " + p.ProfileID
		if prev, dup := seen[id]; dup {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate deploy profile", Subject: pb.DefRange.Ptr(),
				Detail: fmt.Sprintf("Profile %q of admin site %q is already declared at %s.", p.ProfileID, p.SiteID, prev)})
			continue
		}
		seen[id] = pb.DefRange
		s.Profiles = append(s.Profiles, p)
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return s, diags
}

// attrs decodes a block's string attributes, collecting diagnostics.
type attrs struct {
	content *hcl.BodyContent
	diags   hcl.Diagnostics
}

// str sets dst to the attribute's value when it is a string that check
// (which returns what is wrong, or "") accepts.
func (at *attrs) str(name string, dst *string, check func(string) string) {
	a := at.content.Attributes[name]
	if a == nil {
		return
	}
	v, d := a.Expr.Value(nil)
	at.diags = append(at.diags, d...)
	if d.HasErrors() {
		return
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		at.diags = append(at.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name, Subject: a.Expr.Range().Ptr(),
			Detail: name + " must be a string."})
		return
	}
	if msg := check(v.AsString()); msg != "" {
		at.diags = append(at.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name, Subject: a.Expr.Range().Ptr(), Detail: msg})
		return
	}
	*dst = v.AsString()
}

func (at *attrs) dur(name string, dst *time.Duration) {
	var raw string
	at.str(name, &raw, func(v string) string {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Sprintf("%q is not a positive duration such as \"60s\" or \"15m\".", v)
		}
		return ""
	})
	if raw != "" {
		*dst, _ = time.ParseDuration(raw)
	}
}

func decodeProfile(site string, b *hcl.Block, dir string) (*DeployProfile, hcl.Diagnostics) {
	p := &DeployProfile{Site: site, Timeout: DefaultProfileTimeout, DeclRange: b.DefRange}
	content, diags := b.Body.Content(profileBodySchema)
	at := &attrs{content: content}
	at.str("api_url", &p.APIURL, profile.CheckURL)
	p.APIURL = strings.TrimSuffix(p.APIURL, "/")
	for _, id := range []struct {
		name string
		dst  *string
	}{{"site_id", &p.SiteID}, {"profile_id", &p.ProfileID}} {
		at.str(id.name, id.dst, func(v string) string {
			if !reProfileID.MatchString(v) || v == "." || v == ".." {
				return fmt.Sprintf("%q: %s is the admin API's id, a non-empty path segment without '/' or spaces, not . or ...", v, id.name)
			}
			return ""
		})
	}
	// Never quoted: a token put here by mistake must not be shown.
	at.str("token_env", &p.TokenEnv, func(v string) string {
		if !reEnvName.MatchString(v) {
			return "token_env must name an environment variable (letters, digits and '_')."
		}
		return ""
	})
	at.str("token_file", &p.TokenFile, func(v string) string {
		if v == "" {
			return "token_file is empty."
		}
		return ""
	})
	if p.TokenFile != "" && !filepath.IsAbs(p.TokenFile) {
		p.TokenFile = filepath.Join(dir, p.TokenFile)
	}
	at.str("image", &p.Image, func(v string) string {
		if !reImageName.MatchString(v) {
			return fmt.Sprintf("%q is not an image name of the store (lowercase letters, digits, '.', '_' and '-').", v)
		}
		return ""
	})
	at.dur("timeout", &p.Timeout)
	diags = append(diags, at.diags...)
	_, hasEnv := content.Attributes["token_env"]
	_, hasFile := content.Attributes["token_file"]
	if hasEnv == hasFile {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Where is the admin token?", Subject: b.DefRange.Ptr(),
			Detail: fmt.Sprintf("A deploy_profile of site %q needs exactly one of token_env (an environment variable) and token_file (a file) holding its admin API bearer token.", site)})
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return p, diags
}

// Site returns the named site; an unknown name is an error that lists the
// sites (and the closest one).
func (ss *Sites) Site(name string) (*Site, error) {
	var names []string
	for _, s := range ss.Sites {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	sort.Strings(names)
	groups := ""
	all := append([]string(nil), names...)
	if len(ss.Groups) > 0 {
		var gs []string
		for _, g := range ss.Groups {
			gs = append(gs, g.Name)
		}
		sort.Strings(gs)
		all = append(all, gs...)
		groups = "; groups: " + strings.Join(gs, ", ")
	}
	return nil, fmt.Errorf("no site %q in the sites file (sites: %s%s).%s", name, strings.Join(names, ", "), groups, closest(name, all))
}

// APIKey reads the site's key from the environment (KEY=value pairs, as
// os.Environ) or its file. Errors say where the key was looked for, never
// what it is.
func (s *Site) APIKey(env []string) (string, error) {
	var key string
	if s.APIKeyEnv != "" {
		if key = environ.Get(env, s.APIKeyEnv); key == "" {
			return "", fmt.Errorf("site %q: environment variable %s (its api_key_env) is not set", s.Name, s.APIKeyEnv)
		}
	} else {
		b, err := readlimit.File(s.APIKeyFile, maxSecretFile)
		if err != nil {
			return "", fmt.Errorf("site %q: reading its API key file: %w", s.Name, err)
		}
		key = strings.TrimSpace(string(b))
	}
	key = strings.TrimSpace(key)
	if !reKeyShape.MatchString(key) {
		where := "environment variable " + s.APIKeyEnv
		if s.APIKeyFile != "" {
			where = "file " + s.APIKeyFile
		}
		return "", fmt.Errorf("site %q: the API key in %s is not of the form consumer_key:token_key:token_secret", s.Name, where)
	}
	redact.Register(key, key[strings.LastIndexByte(key, ':')+1:])
	return key, nil
}

// Config is the MAAS client configuration for the site.
func (s *Site) Config(env []string) (maas.Config, error) {
	key, err := s.APIKey(env)
	if err != nil {
		return maas.Config{}, err
	}
	return maas.Config{URL: s.URL, APIKey: key, Timeout: s.Timeout, LastChunkTimeout: s.LastChunkTimeout,
		CompleteTimeout: s.CompleteTimeout}, nil
}

// Follows reports whether promotions of image select the profile's image.
func (p *DeployProfile) Follows(image string) bool { return p.Image == image }

// String names the profile for messages.
func (p *DeployProfile) String() string {
	return fmt.Sprintf("deploy profile %s of admin site %s", p.ProfileID, p.SiteID)
}

// TokenSource says where the token is, for messages.
func (p *DeployProfile) TokenSource() string {
	if p.TokenEnv != "" {
		return "environment variable " + p.TokenEnv
	}
	return "file " + p.TokenFile
}

// Token reads the profile's bearer token from the environment (KEY=value
// pairs, as os.Environ) or its file. Errors say where the token was looked
// for, never what it is.
func (p *DeployProfile) Token(env []string) (string, error) {
	var tok string
	if p.TokenEnv != "" {
		if tok = environ.Get(env, p.TokenEnv); tok == "" {
			return "", fmt.Errorf("site %q: environment variable %s (the token_env of its %s) is not set", p.Site, p.TokenEnv, p)
		}
	} else {
		b, err := readlimit.File(p.TokenFile, maxSecretFile)
		if err != nil {
			return "", fmt.Errorf("site %q: reading the token_file of its %s: %w", p.Site, p, err)
		}
		tok = string(b)
	}
	tok = strings.TrimSpace(tok)
	if msg := profile.CheckToken(tok); msg != "" {
		return "", fmt.Errorf("site %q: the admin API token in %s %s", p.Site, p.TokenSource(), msg)
	}
	redact.Register(tok)
	return tok, nil
}

// Config is the admin API client configuration for the profile.
func (p *DeployProfile) Config(env []string) (profile.Config, error) {
	tok, err := p.Token(env)
	if err != nil {
		return profile.Config{}, err
	}
	return profile.Config{URL: p.APIURL, SiteID: p.SiteID, ProfileID: p.ProfileID, Token: tok, TokenSource: p.TokenSource(),
		Timeout: p.Timeout}, nil
}
