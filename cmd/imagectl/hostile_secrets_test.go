//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/profile/profilesim"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// planted is the secret TestSecretsNeverPrinted plants in every input: a
// MAAS key's secret, a token, a password, a sensitive variable's value.
const planted = "Xq7Pl4ntedS3cretZk9wV"

// noSecret fails when out holds one of secrets or the middle of one (a
// secret cut short, quoted or escaped around its ends is still shown).
func noSecret(t *testing.T, what, out string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if mid := s[3 : len(s)-3]; strings.Contains(out, mid) {
			i := strings.Index(out, mid)
			t.Errorf("%s shows a secret: ...%s...", what, out[max(0, i-60):min(len(out), i+len(mid)+20)])
		}
	}
}

// secretRun is one imagectl run that sees a planted secret: it must exit
// as code says (-1: any) and print want, never the secret.
type secretRun struct {
	name string
	env  []string
	args []string
	code int
	want string
}

// TestSecretsNeverPrinted plants one secret in every input that can carry
// one (each kind of sites.hcl value, the API key's environment variable and
// file, the admin token's, a store or catalog URL, a registry password, a
// sensitive recipe variable from -var, a var file and IMAGECTL_VAR_) and
// runs every command that sees it, each as a process of its own (so that
// a secret registered by one run cannot hide another's), succeeding and
// failing, text and JSON: the secret is in none of their outputs.
func TestSecretsNeverPrinted(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := "aaaaaaaaaaaaaaaaaa:bbbbbbbbbbbbbbbbbb:" + planted

	sim := maassim.New(maassim.Options{CompleteAfterGets: -1})
	t.Cleanup(sim.Close)
	ps := profilesim.New(profilesim.Options{Token: "Bearer-" + planted})
	t.Cleanup(ps.Close)
	ps.SetProfile("7", "p", "ubuntu/noble")
	store, pub := stored(t, "1.0.0")
	_, _, tgz, _ := uploadFixture(t)

	site := func(body string) string {
		return "site \"x\" {\n" + body + "\n}\n"
	}
	good := fmt.Sprintf("  maas_url = %q\n", sim.URL)
	profile := func(body string) string {
		return site(good + "  api_key_env = \"SIM_KEY\"\n  deploy_profile {\n    site_id = \"7\"\n    profile_id = \"p\"\n    image = \"demo\"\n" + body + "\n  }")
	}
	var runs []secretRun
	// Every command that reads the sites file, for a file.
	sitesRuns := func(name, sites string, env []string, code int, want string) {
		for _, args := range [][]string{
			{"status", "--site", "x"},
			{"status", "--site", "x", "-o", "json"},
			{"upload", tgz, "--site", "x", "--base-image", "ubuntu/noble", "--insecure-skip-verify"},
			{"promote", "demo", "1.0.0", "--site", "x", "--key", pub, "-o", "json"},
			{"rollback", "demo", "--site", "x", "--key", pub},
		} {
			r := secretRun{name: name + ": " + args[0], args: append(args, "--sites", sites, "--store", store), env: env, code: code, want: want}
			if args[0] == "rollback" && want != "error:" {
				// Where it gets depends on the promotions the runs before made.
				r.code, r.want = -1, ""
			}
			runs = append(runs, r)
		}
	}
	// The sites file: a key or token written where a name, a path or a
	// URL belongs, in an attribute imagectl does not know, in a file that
	// does not parse.
	for name, body := range map[string]string{
		"key with a newline as api_key_env":   site(good + "  api_key_env = \"" + key + "\\n\""),
		"key with a space as api_key_env":     site(good + "  api_key_env = \"" + key + " \""),
		"key as api_key_file":                 site(good + "  api_key_file = \" " + key + "\""),
		"token as api_key_env":                site(good + "  api_key_env = \"" + planted + "\""),
		"token as token_env":                  profile("    api_url = \"" + ps.URL + "\"\n    token_env = \"ghp_" + planted + "\""),
		"maas_url with an api_key":            site("  maas_url = \"maas.x:5240/MAAS?api_key=" + planted + "\"\n  api_key_env = \"K\""),
		"maas_url without its colon":          site("  maas_url = \"https//admin:" + planted + "@maas.x/MAAS\"\n  api_key_env = \"K\""),
		"api_url with a password":             profile("    api_url = \"https//admin:" + planted + "@admin.example\"\n    token_env = \"T\""),
		"unknown attribute":                   site(good + "  api_key_env = \"K\"\n  password = \"" + planted + "\""),
		"syntax error":                        site(good + "  password = \"" + planted + "\" +\n  api_key_env = "),
		"unterminated string":                 site(good + "  password = \"" + planted + "\n  api_key_env = \"K\""),
		"heredoc in a file that cannot parse": site("  password = <<EOT\n" + planted + "\nEOT\n  maas_url = [\n"),
	} {
		sitesRuns("sites.hcl "+name, write(strings.ReplaceAll(name, " ", "-")+".hcl", body, 0o644), nil, 1, "error:")
	}

	// The key and the token where they belong, with a trailing newline or
	// space; MAAS refuses the planted key (401), accepts its own key.
	keyed := write("keyed.hcl", site(good+"  api_key_env = \"SIM_KEY\""), 0o644)
	sitesRuns("api_key_env refused by MAAS", keyed, []string{"SIM_KEY=" + key + "\n"}, 1, "401")
	sitesRuns("api_key_env with a space", keyed, []string{"SIM_KEY=" + sim.AdminKey + " "}, -1, "")
	write("sim.key", key+"\n", 0o600)
	sitesRuns("api_key_file refused by MAAS", write("keyfile.hcl", site(good+"  api_key_file = \"sim.key\""), 0o644), nil, 1, "401")
	profiled := write("profiled.hcl", profile("    api_url = \""+ps.URL+"\"\n    token_env = \"ADMIN_TOKEN\""), 0o644)
	sitesRuns("token_env accepted", profiled, []string{"SIM_KEY=" + sim.AdminKey, "ADMIN_TOKEN=Bearer-" + planted + "\n"}, -1, "")
	sitesRuns("token_env refused", profiled, []string{"SIM_KEY=" + sim.AdminKey, "ADMIN_TOKEN=Wrong-" + planted}, -1, "")
	write("admin.token", " Bearer-"+planted+"\n", 0o600)
	sitesRuns("token_file", write("tokenfile.hcl", profile("    api_url = \""+ps.URL+"\"\n    token_file = \"admin.token\""), 0o644),
		[]string{"SIM_KEY=" + sim.AdminKey}, -1, "")

	// Store and catalog locations with credentials, a registry password.
	for _, loc := range []string{"oci://user:" + planted + "@registry.example/x", "oci://" + planted + "@registry.example/x",
		"oci//user:" + planted + "@registry.example/x", "https://registry.example/x?token=" + planted} {
		for _, args := range [][]string{{"images"}, {"images", "-o", "json"}, {"show", "demo", "1.0.0"}, {"history", "demo", "--site", "x"},
			{"status", "--site", "x", "--sites", keyed}, {"publish", tgz}} {
			runs = append(runs, secretRun{name: "--store " + loc + ": " + args[0], args: append(args, "--store", loc),
				env: []string{"SIM_KEY=" + sim.AdminKey}, code: 1, want: "credentials"})
		}
	}
	for _, args := range [][]string{{"history", "demo", "--site", "x"}, {"history", "demo", "--site", "x", "-o", "json"}} {
		runs = append(runs, secretRun{name: "--catalog with a password: " + args[0], code: 1,
			args: append(args, "--store", store, "--catalog", "https://git:"+planted+"@127.0.0.1:1/catalog.git")})
	}
	runs = append(runs, secretRun{name: "registry password", code: 1, env: []string{"IMAGECTL_REGISTRY_USERNAME=u", "IMAGECTL_REGISTRY_PASSWORD=" + planted},
		args: []string{"images", "--store", "oci://127.0.0.1:1/x", "--plain-http"}})

	// A sensitive recipe variable, in the plan, a file, a command and a
	// validation's error_message, from -var, a var file and the
	// environment.
	write("base.qcow2", "not a disk", 0o644)
	recipe := func(condition string) string {
		return `variable "token" {
  type      = string
  sensitive = true
  validation {
    condition     = ` + condition + `
    error_message = "token ${var.token} is not valid."
  }
}

image "secrets" {
  title        = "Secrets"
  version      = "1.0.0"
  architecture = "amd64/generic"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
    format   = "qcow2"
    size     = "4G"
  }

  layer "l" {
    description = "uses ${var.token}"
    packages    = ["curl"]
    file "/etc/token" {
      content = "token=${var.token}\n"
      mode    = "0600"
    }
    run = ["echo ${var.token} >/dev/null"]
  }
}
`
	}
	okRecipe := write("ok.hcl", recipe("length(var.token) > 8"), 0o644)
	badRecipe := write("bad.hcl", recipe("var.token == \"nope\""), 0o644)
	varFile := write("vars.hcl", "token = \""+planted+"\"\n", 0o644)
	for _, in := range []struct {
		name string
		env  []string
		args []string
	}{
		{"-var", nil, []string{"-var", "token=" + planted}},
		{"var file", nil, []string{"-var-file", varFile}},
		{"IMAGECTL_VAR_", []string{"IMAGECTL_VAR_token=" + planted}, nil},
	} {
		for _, cmd := range [][]string{{"validate"}, {"validate", "-o", "json"}, {"build", "--dry-run"}, {"build", "--dry-run", "-o", "json"}, {"validate-script"}} {
			runs = append(runs,
				secretRun{name: "sensitive from " + in.name + ": " + strings.Join(cmd, " "), env: in.env,
					args: append(append(append([]string(nil), cmd[:1]...), okRecipe), append(cmd[1:], in.args...)...), code: -1},
				secretRun{name: "sensitive from " + in.name + ", invalid: " + strings.Join(cmd, " "), env: in.env,
					args: append(append(append([]string(nil), cmd[:1]...), badRecipe), append(cmd[1:], in.args...)...), code: 1, want: "not shown"})
		}
	}

	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			env := append([]string{"IMAGECTL_CACHE_DIR=" + filepath.Join(dir, "cache"), "XDG_CACHE_HOME=" + filepath.Join(dir, "xdg"),
				"USER=alice", "GIT_TERMINAL_PROMPT=0"}, r.env...)
			stdout, stderr, code := runImagectl(t, env, r.args...)
			if (r.code >= 0 && code != r.code) || !strings.Contains(stdout+stderr, r.want) {
				t.Errorf("imagectl %s: exit %d (want %d and %q)\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), code, r.code, r.want, stdout, stderr)
			}
			t.Logf("exit %d; stdout %d bytes; stderr: %.200s", code, len(stdout), stderr)
			noSecret(t, "stdout", stdout, planted, secret(sim.AdminKey))
			noSecret(t, "stderr", stderr, planted, secret(sim.AdminKey))
		})
	}
}
