package sites

import (
	"bytes"
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/internal/shell"
)

// maxSecretFile is the most read of a file that holds one secret (a site's
// api_key_file, a profile's token_file): a MAAS key or an admin token is
// under a kilobyte, and a larger file, a device or a FIFO is refused
// before it is read (readlimit.File).
const maxSecretFile = 64 << 10

var (
	// reKeyShape is what a MAAS API key looks like.
	reKeyShape = regexp.MustCompile(`^[A-Za-z0-9]+:[A-Za-z0-9]+:[A-Za-z0-9]+$`)
	// reTokenShape is what a bearer token written in clear looks like: a
	// JWT, or a value that starts with "Bearer ".
	reTokenShape = regexp.MustCompile(`^(eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*|(?i:bearer)\s+\S+)$`)
	// tokenNames are attributes that would hold an admin token in clear.
	tokenNames = map[string]bool{"token": true, "admin_token": true, "api_token": true, "bearer_token": true}
)

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
		case literal && ((a.Name == "token_env" && !shell.IsName(val)) || ((a.Name == "token_env" || a.Name == "api_key_env") && looksLikeToken(val))):
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
		*diags = append(*diags, hclkit.ErrorAt(rng, summary, detail))
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
