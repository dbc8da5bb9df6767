package manifest

import (
	"fmt"
	"regexp"
	"strings"
)

// The one rule for what an image name and a version may be. Each becomes a
// path element (the store's <image>/<version>/), part of every file name
// of a build (<name>-<version>.tgz and the files beside it, FilesFor), a
// store key, and text in generated shell; so neither may hold a path
// separator, "..", whitespace or a control character, and together they
// keep the longest of those file names under NAME_MAX (255 bytes). Every
// way one enters checks it here: the recipe, build --version, a manifest
// read back (Parse), the plan, the stores.

// MaxNameLen and MaxVersionLen bound an image name and a version.
const (
	MaxNameLen    = 100
	MaxVersionLen = 100
)

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+~-]*$`)
)

// ValidName reports whether s keeps to the one rule for names: lowercase
// letters, digits, '.', '_' and '-', starting with a letter or digit. An
// image name keeps to it (and to CheckImageName's bounds); so do the
// recipe's layers, bundles, checks and apt repositories, and the sites
// file's sites and groups.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// CheckImageName says what is wrong with an image name, nil when nothing.
func CheckImageName(name string) error {
	if len(name) > MaxNameLen || !ValidName(name) || strings.Contains(name, "..") {
		return fmt.Errorf("%s is not a valid image name: use at most %d lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, without \"..\"", shown(name), MaxNameLen)
	}
	return nil
}

// CheckVersion says what is wrong with an image version, nil when nothing.
func CheckVersion(version string) error {
	if len(version) > MaxVersionLen || !versionRE.MatchString(version) || strings.Contains(version, "..") {
		return fmt.Errorf("%s is not a valid version name: use at most %d letters, digits, '.', '+', '~', '_' and '-', starting with a letter or digit, without \"..\"", shown(version), MaxVersionLen)
	}
	return nil
}

// shown quotes a refused value for an error, escaped (%q) and cut: a
// hostile value must not drive the terminal or flood it.
func shown(s string) string {
	const limit = 64
	if len(s) > limit {
		return fmt.Sprintf("%q... (%d bytes)", s[:limit], len(s))
	}
	return fmt.Sprintf("%q", s)
}
