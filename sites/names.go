package sites

import (
	"regexp"
	"strings"
)

var reName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// ValidName reports whether s is a valid site or group name: lowercase
// letters, digits, '.', '_' and '-', starting with a letter or digit. It is
// the one rule for a site's name, in the sites file and as a store key.
func ValidName(s string) bool { return reName.MatchString(s) }

// lookupEnv is the value of the environment variable name in env (KEY=value
// pairs, as os.Environ; the last one wins), "" when it is unset or empty.
func lookupEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}
