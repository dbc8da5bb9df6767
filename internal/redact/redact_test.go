package redact

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Well-formed URLs.
		{"oci://user:PASS1234@host/x", "oci://user:xxxxx@host/x"},
		{"https://bob:hunter2@example.com/c.git", "https://bob:xxxxx@example.com/c.git"},
		{"https://ghp_TOKEN1234@github.com/o/r.git", "https://xxxxx@github.com/o/r.git"},
		{"http://maas.x:5240/MAAS?api_key=SECRET1234&x=1", "http://maas.x:5240/MAAS?api_key=xxxxx&x=1"},
		{"http://h/p?a=1;Token=SECRET1234#frag", "http://h/p?a=1;Token=xxxxx#frag"},
		{"https://u:p@ss@host/x", "https://u:xxxxx@host/x"},
		// Malformed ones, as users write them.
		{"maas.x:5240/MAAS?api_key=SECRET1234", "maas.x:5240/MAAS?api_key=xxxxx"},
		{"https//admin:pw@maas.x/MAAS", "https//admin:xxxxx@maas.x/MAAS"},
		{"https:/admin:pw@maas.x/MAAS", "https:/admin:xxxxx@maas.x/MAAS"},
		{"http://[::1/MAAS?password=SECRET1234", "http://[::1/MAAS?password=xxxxx"},
		{"user:SECRET1234@host/x", "user:xxxxx@host/x"},
		// Inside a message, quoted.
		{`opening OCI store "user:PASS1234@host/x": bad`, `opening OCI store "user:xxxxx@host/x": bad`},
		{`Get "http://u:PASS1234@h/x?token=T0KEN1234": refused`, `Get "http://u:xxxxx@h/x?token=xxxxx": refused`},
		{"store http://h/x?token=SECRET1234: refused", "store http://h/x?token=xxxxx: refused"},
		// Not credentials.
		{"git@github.com:org/catalog.git", "git@github.com:org/catalog.git"},
		{"ssh://git@github.com/org/catalog.git", "ssh://git@github.com/org/catalog.git"},
		{"promoted by alice@example.com", "promoted by alice@example.com"},
		{"ghcr.io/x/img:1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef", "ghcr.io/x/img:1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef"},
		{"pkg:deb/ubuntu/curl@8.5.0?arch=amd64&distro=ubuntu-24.04", "pkg:deb/ubuntu/curl@8.5.0?arch=amd64&distro=ubuntu-24.04"},
		{"http://maas.example:5240/MAAS", "http://maas.example:5240/MAAS"},
		{"no URL here: a, b?", "no URL here: a, b?"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if HasCredentials(tc.in) != (tc.in != tc.want) {
			t.Errorf("HasCredentials(%q) = %v", tc.in, !(tc.in != tc.want))
		}
	}
}

// TestUserinfo: a record keeps a URL without its user and password, and
// keeps as it is what names no user.
func TestUserinfo(t *testing.T) {
	for in, want := range map[string]string{
		"http://proxy:PASS@10.0.0.1:3128":         "http://10.0.0.1:3128",
		"https://TOKEN@apt.example/debian?x=1":    "https://apt.example/debian?x=1",
		"http://deb.debian.org/debian":            "http://deb.debian.org/debian",
		"/var/cache/base.qcow2":                   "/var/cache/base.qcow2",
		"":                                        "",
		"https://apt.example/a%20b?sig=keep#frag": "https://apt.example/a%20b?sig=keep#frag",
	} {
		if got := Userinfo(in); got != want {
			t.Errorf("Userinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValues(t *testing.T) {
	got := string(Values([]byte(`a "q\"uote" q"uote b`), []string{`q"uote`}, "(sensitive)"))
	if got != `a "(sensitive)" (sensitive) b` {
		t.Errorf("got %s", got)
	}
	if got := string(Values([]byte("x"), nil, "-")); got != "x" {
		t.Errorf("no secrets: got %s", got)
	}
}

func TestRegisterKnownText(t *testing.T) {
	secret := "reg1stered-SECRET-" + t.Name()
	Register(secret, "short")
	for _, in := range []string{secret, fmt.Sprintf("%q", secret), "key " + secret + " and more"} {
		if got := Known(in); strings.Contains(got, secret) {
			t.Errorf("Known(%q) = %q", in, got)
		}
	}
	if got := Known("a short word"); got != "a short word" {
		t.Errorf("a value under MinLen was registered: %q", got)
	}
	if got := Text("https://u:pw@h/x " + secret); got != "https://u:xxxxx@h/x xxxxx" {
		t.Errorf("Text: %q", got)
	}
}

// TestWriter writes a registered secret through a Writer one byte at a
// time, and from many goroutines: it never comes out whole.
func TestWriter(t *testing.T) {
	secret := "wr1ter-SECRET-value-" + t.Name()
	Register(secret)
	var out bytes.Buffer
	w := NewWriter(&out)
	msg := "before " + secret + " after " + secret[:5]
	for i := 0; i < len(msg); i++ {
		if _, err := w.Write([]byte{msg[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "before xxxxx after "+secret[:5]; got != want {
		t.Errorf("got %q, want %q", got, want)
	}

	var safe testenv.Buffer
	w = NewWriter(&safe)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				fmt.Fprintf(w, "line %d %s\n", i, secret)
				Register(fmt.Sprintf("concurrent-secret-%d-%d", g, i))
			}
		}()
	}
	wg.Wait()
	_ = w.Flush()
	if strings.Contains(safe.String(), secret) || strings.Count(safe.String(), "\n") != 400 {
		t.Errorf("concurrent writes: %d lines, secret shown: %v", strings.Count(safe.String(), "\n"), strings.Contains(safe.String(), secret))
	}
}
