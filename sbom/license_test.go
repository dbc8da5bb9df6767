package sbom

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func TestLicenseExpression(t *testing.T) {
	for _, c := range []struct {
		value, want string
		refs        map[string]string
	}{
		{"GPL-2", "GPL-2.0-only", nil},
		{"GPL-2+", "GPL-2.0-or-later", nil},
		{"gpl-3+", "GPL-3.0-or-later", nil},
		{"GPL-1+", "GPL-1.0-or-later", nil},
		{"LGPL-2", "LGPL-2.0-only", nil},
		{"LGPL-2.1+", "LGPL-2.1-or-later", nil},
		{"LGPL-3", "LGPL-3.0-only", nil},
		{"AGPL-3+", "AGPL-3.0-or-later", nil},
		{"GFDL-1.2", "GFDL-1.2-only", nil},
		{"GFDL-1.3+", "GFDL-1.3-or-later", nil},
		{"GPL-2.0+", "GPL-2.0-or-later", nil},
		{"GPL-2.0-or-later", "GPL-2.0-or-later", nil},
		{"LGPL-2.1-only", "LGPL-2.1-only", nil},
		{"GPL-4+", "LicenseRef-GPL-4-", map[string]string{"LicenseRef-GPL-4-": "GPL-4+"}},
		{"Apache-2.0", "Apache-2.0", nil},
		{"Apache-2", "Apache-2.0", nil},
		{"Artistic", "Artistic-1.0-Perl", nil},
		{"Artistic-2.0", "Artistic-2.0", nil},
		{"BSD-2-clause", "BSD-2-Clause", nil},
		{"BSD-3-clause", "BSD-3-Clause", nil},
		{"bsd-4-clause", "BSD-4-Clause", nil},
		{"Expat", "MIT", nil},
		{"MIT", "MIT", nil},
		{"ISC", "ISC", nil},
		{"Zlib", "Zlib", nil},
		{"CC0-1.0", "CC0-1.0", nil},
		{"CC-BY-3.0", "CC-BY-3.0", nil},
		{"CC-BY-SA-4.0", "CC-BY-SA-4.0", nil},
		{"MPL-1.1", "MPL-1.1", nil},
		{"MPL-2.0", "MPL-2.0", nil},
		{"PSF-2", "PSF-2.0", nil},
		{"Python-2.0", "Python-2.0", nil},
		{"OpenSSL", "OpenSSL", nil},
		{"curl", "curl", nil},
		{"X11", "X11", nil},
		{"FSFAP", "FSFAP", nil},
		{"FSFUL", "FSFUL", nil},
		{"FSFULLR", "FSFULLR", nil},
		{"BSL-1.0", "BSL-1.0", nil},
		{"Unicode-DFS-2016", "Unicode-DFS-2016", nil},
		{"Perl", "Artistic-1.0-Perl OR GPL-1.0-or-later", nil},
		{"public-domain", "LicenseRef-public-domain", map[string]string{"LicenseRef-public-domain": "public-domain"}},
		{"GPL-2+ or Artistic", "GPL-2.0-or-later OR Artistic-1.0-Perl", nil},
		{"GPL-2+ OR Artistic-2.0", "GPL-2.0-or-later OR Artistic-2.0", nil},
		{"GPL-2 and BSD-3-clause", "GPL-2.0-only AND BSD-3-Clause", nil},
		{"GPL-2+ or Artistic, and BSD-3-clause", "(GPL-2.0-or-later OR Artistic-1.0-Perl) AND BSD-3-Clause", nil},
		{"MIT, or GPL-2 and BSD-3-clause", "MIT OR (GPL-2.0-only AND BSD-3-Clause)", nil},
		{"MIT, ISC", "MIT AND ISC", nil},
		{"Perl or MIT", "(Artistic-1.0-Perl OR GPL-1.0-or-later) OR MIT", nil},
		{"GPL-2+ with OpenSSL exception", "LicenseRef-GPL-2--with-OpenSSL-exception",
			map[string]string{"LicenseRef-GPL-2--with-OpenSSL-exception": "GPL-2+ with OpenSSL exception"}},
		{"GPL-3+ with Bison exception or MIT", "LicenseRef-GPL-3--with-Bison-exception OR MIT",
			map[string]string{"LicenseRef-GPL-3--with-Bison-exception": "GPL-3+ with Bison exception"}},
		{"Weird License 1.0", "LicenseRef-Weird-License-1.0", map[string]string{"LicenseRef-Weird-License-1.0": "Weird License 1.0"}},
		{"other/ünïcode", "LicenseRef-other--n-code", map[string]string{"LicenseRef-other--n-code": "other/ünïcode"}},
		{"GPL-2 or", "LicenseRef-GPL-2-or", map[string]string{"LicenseRef-GPL-2-or": "GPL-2 or"}},
		{",", "", nil},
	} {
		got, refs := LicenseExpression(c.value)
		if c.refs == nil {
			c.refs = map[string]string{}
		}
		if got != c.want || !reflect.DeepEqual(refs, c.refs) {
			t.Errorf("LicenseExpression(%q) = %q %v, want %q %v", c.value, got, refs, c.want, c.refs)
		}
	}
}

func TestPackageLicense(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   string
	}{
		{nil, "NOASSERTION"},
		{[]string{"GPL-2"}, "GPL-2.0-only"},
		{[]string{"GPL-2", "gpl-2", "Expat"}, "GPL-2.0-only AND MIT"},
		{[]string{"GPL-2+ or Artistic", "BSD-3-clause"}, "(GPL-2.0-or-later OR Artistic-1.0-Perl) AND BSD-3-Clause"},
		{[]string{"Perl"}, "Artistic-1.0-Perl OR GPL-1.0-or-later"},
		{[]string{"Perl", "Zlib"}, "(Artistic-1.0-Perl OR GPL-1.0-or-later) AND Zlib"},
	} {
		if got := packageLicense(c.values); got != c.want {
			t.Errorf("packageLicense(%q) = %q, want %q", c.values, got, c.want)
		}
	}
}

// TestLicenseExpressionFuzz maps random License values made of known and
// unknown names, operators, commas and noise, and checks the expression is
// well formed: balanced parentheses, operators between terms, every term an
// SPDX identifier or a LicenseRef the refs name.
func TestLicenseExpressionFuzz(t *testing.T) {
	words := []string{"GPL-2", "GPL-2+", "LGPL-2.1+", "Artistic", "Perl", "Expat", "BSD-3-clause", "public-domain",
		"Weird one", "X with Y exception", "or", "and", "OR", ",", ", and", ", or", "(", ")", "ünï", "\t", "  "}
	r := rand.New(rand.NewSource(1))
	known := map[string]bool{}
	for _, id := range spdxLicenses {
		known[id] = true
	}
	for _, id := range []string{"GPL-2.0-only", "GPL-2.0-or-later", "LGPL-2.1-or-later", "GPL-1.0-or-later", "Artistic-1.0-Perl"} {
		known[id] = true
	}
	for i := 0; i < 5000; i++ {
		var parts []string
		for n := r.Intn(8); n >= 0; n-- {
			parts = append(parts, words[r.Intn(len(words))])
		}
		value := strings.Join(parts, " ")
		expr, refs := LicenseExpression(value)
		if !balanced(expr) {
			t.Fatalf("%q: unbalanced %q", value, expr)
		}
		tokens := strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(expr))
		for j, tok := range tokens {
			isOp := tok == "AND" || tok == "OR"
			if isOp != (j%2 == 1) || (isOp && j == len(tokens)-1) {
				t.Fatalf("%q: malformed %q", value, expr)
			}
			if isOp {
				continue
			}
			if strings.HasPrefix(tok, "LicenseRef-") {
				if _, ok := refs[tok]; !ok && tok != "LicenseRef-public-domain" {
					t.Fatalf("%q: %s not in refs %v", value, tok, refs)
				}
				if strings.Trim(tok[len("LicenseRef-"):], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
					t.Fatalf("%q: bad ref %q", value, tok)
				}
			} else if !known[tok] {
				t.Fatalf("%q: unknown id %q in %q", value, tok, expr)
			}
		}
	}
}
