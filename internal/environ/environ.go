// Package environ owns how imagectl reads its environment. The CLI hands
// the environment down as KEY=value pairs (os.Environ's form) instead of
// each package reading the process's, so that tests run commands
// in-process with an environment of their own.
//
// A variable is read by one rule, exec's: the last entry for a name wins.
// It is asked one of two questions. Get, for every setting (a directory, a
// store, a sites or key file, a secret a site names): an empty value is
// the same as none, and the default applies. Lookup, only where an empty
// value means something of its own: $COSIGN_PASSWORD set empty is the
// empty password, unset is a mistake to report; $NO_COLOR set at all,
// empty or not, turns colour off.
//
// Reading every variable of a prefix (recipes' IMAGECTL_VAR_*) is the
// reader's own: it enumerates, it does not look a name up.
package environ

import "strings"

// Lookup returns the value of the variable name in env and whether it is
// set at all, an empty value included.
func Lookup(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// Get returns the value of the variable name in env, "" when it is unset
// or empty.
func Get(env []string, name string) string {
	v, _ := Lookup(env, name)
	return v
}
