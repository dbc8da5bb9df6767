package profile

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/gpuaas/imagectl/internal/shell"
)

// Placeholders stand, in a request written out for an operator, for what
// imagectl does not know: the shell variables operators set for the same
// curl command by hand.
const (
	PlaceholderURL     = "${API_BASE_URL}"
	PlaceholderSite    = "${SITE_ID}"
	PlaceholderProfile = "${PROFILE_ID}"
	PlaceholderToken   = "${ADMIN_TOKEN}"
)

// Request is the PATCH that sets a profile, written out for an operator
// to make: imagectl has no admin API to call.
type Request struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	// Curl is the same request as a shell command, with ${ADMIN_TOKEN}
	// (and ${API_BASE_URL}, ${SITE_ID}, ${PROFILE_ID} for what is not
	// known) left for the shell to fill in.
	Curl string `json:"curl"`
}

// Manual writes out the PATCH that makes a profile's distro_series
// distroSeries; an empty apiURL, siteID or profileID becomes its
// placeholder. The token is always ${ADMIN_TOKEN}.
func Manual(apiURL, siteID, profileID, distroSeries, key string) *Request {
	// Each part of the URL is either known (quoted for the shell) or a
	// placeholder (left for the shell to expand).
	base, site, prof := shellPart{PlaceholderURL, true}, shellPart{PlaceholderSite, true}, shellPart{PlaceholderProfile, true}
	if apiURL != "" {
		base = shellPart{strings.TrimSuffix(apiURL, "/"), false}
	}
	if siteID != "" {
		site = shellPart{url.PathEscape(siteID), false}
	}
	if profileID != "" {
		prof = shellPart{url.PathEscape(profileID), false}
	}
	urlParts := []shellPart{base, {PathPrefix, false}, site, {"/profiles/", false}, prof}
	var u strings.Builder
	for _, p := range urlParts {
		u.WriteString(p.s)
	}
	body, _ := json.Marshal(map[string]string{"distro_series": distroSeries})
	r := &Request{Method: "PATCH", URL: u.String(), Body: string(body), Headers: map[string]string{
		"Authorization":     "Bearer " + PlaceholderToken,
		"Content-Type":      "application/json",
		"X-Idempotency-Key": key,
	}}
	keyParts := []shellPart{{"X-Idempotency-Key: " + key, false}}
	if profileID == "" {
		// One request per profile: each its own key.
		keyParts = append(keyParts, shellPart{"-", false}, shellPart{PlaceholderProfile, true})
		r.Headers["X-Idempotency-Key"] = key + "-" + PlaceholderProfile
	}
	r.Curl = "curl -fsS -X PATCH \\\n" +
		"  " + dquote(urlParts...) + " \\\n" +
		"  -H " + dquote(shellPart{"Authorization: Bearer ", false}, shellPart{PlaceholderToken, true}) + " \\\n" +
		"  -H " + dquote(shellPart{"Content-Type: application/json", false}) + " \\\n" +
		"  -H " + dquote(keyParts...) + " \\\n" +
		"  --data " + shell.Quote(string(body))
	return r
}

// shellPart is text for a double-quoted shell word: a placeholder is
// left for the shell to expand, anything else is taken literally.
type shellPart struct {
	s           string
	placeholder bool
}

// dquote double-quotes parts as one POSIX shell word.
func dquote(parts ...shellPart) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, p := range parts {
		if p.placeholder {
			b.WriteString(p.s)
			continue
		}
		for i := 0; i < len(p.s); i++ {
			switch p.s[i] {
			case '"', '\\', '$', '`':
				b.WriteByte('\\')
			}
			b.WriteByte(p.s[i])
		}
	}
	b.WriteByte('"')
	return b.String()
}
