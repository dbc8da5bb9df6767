package sites

import (
	"fmt"
	"net"
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

// DefaultProfileTimeout bounds each admin API request of a deploy profile
// that sets no timeout.
const DefaultProfileTimeout = 30 * time.Second

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

// reProfileID is what an id of the admin API looks like: one path segment.
var reProfileID = regexp.MustCompile(`^[^/\s]+$`)

// decodeProfile decodes a deploy_profile block of site; a relative
// token_file is resolved against dir.
func decodeProfile(site string, b *hcl.Block, dir string) (*DeployProfile, hcl.Diagnostics) {
	p := &DeployProfile{Site: site, Timeout: DefaultProfileTimeout, DeclRange: b.DefRange}
	content, diags := b.Body.Content(profileBodySchema)
	at := &attrs{content: content}
	at.str("api_url", &p.APIURL, CheckAdminURL)
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
	at.envName("token_env", &p.TokenEnv)
	at.file("token_file", &p.TokenFile, dir)
	at.str("image", &p.Image, func(v string) string {
		if manifest.CheckImageName(v) != nil {
			return fmt.Sprintf("%q is not an image name of the store (lowercase letters, digits, '.', '_' and '-').", v)
		}
		return ""
	})
	at.dur("timeout", &p.Timeout)
	diags = append(diags, at.diags...)
	_, hasEnv := content.Attributes["token_env"]
	_, hasFile := content.Attributes["token_file"]
	if hasEnv == hasFile {
		diags = append(diags, hclkit.ErrorAt(b.DefRange, "Where is the admin token?",
			fmt.Sprintf("A deploy_profile of site %q needs exactly one of token_env (an environment variable) and token_file (a file) holding its admin API bearer token.", site)))
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return p, diags
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
	if msg := CheckToken(tok); msg != "" {
		return "", fmt.Errorf("site %q: the admin API token in %s %s", p.Site, p.TokenSource(), msg)
	}
	redact.Register(tok)
	return tok, nil
}

// CheckAdminURL says what is wrong with an admin API base URL (a
// deploy_profile's api_url, and what the admin API client is given), "" when nothing
// is: it must be https, or http to a loopback address, with a host and no
// credentials, query or fragment. The bearer token must not cross a
// network in clear.
func CheckAdminURL(raw string) string {
	u, err := url.Parse(raw)
	raw = redact.URL(raw) // quoted below: never with its credentials
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Sprintf("%q is not an https URL of the admin API without credentials, query or fragment, such as \"https://admin.example.internal\".", raw)
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if isLoopback(u.Hostname()) {
			return ""
		}
		return fmt.Sprintf("%q: the admin API takes a bearer token, which may cross the network only over https (http is accepted for loopback addresses only).", raw)
	}
	return fmt.Sprintf("%q is not an https URL of the admin API, such as \"https://admin.example.internal\".", raw)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckToken says what is wrong with an admin API bearer token, "" when
// nothing is, without quoting it.
func CheckToken(tok string) string {
	if tok == "" {
		return "is empty"
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return "holds a space, a control or a non-ASCII character, which a bearer token cannot"
		}
	}
	return ""
}
