package firstboot

import (
	"bytes"
	"encoding/base64"
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
	ud := UserData(script)
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
		RunCmd [][]string `yaml:"runcmd"`
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
	if len(doc.RunCmd) != 1 || strings.Join(doc.RunCmd[0], " ") != "sh "+ScriptPath {
		t.Errorf("runcmd: %q", doc.RunCmd)
	}
}
