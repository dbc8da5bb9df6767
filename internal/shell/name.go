package shell

import "regexp"

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// IsName reports whether s is a shell variable name (POSIX's "name":
// letters, digits and '_', not starting with a digit), the one rule for
// the name of every environment variable imagectl reads or sets: a
// sites file's api_key_env and token_env, a recipe's legacy_env and
// bootstrap_env, a smoke profile's bootstrap environment.
func IsName(s string) bool { return nameRE.MatchString(s) }
