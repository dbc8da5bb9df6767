package sites

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/internal/hclkit/hclkittest"
	"github.com/gpuaas/imagectl/internal/redact"
)

func TestSitesValid(t *testing.T) {
	ss := mustLoad(t, "testdata/valid.hcl")
	s, err := ss.Site("maas280")
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != "http://maas280.example:5240/MAAS" || s.APIKeyEnv != "MAAS280_API_KEY" || s.Timeout != 30*time.Second ||
		s.LastChunkTimeout != 20*time.Minute || s.CompleteTimeout != DefaultCompleteTimeout || s.Architecture != "amd64/generic" {
		t.Errorf("maas280: %+v", s)
	}
	lab, _ := ss.Site("lab")
	if lab.APIKeyFile != filepath.Join("testdata", "lab.key") || lab.Timeout != DefaultTimeout ||
		lab.VerifyKey != filepath.Join("testdata", "keys/cosign.pub") || s.VerifyKey != "" {
		t.Errorf("lab: %+v", lab)
	}
	if !lab.WarmRacks || s.WarmRacks || lab.RackPort != 8248 || s.RackPort != DefaultRackPort {
		t.Errorf("warm_racks, rack_port: lab %v %d, maas280 %v %d", lab.WarmRacks, lab.RackPort, s.WarmRacks, s.RackPort)
	}
	if len(s.Profiles) != 0 || len(lab.Profiles) != 0 {
		t.Errorf("profiles where none are declared: %+v %+v", s.Profiles, lab.Profiles)
	}
	g, _ := ss.Site("gpuaas")
	if len(g.Profiles) != 2 {
		t.Fatalf("gpuaas: %d profiles", len(g.Profiles))
	}
	bm, vm := g.Profiles[0], g.Profiles[1]
	if bm.Site != "gpuaas" || bm.APIURL != "https://admin.gpuaas.example" || bm.SiteID != "site-7" || bm.ProfileID != "h200-bare-metal" ||
		bm.TokenEnv != "GPUAAS_ADMIN_TOKEN" || bm.TokenFile != "" || bm.Image != "gpuaas-h200-host-ubuntu2404" || bm.Timeout != DefaultProfileTimeout {
		t.Errorf("bare-metal profile: %+v", bm)
	}
	if vm.APIURL != "http://127.0.0.1:8080" || vm.TokenFile != filepath.Join("testdata", "admin.token") || vm.Image != "gpuaas-h200-host-ubuntu2404" || vm.Timeout != 10*time.Second {
		t.Errorf("slice profile: %+v", vm)
	}
	if !bm.Follows("gpuaas-h200-host-ubuntu2404") || bm.Follows("other") || vm.Follows("other") {
		t.Error("Follows")
	}
	if _, err := ss.Site("maas28"); err == nil || !strings.Contains(err.Error(), `Did you mean "maas280"?`) {
		t.Errorf("unknown site: %v", err)
	}
}

// noneShows fails the test when a diagnostic or a snippet source (the
// sites file's Files, from which snippets come) shows secret, or when
// there is no snippet source.
func noneShows(t *testing.T, ss *File, diags hcl.Diagnostics, secret string) {
	t.Helper()
	if len(ss.Files) == 0 {
		t.Fatal("no snippet source")
	}
	for _, f := range ss.Files {
		if bytes.Contains(f.Bytes, []byte(secret)) {
			t.Errorf("the snippet source shows the secret:\n%s", f.Bytes)
		}
	}
	for _, d := range diags {
		if strings.Contains(d.Summary+d.Detail, secret) {
			t.Errorf("a diagnostic shows the secret: %s: %s", d.Summary, d.Detail)
		}
	}
}

// mustLoad loads a sites file that must have no errors.
func mustLoad(t *testing.T, path string) *File {
	t.Helper()
	ss, diags := Load(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return ss
}

// The fixtures mark each expected error with "# ERROR: <summary>" on the
// line it must point at; each carries a range and a detail (hclkittest).
func TestSitesInvalid(t *testing.T) {
	for _, name := range []string{"invalid.hcl", "clear-key.hcl", "invalid-profile.hcl", "clear-token.hcl"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			ss, diags := Load(path)
			hclkittest.Check(t, path, diags)
			noneShows(t, ss, diags, "Secret")
		})
	}
}

// syntaxErrorHidesSecrets: src, which holds secrets and a syntax error,
// fails to parse, and no secret shows.
func syntaxErrorHidesSecrets(t *testing.T, src string) {
	t.Helper()
	ss, diags := Parse([]byte(src), "s.hcl")
	if !diags.HasErrors() {
		t.Fatal("no error")
	}
	noneShows(t, ss, diags, "Secret")
}

func TestSitesSyntaxErrorHidesKeys(t *testing.T) {
	syntaxErrorHidesSecrets(t, "site \"a\" {\n  api_key = \"Aa1:Bb2:SecretSecret\"\n  maas_url = \n}\n")
}

func TestSitesSyntaxErrorHidesTokens(t *testing.T) {
	syntaxErrorHidesSecrets(t, "site \"a\" {\n  deploy_profile {\n    token = \"SecretToken\"\n    token_env = \"SecretToo\"\n    x = \"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcHMifQ.SecretSig\"\n    api_url = \n  }\n}\n")
}

// TestSitesInputLimits: sites.hcl passes the input limits of every HCL
// file imagectl reads (package recipes): 60,000 nested brackets overflowed
// the parser's stack, which no recover catches, and the file is not read
// past 1 MiB. The refused file's snippet still hides keys.
func TestSitesInputLimits(t *testing.T) {
	src := "site \"a\" {\n  api_key = \"Aa1:Bb2:SecretSecret\"\n  maas_url = " + strings.Repeat("[", 60000) + strings.Repeat("]", 60000) + "\n}\n"
	ss, diags := Parse([]byte(src), "s.hcl")
	if len(diags) != 1 || diags[0].Summary != "Nested too deeply" || diags[0].Subject == nil || diags[0].Subject.Start.Line != 3 {
		t.Errorf("diagnostics: %v", diags)
	}
	if bytes.Contains(ss.Files["s.hcl"].Bytes, []byte("Secret")) {
		t.Error("snippet source shows the key")
	}
	path := filepath.Join(t.TempDir(), "sites.hcl")
	if err := os.WriteFile(path, bytes.Repeat([]byte("#"), 1<<20+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, diags := Load(path); !strings.Contains(diags.Error(), "larger than 1048576 bytes") {
		t.Errorf("diagnostics: %v", diags)
	}
}

func TestProfileURLs(t *testing.T) {
	for url, ok := range map[string]bool{
		"https://admin.example":          true,
		"https://admin.example:8443/gw/": true,
		"http://127.0.0.1:8080":          true,
		"http://localhost:8080":          true,
		"http://[::1]:8080":              true,
		"http://admin.example":           false,
		"http://10.0.0.1":                false,
		"https://admin.example/?x=1":     false,
		"admin.example":                  false,
		"https://":                       false,
	} {
		src := fmt.Sprintf("site \"a\" {\n  maas_url = \"http://m/MAAS\"\n  api_key_env = \"K\"\n  deploy_profile {\n    api_url = %q\n    site_id = \"s\"\n    profile_id = \"p\"\n    token_env = \"T\"\n    image = \"demo\"\n  }\n}\n", url)
		_, diags := Parse([]byte(src), "s.hcl")
		if diags.HasErrors() == ok {
			t.Errorf("%s: ok %v, diagnostics %v", url, ok, diags)
		}
	}
}

// TestSecrets reads a deploy profile's token and a site's API key from the
// environment and from a file: the value comes back; an unset variable is
// named; a malformed value, from the file or the environment, is refused
// without being shown; a missing file is an error.
func TestSecrets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		good, bad string   // a good value and a malformed one (with SECRET in it)
		unsetEnv  []string // an environment without the variable
		unset     string   // what the error says of it
		malformed string   // what the error says of the bad value
		// read reads the secret from the variable (file "") or from file,
		// its variable named V.
		read func(file string, env []string) (string, error)
	}{
		{name: "deploy profile token", good: "tok-SECRET-0123.abc_DEF", bad: "two SECRET words",
			unsetEnv: []string{"U=tok-SECRET-0123.abc_DEF"}, unset: "environment variable V (the token_env of its deploy profile p of admin site 7) is not set",
			malformed: "holds a space",
			read: func(file string, env []string) (string, error) {
				p := &DeployProfile{Site: "s", SiteID: "7", ProfileID: "p", TokenEnv: "V", APIURL: "https://admin.example", Timeout: time.Second}
				if file != "" {
					p.TokenEnv, p.TokenFile = "", file
				}
				return p.Token(env)
			}},
		{name: "site API key", good: "abc123:def456:ghiSECRET789", bad: "not-a-key-SECRET",
			unset: "V (its api_key_env) is not set", malformed: "consumer_key:token_key:token_secret",
			read: func(file string, env []string) (string, error) {
				s := &Site{Name: "e", APIKeyEnv: "V"}
				if file != "" {
					s.APIKeyEnv, s.APIKeyFile = "", file
				}
				return s.APIKey(env)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
			if err := os.WriteFile(good, []byte(tc.good+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bad, []byte(tc.bad+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if v, err := tc.read("", []string{"V=" + tc.good}); err != nil || v != tc.good {
				t.Errorf("env: %q %v", v, err)
			}
			if _, err := tc.read("", tc.unsetEnv); err == nil || !strings.Contains(err.Error(), tc.unset) {
				t.Errorf("unset: %v", err)
			}
			if v, err := tc.read(good, nil); err != nil || v != tc.good {
				t.Errorf("file: %q %v", v, err)
			}
			for _, file := range []string{bad, ""} {
				_, err := tc.read(file, []string{"V=" + tc.bad})
				if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), tc.malformed) {
					t.Errorf("malformed (file %q): %v", file, err)
				}
			}
			if _, err := tc.read(filepath.Join(dir, "missing"), nil); err == nil {
				t.Error("missing file accepted")
			}
		})
	}
}

func TestExampleSites(t *testing.T) {
	ss := mustLoad(t, "../examples/sites.hcl")
	if len(ss.Sites) != 2 {
		t.Errorf("%d sites", len(ss.Sites))
	}
	if s, _ := ss.Site("maas280"); s == nil || len(s.Profiles) != 1 {
		t.Errorf("maas280 has no deploy profile")
	}
	if g := ss.Group("h200-prod"); g == nil || g.Policy == nil || len(g.Policy.Evidence) != 1 || len(g.Policy.Windows) != 1 || len(g.Policy.Freezes) != 1 {
		t.Errorf("h200-prod has no policy: %+v", g)
	}
	if s, _ := ss.Site("maas280"); s == nil || len(s.Policies) != 1 {
		t.Errorf("maas280 is not held to its group's policy")
	}
}

func TestSiteGroups(t *testing.T) {
	src := `
site "a" {
  maas_url    = "http://a.example:5240/MAAS"
  api_key_env = "A_KEY"
}
site "b" {
  maas_url    = "http://b.example:5240/MAAS"
  api_key_env = "B_KEY"
}
site "c" {
  maas_url    = "http://c.example:5240/MAAS"
  api_key_env = "C_KEY"
}
group "fleet" {
  sites = ["a", "b", "c"]
}
group "pair" {
  sites = ["c", "a"]
}
`
	ss, diags := Parse([]byte(src), "sites.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got, err := ss.Resolve([]string{"pair", "b", "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if strings.Join(names, " ") != "c a b" {
		t.Errorf("resolved %v, want c a b", names)
	}
	if _, err := ss.Resolve([]string{"flet"}); err == nil || !strings.Contains(err.Error(), `Did you mean "fleet"?`) || !strings.Contains(err.Error(), "groups: fleet, pair") {
		t.Errorf("unknown name: %v", err)
	}

	for _, tc := range []struct{ group, want string }{
		{`group "g" { sites = ["a", "zz"] }`, `Group "g" names site "zz", which the sites file does not declare`},
		{`group "g" { sites = ["a", "a"] }`, `Group "g" names site "a" twice`},
		{`group "a" { sites = ["b"] }`, `"a" is already declared at`},
		{`group "g" { sites = ["a"] }` + "\n" + `group "g" { sites = ["b"] }`, `"g" is already declared at`},
		{`group "g" { sites = [] }`, `Group "g" names no site`},
		{`group "g" { sites = "a" }`, `A group's sites are a list of site names`},
		{`group "G!" { sites = ["a"] }`, `a group name is lowercase letters`},
		{`group "g" { }`, `Missing required argument`},
	} {
		_, diags := Parse([]byte(src+tc.group), "sites.hcl")
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
			t.Errorf("%s: diagnostics %v, want %q", tc.group, diags, tc.want)
		}
	}
}

// TestSitesNeverShowSecrets: a secret written anywhere in the sites file,
// in any shape, is in no diagnostic and in no snippet source, the file
// parsed or not.
func TestSitesNeverShowSecrets(t *testing.T) {
	const secret = "Pl4nted0Secret9Value7xyzQ"
	site := func(body string) string {
		return "site \"a\" {\n" + body + "\n}\n"
	}
	profile := func(body string) string {
		return site("  maas_url = \"http://maas.example/MAAS\"\n  api_key_env = \"K\"\n  deploy_profile {\n    api_url = \"https://admin.example\"\n    site_id = \"7\"\n    profile_id = \"p\"\n    image = \"demo\"\n" + body + "\n  }")
	}
	for name, src := range map[string]string{
		"key with a newline in api_key_env": site("  maas_url = \"http://maas.example/MAAS\"\n  api_key_env = \"aaa:bbb:" + secret + "\\n\""),
		"key with a space in api_key_env":   site("  maas_url = \"http://maas.example/MAAS\"\n  api_key_env = \"aaa:bbb:" + secret + " \""),
		"key as api_key_file":               site("  maas_url = \"http://maas.example/MAAS\"\n  api_key_file = \" aaa:bbb:" + secret + "\""),
		"token-like api_key_env":            site("  maas_url = \"http://maas.example/MAAS\"\n  api_key_env = \"" + secret + "\""),
		"token-like token_env":              profile("    token_env = \"ghp_" + secret + "\""),
		"token with a space in token_env":   profile("    token_env = \"" + secret + " \""),
		"malformed maas_url with api_key":   site("  maas_url = \"maas.x:5240/MAAS?api_key=" + secret + "\"\n  api_key_env = \"K\""),
		"maas_url without its colon":        site("  maas_url = \"https//admin:" + secret + "@maas.x/MAAS\"\n  api_key_env = \"K\""),
		"malformed api_url":                 site("  maas_url = \"http://maas.example/MAAS\"\n  api_key_env = \"K\"\n  deploy_profile {\n    api_url = \"https//admin:" + secret + "@x\"\n  }"),
		"unknown attribute":                 site("  maas_url = \"http://maas.example/MAAS\"\n  api_key_env = \"K\"\n  password = \"" + secret + "\""),
		"unknown attribute, heredoc":        site("  maas_url = \"http://maas.example/MAAS\"\n  api_key_env = \"K\"\n  password = <<EOT\n" + secret + "\nEOT"),
		"bad architecture after a secret":   site("  maas_url = \"http://maas.example/MAAS\"\n  api_key_env = \"K\"\n  password = \"" + secret + "\"\n  architecture = 1"),
		"syntax error":                      site("  maas_url = \"http://maas.example/MAAS\"\n  password = \"" + secret + "\" +\n  api_key_env = "),
		"unterminated string":               site("  maas_url = \"http://maas.example/MAAS\"\n  password = \"" + secret + "\n  api_key_env = \"K\""),
		"syntax error in a heredoc":         site("  password = <<EOT\n  " + secret + "\n  EOT\n  maas_url = [\n"),
	} {
		t.Run(name, func(t *testing.T) {
			ss, diags := Parse([]byte(src), "s.hcl")
			if !diags.HasErrors() {
				t.Fatalf("no error for\n%s", src)
			}
			if f := ss.Files["s.hcl"]; f == nil || len(f.Bytes) != len(src) {
				t.Fatalf("no snippet source of the same length as the file: %v", f)
			}
			noneShows(t, ss, diags, secret[3:12])
		})
	}
}

// TestSitesSnippetKeepsNames: a snippet hides values, not where they are.
func TestSitesSnippetKeepsNames(t *testing.T) {
	src := "site \"a\" {\n  maas_url = \"http://maas.example/MAAS\"\n  api_key_env = \"K\"\n  architecture = \"amd64\"\n}\n"
	ss, diags := Parse([]byte(src), "s.hcl")
	if !diags.HasErrors() {
		t.Fatal("no error")
	}
	want := "site \"a\" {\n  maas_url = " + strings.Repeat("*", len(`"http://maas.example/MAAS"`)) + "\n  api_key_env = ***\n  architecture = *******\n}\n"
	if got := string(ss.Files["s.hcl"].Bytes); got != want {
		t.Errorf("snippet source:\n%s\nwant:\n%s", got, want)
	}
}

// TestSecretsRegistered: a key or token once read is replaced wherever
// imagectl prints it (redact.Known, the CLI's output streams).
func TestSecretsRegistered(t *testing.T) {
	key := "cOnsumer1:t0kenKey22:s3cretPart4Registered"
	s := &Site{Name: "a", URL: "http://maas.example/MAAS", APIKeyEnv: "K"}
	if _, err := s.APIKey([]string{"K=" + key + "\n"}); err != nil {
		t.Fatal(err)
	}
	p := &DeployProfile{Site: "a", TokenEnv: "T"}
	tok := "t0ken-registered-" + t.Name()
	if _, err := p.Token([]string{"T= " + tok}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{key, "s3cretPart4Registered", tok} {
		if got := redact.Known("x " + v + " y"); strings.Contains(got, v) {
			t.Errorf("%s is not registered: %s", v, got)
		}
	}
}

// TestCheckAdminURLHidesCredentials: a refused admin API URL is quoted without
// the credentials it carries, well-formed or not.
func TestCheckAdminURLHidesCredentials(t *testing.T) {
	for _, raw := range []string{"https://admin:S3cretPw99@x.example", "https//admin:S3cretPw99@x.example", "http://x.example/?token=S3cretPw99", "x.example:443?api_key=S3cretPw99"} {
		msg := CheckAdminURL(raw)
		if msg == "" || strings.Contains(msg, "S3cretPw99") {
			t.Errorf("CheckAdminURL(%q) = %q", raw, msg)
		}
	}
}

func TestFilePath(t *testing.T) {
	env := []string{"IMAGECTL_SITES=/etc/imagectl/sites.hcl"}
	for _, tc := range []struct {
		given string
		env   []string
		want  string
	}{
		{"my.hcl", env, "my.hcl"},
		{"", env, "/etc/imagectl/sites.hcl"},
		{"", []string{"IMAGECTL_SITES="}, "sites.hcl"},
		{"", nil, "sites.hcl"},
	} {
		if got := FilePath(tc.given, tc.env); got != tc.want {
			t.Errorf("FilePath(%q, %q) = %q, want %q", tc.given, tc.env, got, tc.want)
		}
	}
}
