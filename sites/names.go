package sites

import (
	"regexp"
)

var reName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// ValidName reports whether s is a valid site or group name: lowercase
// letters, digits, '.', '_' and '-', starting with a letter or digit. It is
// the one rule for a site's name, in the sites file and as a store key.
func ValidName(s string) bool { return reName.MatchString(s) }
