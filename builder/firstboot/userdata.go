package firstboot

import (
	"encoding/base64"
	"strings"
)

// ScriptPath is where the user-data writes the script on the host.
const ScriptPath = StateDir + "/firstboot.sh"

// UserData wraps a first-boot script into NoCloud user-data: a
// cloud-config whose write_files puts the script (base64: any byte
// survives YAML) at ScriptPath, root's, mode 0700, and whose runcmd runs it
// in cloud-init's last stage, its output going where cloud-init's goes
// (the console and /var/log/cloud-init-output.log). A failing script fails
// that stage, as a failing site bootstrap does. The comparison with a
// baked image adds its own modules (the site bootstrap's runcmd after this
// one) by merging cloud-configs.
func UserData(script []byte) []byte {
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
	b.WriteString("  - [sh, " + ScriptPath + "]\n")
	return []byte(b.String())
}
