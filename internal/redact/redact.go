// Package redact owns keeping secrets out of what imagectl prints. It
// knows two kinds: credentials carried by a URL (a user's password, a
// token given as the user, a query parameter named like a key or token),
// which URL strips from any text, a malformed URL's included; and the
// values of secrets the process has read (a MAAS API key, an admin token,
// a registry or git password, a sensitive recipe variable), which their
// readers Register and Known replaces wherever they appear. Text does
// both, for every error message; Writer does the second on a whole output
// stream, the CLI's last line of defence. Userinfo drops a URL's user and
// password from what a record keeps (the manifest, the provenance).
package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuaas/imagectl/internal/textsafe"
	"sync/atomic"
)

// Mask is what a credential in a URL and a registered secret are replaced
// with (as url.URL.Redacted writes a password).
const Mask = "xxxxx"

// MinLen is the length below which Register ignores a value: a shorter one
// is too likely to be ordinary text ("true", a port) to be cut out of every
// output, and too weak to be a key or token.
const MinLen = 8

// Text returns s with every registered secret and every credential in a
// URL (see URL) replaced: what an error message goes through before it is
// printed.
func Text(s string) string { return URL(Known(s)) }

// URL returns s with the credentials of every URL in it replaced by Mask:
// the password of user:password@, a user alone when the URL has a scheme
// other than ssh (a token is often given as the user), and the value of
// each query parameter whose name says key, token, secret, password, auth
// or signature. It reads words, not a parse, so that what was meant as a
// URL is stripped too: no scheme ("maas.x:5240/MAAS?api_key=..."), a
// missing colon ("https//admin:pw@host"), a bad port or host. A word
// without "@" or "?" is left alone, and so are an e-mail address and an
// scp-style git remote (git@host:path), whose user is no secret.
func URL(s string) string { return strip(s, func(string) {}) }

// Userinfo returns the URL s without its user and password, as a record
// (the manifest, the provenance) keeps a location; s is returned as it is
// when it names no user, and with its credentials masked (URL) when it
// does not parse as a URL.
func Userinfo(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return URL(s)
	}
	if u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}

// RegisterURL registers the credentials of every URL in s (those URL
// replaces): for a location that is refused, or used, but whose
// credentials may still be quoted by something else (a library's error,
// a tool's output).
func RegisterURL(s string) {
	var found []string
	strip(s, func(v string) { found = append(found, v) })
	Register(found...)
}

// strip is URL, calling found with each credential it replaces.
func strip(s string, found func(string)) string {
	if !strings.ContainsAny(s, "@?") {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexFunc(s, isSpace)
		if i < 0 {
			i = len(s)
		}
		b.WriteString(word(s[:i], found))
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return !isSpace(r) })
		if j < 0 {
			j = len(s)
		}
		b.WriteString(s[:j])
		s = s[j:]
	}
	return b.String()
}

// HasCredentials reports whether s holds a URL with credentials, as URL
// sees them.
func HasCredentials(s string) bool { return URL(s) != s }

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
}

// reSecretParam is a query parameter's name that says it carries a
// credential.
var reSecretParam = regexp.MustCompile(`(?i)key|token|secret|passw|pwd|auth|sig|credential|session`)

// word strips the credentials from one word that may be a URL.
func word(w string, found func(string)) string {
	if !strings.ContainsAny(w, "@?") {
		return w
	}
	pre, query, hasQuery := strings.Cut(w, "?")
	pre = userinfo(pre, found)
	if !hasQuery {
		return pre
	}
	// The parameters end at a fragment or where the word is closed by
	// what quotes it.
	end := strings.IndexAny(query, "#\"'`>")
	if end < 0 {
		// Or at the punctuation of the message the word ends.
		end = len(strings.TrimRight(query, ".,:;)"))
	}
	var q strings.Builder
	for _, p := range splitKeep(query[:end], "&;") {
		name, value, ok := strings.Cut(p, "=")
		if ok && value != "" && reSecretParam.MatchString(name) {
			found(value)
			p = name + "=" + Mask
		}
		q.WriteString(p)
	}
	return pre + "?" + q.String() + query[end:]
}

// splitKeep splits s after each byte of seps, so that the parts joined
// are s.
func splitKeep(s, seps string) []string {
	var parts []string
	for {
		i := strings.IndexAny(s, seps)
		if i < 0 {
			return append(parts, s)
		}
		parts = append(parts, s[:i], s[i:i+1])
		s = s[i+1:]
	}
}

// userinfo masks the user information of a URL-like word without its
// query: what comes before the "@" (the last one before the path, should
// a password hold an "@"), from after "//" or, without one, after the
// last "/" before it. An "@" that starts a digest (repo@sha256:...) is
// none.
func userinfo(w string, found func(string)) string {
	first := strings.IndexByte(w, '@')
	if first < 0 {
		return w
	}
	start, slashes, scheme := 0, false, ""
	if i := strings.Index(w[:first], "//"); i >= 0 {
		start, slashes = i+2, true
		scheme = strings.ToLower(w[:i])
	} else {
		start = strings.LastIndexByte(w[:first], '/') + 1
	}
	end := len(w)
	if i := strings.IndexAny(w[first:], "/#"); i >= 0 {
		end = first + i
	}
	at := first + strings.LastIndexByte(w[first:end], '@')
	info := w[start:at]
	if info == "" || reDigest.MatchString(w[at+1:]) {
		return w
	}
	if user, pass, ok := strings.Cut(info, ":"); ok {
		found(pass)
		return w[:start] + user + ":" + Mask + w[at:]
	}
	if !slashes || strings.Contains(scheme, "ssh") {
		return w // an e-mail address, git@host:path, ssh://git@host
	}
	found(info)
	return w[:start] + Mask + w[at:]
}

// reDigest is the start of an OCI digest, which follows an "@" in a
// reference.
var reDigest = regexp.MustCompile(`^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,}`)

// Values returns b with every value of secrets replaced by mask, as it is
// and as JSON and Go quoting write it, longest first.
func Values(b []byte, secrets []string, mask string) []byte {
	forms := formsOf(secrets, 1)
	if len(forms) == 0 {
		return b
	}
	return []byte(replacer(forms, mask).Replace(string(b)))
}

// formsOf is each secret as it is and as JSON, Go quoting and the
// terminal's escaping (textsafe.Terminal) write it, at least min long,
// longest first.
func formsOf(secrets []string, min int) []string {
	var forms []string
	add := func(f string) {
		if len(f) >= min && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	for _, s := range secrets {
		add(s)
		if q, err := json.Marshal(s); err == nil {
			add(string(q[1 : len(q)-1]))
		}
		q := strconv.Quote(s)
		add(q[1 : len(q)-1])
		add(textsafe.Terminal(s))
	}
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return forms
}

func replacer(forms []string, mask string) *strings.Replacer {
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, mask)
	}
	return strings.NewReplacer(pairs...)
}

// known is what Register has been given: its forms and their replacer.
type known struct {
	forms []string
	r     *strings.Replacer
}

var (
	registerMu sync.Mutex
	registered atomic.Pointer[known]
)

// Register adds secrets the process has read (a key, a token, a password,
// a sensitive value) to those Known, Text and Writer replace. Values
// shorter than MinLen are ignored. It is safe for concurrent use.
func Register(secrets ...string) {
	forms := formsOf(secrets, MinLen)
	if len(forms) == 0 {
		return
	}
	registerMu.Lock()
	defer registerMu.Unlock()
	all := []string{}
	if k := registered.Load(); k != nil {
		all = append(all, k.forms...)
	}
	changed := false
	for _, f := range forms {
		if !slices.Contains(all, f) {
			all = append(all, f)
			changed = true
		}
	}
	if !changed {
		return
	}
	slices.SortStableFunc(all, func(a, b string) int { return len(b) - len(a) })
	registered.Store(&known{forms: all, r: replacer(all, Mask)})
}

// Known returns s with every registered secret replaced by Mask.
func Known(s string) string {
	k := registered.Load()
	if k == nil {
		return s
	}
	return k.r.Replace(s)
}

// Writer replaces every registered secret in what is written through it,
// even one split across writes: an end of a write that may begin a secret
// is held back until the next write or Flush. It is safe for concurrent
// use.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	held []byte
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Unwrap returns the writer written to (to ask it whether it is a
// terminal).
func (w *Writer) Unwrap() io.Writer { return w.w }

// Write writes p, with the registered secrets replaced, less what may be
// the start of one.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := registered.Load()
	if k == nil && len(w.held) == 0 {
		return w.w.Write(p)
	}
	buf := append(w.held, p...)
	w.held = nil
	out := buf
	if k != nil {
		out = []byte(k.r.Replace(string(buf)))
	}
	keep := partialSuffix(out, k)
	if n := len(out) - keep; n > 0 {
		if _, err := w.w.Write(out[:n]); err != nil {
			return 0, err
		}
	}
	w.held = append([]byte(nil), out[len(out)-keep:]...)
	return len(p), nil
}

// Flush writes what Write held back.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	out := []byte(Known(string(w.held)))
	w.held = nil
	_, err := w.w.Write(out)
	return err
}

// partialSuffix is the length of the longest end of b that is the start
// (not the whole) of a registered secret.
func partialSuffix(b []byte, k *known) int {
	if k == nil {
		return 0
	}
	best := 0
	for _, f := range k.forms {
		for n := min(len(f)-1, len(b)); n > best; n-- {
			if bytes.HasSuffix(b, []byte(f[:n])) {
				best = n
				break
			}
		}
	}
	return best
}
