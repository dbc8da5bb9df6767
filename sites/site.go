package sites

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/manifest"
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
	// WarmRacks has every promotion (and rollback) to the site check,
	// before the deploy profiles are pointed, that each of its rack
	// controllers serves the version (and so warm their caches), as
	// promote --warm-racks does, unless --warm-racks=false; predeploy then
	// wants each rack's latest recorded check to have passed.
	WarmRacks bool
	// RackPort is the port its rack controllers serve images on to
	// deploying machines (MAAS's 5248; another where a proxy or a
	// forwarded port stands in front of them).
	RackPort int
	// Profiles are the GPUaaS deploy profiles promote and rollback point
	// at the promoted version through the admin API; none when the site's
	// operators set them by hand.
	Profiles []*DeployProfile
	// Policy is the site's own policy block, nil for none; Policies every
	// policy a promotion to the site must meet: Policy, then those of its
	// groups in the order of the file. None: promote is not gated.
	Policy   *Policy
	Policies []*Policy
	// DeclRange is the site block's header, for diagnostics.
	DeclRange hcl.Range
}

// Default site settings.
const (
	DefaultArchitecture     = "amd64/generic"
	DefaultTimeout          = 60 * time.Second
	DefaultLastChunkTimeout = 15 * time.Minute
	DefaultCompleteTimeout  = 10 * time.Minute
	DefaultRackPort         = 5248
)

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
		{Name: "warm_racks"},
		{Name: "rack_port"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "deploy_profile"}, {Type: "policy"}},
}

// reArch is what a MAAS architecture looks like.
var reArch = regexp.MustCompile(`^[a-z0-9_]+/[a-z0-9_.-]+$`)

// decodeSite decodes a site block; relative paths in it are resolved
// against dir, the sites file's directory, and its policy may count
// evidence at the sites declared (sorted).
func decodeSite(b *hcl.Block, dir string, declared []string) (*Site, hcl.Diagnostics) {
	s := &Site{Name: b.Labels[0], DeclRange: b.DefRange, Architecture: DefaultArchitecture,
		Timeout: DefaultTimeout, LastChunkTimeout: DefaultLastChunkTimeout, CompleteTimeout: DefaultCompleteTimeout, RackPort: DefaultRackPort}
	var diags hcl.Diagnostics
	if !manifest.ValidName(s.Name) {
		diags = append(diags, hclkit.ErrorAt(b.LabelRanges[0], "Invalid site name",
			fmt.Sprintf("%q: a site name is lowercase letters, digits, '.', '_' and '-'.", s.Name)))
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
	at.envName("api_key_env", &s.APIKeyEnv)
	at.file("api_key_file", &s.APIKeyFile, dir)
	at.file("verify_key", &s.VerifyKey, dir)
	str("architecture", &s.Architecture, func(v string) string {
		if !reArch.MatchString(v) {
			return fmt.Sprintf("%q is not a MAAS architecture such as %q.", v, DefaultArchitecture)
		}
		return ""
	})
	dur("timeout", &s.Timeout)
	dur("last_chunk_timeout", &s.LastChunkTimeout)
	dur("complete_timeout", &s.CompleteTimeout)
	at.boolean("warm_racks", &s.WarmRacks)
	at.port("rack_port", &s.RackPort)
	_, hasEnv := content.Attributes["api_key_env"]
	_, hasFile := content.Attributes["api_key_file"]
	if hasEnv == hasFile {
		diags = append(diags, hclkit.ErrorAt(b.DefRange, "Where is the API key?",
			fmt.Sprintf("Site %q needs exactly one of api_key_env (an environment variable) and api_key_file (a file) holding its MAAS API key.", s.Name)))
	}
	diags = append(diags, at.diags...)
	pol, d := decodePolicies(fmt.Sprintf("site %q", s.Name), content.Blocks, declared)
	diags = append(diags, d...)
	s.Policy = pol
	seen := map[string]hcl.Range{}
	for _, pb := range content.Blocks.OfType("deploy_profile") {
		p, d := decodeProfile(s.Name, pb, dir)
		diags = append(diags, d...)
		if p == nil {
			continue
		}
		id := p.APIURL + " " + p.SiteID + " " + p.ProfileID
		if prev, dup := seen[id]; dup {
			diags = append(diags, hclkit.ErrorAt(pb.DefRange, "Duplicate deploy profile",
				fmt.Sprintf("Profile %q of admin site %q is already declared at %s.", p.ProfileID, p.SiteID, prev)))
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
