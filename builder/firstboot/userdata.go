package firstboot

import (
	"encoding/base64"
	"strings"
)

// ScriptPath is where the user-data writes the script on the host.
const ScriptPath = StateDir + "/firstboot.sh"

// RunCmd is the user-data's one runcmd entry: cloud-init writes runcmd's
// entries, one a line, into a script that sh runs without -e, so this
// entry turns -e on first: when the first-boot script fails, no later
// runcmd entry runs (a site bootstrap's, merged after this one) and the
// stage fails with the script's exit status. A script that carries a
// sensitive value is removed once it has succeeded (its state directory
// keeps what a rerun needs; a failed one stays for the rerun).
func RunCmd(sensitive bool) string {
	cmd := "set -e; sh " + ScriptPath
	if sensitive {
		cmd += "; rm -f " + ScriptPath
	}
	return cmd
}

// UserData wraps a first-boot script into NoCloud user-data: a
// cloud-config whose write_files puts the script (base64: any byte
// survives YAML) at ScriptPath, root's, mode 0700, and whose runcmd runs it
// (RunCmd) in cloud-init's last stage, its output going where cloud-init's
// goes (the console and /var/log/cloud-init-output.log). A site bootstrap
// merged into the same cloud-config must come after it in runcmd; it then
// runs only when the script succeeded, and a bootstrap run otherwise
// should check for DoneMarker in StateDir first.
func UserData(script []byte, sensitive bool) []byte {
	var b strings.Builder
	b.WriteString("#cloud-config\n")
	b.WriteString("# Written by imagectl: the first-boot script of an image's plan, run once.\n")
	b.WriteString("write_files:\n")
	b.WriteString("  - path: " + ScriptPath + "\n")
	b.WriteString("    owner: root:root\n")
	b.WriteString("    permissions: '0700'\n")
	b.WriteString("    encoding: b64\n")
	b.WriteString("    content: " + base64.StdEncoding.EncodeToString(script) + "\n")
	b.WriteString("runcmd:\n")
	b.WriteString("  - '" + RunCmd(sensitive) + "'\n")
	return []byte(b.String())
}
