package upload

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestSitesValid(t *testing.T) {
	ss, diags := LoadSites("testdata/sites/valid.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s, err := ss.Site("maas280")
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != "http://maas280.example:5240/MAAS" || s.APIKeyEnv != "MAAS280_API_KEY" || s.Timeout != 30*time.Second ||
		s.LastChunkTimeout != 20*time.Minute || s.CompleteTimeout != DefaultCompleteTimeout || s.Architecture != "amd64/generic" {
		t.Errorf("maas280: %+v", s)
	}
	lab, _ := ss.Site("lab")
	if lab.APIKeyFile != filepath.Join("testdata/sites", "lab.key") || lab.Timeout != DefaultTimeout ||
		lab.VerifyKey != filepath.Join("testdata/sites", "keys/cosign.pub") || s.VerifyKey != "" {
		t.Errorf("lab: %+v", lab)
	}
	if _, err := ss.Site("maas28"); err == nil || !strings.Contains(err.Error(), `Did you mean "maas280"?`) {
		t.Errorf("unknown site: %v", err)
	}
}

// The fixtures mark each expected error with "# ERROR: <summary>" on the
// line it must point at.
func TestSitesInvalid(t *testing.T) {
	for _, name := range []string{"invalid.hcl", "clear-key.hcl"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata/sites", name)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			sc := bufio.NewScanner(bytes.NewReader(src))
			for line := 1; sc.Scan(); line++ {
				if _, msg, ok := strings.Cut(sc.Text(), "# ERROR: "); ok {
					want = append(want, fmt.Sprintf("%d: %s", line, msg))
				}
			}
			ss, diags := LoadSites(path)
			var got []string
			for _, d := range diags {
				if d.Subject == nil {
					t.Errorf("diagnostic without a range: %s", d.Summary)
					continue
				}
				got = append(got, fmt.Sprintf("%d: %s", d.Subject.Start.Line, d.Summary))
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// Snippets come from Files: no key may be in them.
			for _, f := range ss.Files {
				if regexp.MustCompile(`Secret`).Match(f.Bytes) {
					t.Errorf("a key is left in the snippet source:\n%s", f.Bytes)
				}
			}
			for _, d := range diags {
				if strings.Contains(d.Detail+d.Summary, "Secret") {
					t.Errorf("a diagnostic shows the key: %s", d.Detail)
				}
			}
		})
	}
}

func TestSitesSyntaxErrorHidesKeys(t *testing.T) {
	src := "site \"a\" {\n  api_key = \"Aa1:Bb2:SecretSecret\"\n  maas_url = \n}\n"
	ss, diags := ParseSites([]byte(src), "s.hcl")
	if !diags.HasErrors() {
		t.Fatal("no error")
	}
	if bytes.Contains(ss.Files["s.hcl"].Bytes, []byte("Secret")) {
		t.Errorf("snippet source shows the key:\n%s", ss.Files["s.hcl"].Bytes)
	}
}

func TestSiteAPIKey(t *testing.T) {
	dir := t.TempDir()
	good := "abc123:def456:ghiSECRET789"
	if err := os.WriteFile(filepath.Join(dir, "k"), []byte(good+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "bad"), []byte("not-a-key-SECRET\n"), 0o600)
	env := &Site{Name: "e", APIKeyEnv: "K"}
	if k, err := env.APIKey([]string{"K=" + good}); err != nil || k != good {
		t.Errorf("env: %q %v", k, err)
	}
	if _, err := env.APIKey(nil); err == nil || !strings.Contains(err.Error(), "K (its api_key_env) is not set") {
		t.Errorf("unset env: %v", err)
	}
	file := &Site{Name: "f", APIKeyFile: filepath.Join(dir, "k")}
	if k, err := file.APIKey(nil); err != nil || k != good {
		t.Errorf("file: %q %v", k, err)
	}
	for _, s := range []*Site{{Name: "b", APIKeyFile: filepath.Join(dir, "bad")}, {Name: "e", APIKeyEnv: "K"}} {
		_, err := s.APIKey([]string{"K=not-a-key-SECRET"})
		if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "consumer_key:token_key:token_secret") {
			t.Errorf("malformed key: %v", err)
		}
	}
	if _, err := (&Site{Name: "m", APIKeyFile: filepath.Join(dir, "missing")}).APIKey(nil); err == nil {
		t.Error("missing key file accepted")
	}
}

func TestExampleSites(t *testing.T) {
	ss, diags := LoadSites("../examples/sites.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if len(ss.Sites) != 2 {
		t.Errorf("%d sites", len(ss.Sites))
	}
}
