package apply

import (
	"maps"
	"testing"
)

// TestAptUpdateCmd: the build's apt-get update leaves out the Translation
// indexes only when NoTranslations, on its command line.
func TestAptUpdateCmd(t *testing.T) {
	for _, c := range []struct {
		no   bool
		want string
	}{
		{true, aptEnv + "apt-get update -q -o Acquire::Languages=none"},
		{false, aptEnv + "apt-get update -q"},
	} {
		if got := (&Applier{NoTranslations: c.no}).aptUpdateCmd(); got != c.want {
			t.Errorf("NoTranslations %v: %q, want %q", c.no, got, c.want)
		}
	}
}

// TestUnavailable reads apt 2.6.2's refusals of apt-get install
// --print-uris (LC_ALL=C): the packages named as not in the archive are
// dropped, with apt's line; a refusal that names none of the step's
// packages (a pattern's matches, held broken packages) drops none. The
// lines are apt's for those names, as captured in the Debian test base
// (some rows join the lines of separate runs), except in the last four
// rows, made up to pin the rule for names that entries share.
func TestUnavailable(t *testing.T) {
	for _, c := range []struct {
		pkgs   []string
		output string
		want   map[string]string
	}{
		{[]string{"htop", "no-such-a", "no-such-b"},
			"E: Unable to locate package no-such-a\nE: Unable to locate package no-such-b\n",
			map[string]string{"no-such-a": "E: Unable to locate package no-such-a", "no-such-b": "E: Unable to locate package no-such-b"}},
		{[]string{"mail-transport-agent", "htop"},
			"E: Package 'mail-transport-agent' has no installation candidate\n",
			map[string]string{"mail-transport-agent": "E: Package 'mail-transport-agent' has no installation candidate"}},
		{[]string{"htop=0.0", "jq"}, "E: Version '0.0' for 'htop' was not found\n",
			map[string]string{"htop=0.0": "E: Version '0.0' for 'htop' was not found"}},
		{[]string{"htop/nosuchrelease"}, "E: Release 'nosuchrelease' for 'htop' was not found\n",
			map[string]string{"htop/nosuchrelease": "E: Release 'nosuchrelease' for 'htop' was not found"}},
		{[]string{"htop:i386"}, "E: Unable to locate package htop:i386\n",
			map[string]string{"htop:i386": "E: Unable to locate package htop:i386"}},
		{[]string{"no-such-*"},
			"E: Unable to locate package no-such-*\nE: Couldn't find any package by glob 'no-such-*'\nE: Couldn't find any package by regex 'no-such-*'\n",
			map[string]string{"no-such-*": "E: Unable to locate package no-such-*"}},
		// A pattern's matches are not the step's names: nothing dropped,
		// each is tried alone.
		{[]string{"~nfoo"}, "E: Package 'bygfoot' has no installation candidate\nE: Package 'petri-foo' has no installation candidate\n", map[string]string{}},
		{[]string{"exim4-daemon-light", "postfix"}, "E: Unable to correct problems, you have held broken packages.\n", map[string]string{}},
		// apt names a package by its name alone: without the version or
		// release when the name is unknown, without the native
		// architecture.
		{[]string{"no-such=1.0", "no-such-b/bookworm", "htop"},
			"E: Unable to locate package no-such\nE: Unable to locate package no-such-b\n",
			map[string]string{"no-such=1.0": "E: Unable to locate package no-such", "no-such-b/bookworm": "E: Unable to locate package no-such-b"}},
		{[]string{"awk:amd64", "htop:amd64=0.0"},
			"E: Package 'awk' has no installation candidate\nE: Version '0.0' for 'htop' was not found\n",
			map[string]string{"awk:amd64": "E: Package 'awk' has no installation candidate", "htop:amd64=0.0": "E: Version '0.0' for 'htop' was not found"}},
		{[]string{"htop:amd64/nosuchrel", "no-such:i386=1.0"},
			"E: Release 'nosuchrel' for 'htop' was not found\nE: Unable to locate package no-such:i386\n",
			map[string]string{"htop:amd64/nosuchrel": "E: Release 'nosuchrel' for 'htop' was not found", "no-such:i386=1.0": "E: Unable to locate package no-such:i386"}},
		// A line with the name as written is that package's, even when
		// another's name alone is the same; a name alone that two
		// packages share is neither's.
		{[]string{"foo=1.0", "foo"}, "E: Unable to locate package foo\n", map[string]string{"foo": "E: Unable to locate package foo"}},
		{[]string{"foo=1.0", "foo/bookworm"}, "E: Unable to locate package foo\n", map[string]string{}},
		{[]string{"foo:i386"}, "E: Unable to locate package foo\n", map[string]string{}},
		// A name inside another's line is not that name.
		{[]string{"foo"}, "E: Unable to locate package foobar\nE: Package 'foo-dev' has no installation candidate\n", map[string]string{}},
	} {
		got := unavailable(c.output, c.pkgs)
		if !maps.Equal(got, c.want) {
			t.Errorf("%v: %v, want %v", c.pkgs, got, c.want)
		}
	}
}
