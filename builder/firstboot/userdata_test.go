package firstboot

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestUserData parses the user-data back as cloud-init would read it: a
// cloud-config whose write_files holds the script byte for byte (any byte,
// a NUL or invalid UTF-8 included, survives base64) and whose runcmd runs
// it.
func TestUserData(t *testing.T) {
	script := []byte("#!/bin/sh\necho 'it''s' \"$(x)\" `y`\n\xff\x00\n: ---\n")
	ud := UserData(script, false)
	if !bytes.HasPrefix(ud, []byte("#cloud-config\n")) {
		t.Fatalf("not a cloud-config: %q", ud[:min(len(ud), 20)])
	}
	var doc struct {
		WriteFiles []struct {
			Path        string `yaml:"path"`
			Owner       string `yaml:"owner"`
			Permissions string `yaml:"permissions"`
			Encoding    string `yaml:"encoding"`
			Content     string `yaml:"content"`
		} `yaml:"write_files"`
		RunCmd []string `yaml:"runcmd"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(ud))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%v:\n%s", err, ud)
	}
	if len(doc.WriteFiles) != 1 {
		t.Fatalf("write_files: %+v", doc.WriteFiles)
	}
	wf := doc.WriteFiles[0]
	got, err := base64.StdEncoding.DecodeString(wf.Content)
	if err != nil || !bytes.Equal(got, script) || wf.Encoding != "b64" {
		t.Errorf("the script does not come back: %v, %q (%s)", err, got, wf.Encoding)
	}
	if wf.Path != ScriptPath || wf.Owner != "root:root" || wf.Permissions != "0700" {
		t.Errorf("write_files: %+v", wf)
	}
	if len(doc.RunCmd) != 1 || doc.RunCmd[0] != RunCmd(false) {
		t.Errorf("runcmd: %q", doc.RunCmd)
	}
}

// TestRunCmdStopsWhatFollows runs the user-data's runcmd as cloud-init
// does (its entries, one a line, in a script sh runs without -e) with a
// site bootstrap's entry merged after it: when the first-boot script fails,
// the bootstrap does not run and the stage fails with the script's status;
// when it succeeds the bootstrap runs, and a script carrying a sensitive
// value is removed.
func TestRunCmdStopsWhatFollows(t *testing.T) {
	for _, tc := range []struct {
		script    string
		sensitive bool
		code      int
		bootstrap bool
		kept      bool
	}{
		{"exit 3\n", false, 3, false, true},
		{"exit 3\n", true, 3, false, true},
		{"exit 0\n", false, 0, true, true},
		{"exit 0\n", true, 0, true, false},
	} {
		dir := t.TempDir()
		var doc struct {
			RunCmd []string `yaml:"runcmd"`
		}
		if err := yaml.Unmarshal(UserData([]byte(tc.script), tc.sensitive), &doc); err != nil {
			t.Fatal(err)
		}
		scriptPath, ran := filepath.Join(dir, "firstboot.sh"), filepath.Join(dir, "bootstrap-ran")
		if err := os.WriteFile(scriptPath, []byte(tc.script), 0o700); err != nil {
			t.Fatal(err)
		}
		runcmd := "#!/bin/sh\n"
		for _, c := range append(doc.RunCmd, "touch "+ran) {
			runcmd += strings.ReplaceAll(c, ScriptPath, scriptPath) + "\n"
		}
		cmd := exec.Command("/bin/sh", "-c", runcmd)
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		_, ranErr := os.Stat(ran)
		_, keptErr := os.Stat(scriptPath)
		if code != tc.code || (ranErr == nil) != tc.bootstrap || (keptErr == nil) != tc.kept {
			t.Errorf("%q sensitive %v: exit %d, bootstrap ran %v, script kept %v", tc.script, tc.sensitive, code, ranErr == nil, keptErr == nil)
		}
	}
}
