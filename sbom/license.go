package sbom

import (
	"fmt"
	"regexp"
	"strings"
)

// NoAssertion is SPDX's "nothing stated" value, the License of a package
// whose copyright file states no license.
const NoAssertion = "NOASSERTION"

// debianLicenses maps Debian's short license names (DEP-5), lowercased, to
// SPDX license expressions. SPDX identifiers themselves are added by init,
// and the GNU families (GPL-2, LGPL-2.1+, GFDL-1.3, ...) are handled by
// gnuLicense.
var debianLicenses = map[string]string{
	"apache-2":      "Apache-2.0",
	"artistic":      "Artistic-1.0-Perl",
	"artistic-2":    "Artistic-2.0",
	"cc0":           "CC0-1.0",
	"expat":         "MIT",
	"psf-2":         "PSF-2.0",
	"sil-ofl-1.1":   "OFL-1.1",
	"perl":          "Artistic-1.0-Perl OR GPL-1.0-or-later",
	"public-domain": "LicenseRef-public-domain",
}

// spdxLicenses are SPDX license identifiers that Debian copyright files use
// as they are (or that the table maps to); they are kept, in SPDX's case.
var spdxLicenses = []string{
	"0BSD", "AFL-2.1", "AFL-3.0", "Apache-1.0", "Apache-1.1", "Apache-2.0",
	"Artistic-1.0", "Artistic-1.0-Perl", "Artistic-2.0", "Beerware",
	"BSD-1-Clause", "BSD-2-Clause", "BSD-3-Clause", "BSD-4-Clause", "BSL-1.0",
	"bzip2-1.0.6", "CC-BY-3.0", "CC-BY-4.0", "CC-BY-SA-3.0", "CC-BY-SA-4.0",
	"CC0-1.0", "CDDL-1.0", "CDDL-1.1", "curl", "ECL-2.0", "EPL-1.0", "EPL-2.0",
	"FSFAP", "FSFUL", "FSFULLR", "FTL", "HPND", "ICU", "IJG", "ISC", "LPPL-1.3c",
	"MIT", "MIT-0", "MPL-1.1", "MPL-2.0", "MS-PL", "NCSA", "OFL-1.1", "OpenSSL",
	"PostgreSQL", "PSF-2.0", "Python-2.0", "Python-2.0.1", "Ruby",
	"Sleepycat", "TCL", "Unicode-DFS-2015", "Unicode-DFS-2016", "Unicode-3.0",
	"Unlicense", "Vim", "W3C", "WTFPL", "X11", "Zlib", "ZPL-2.1",
}

// gnuVersions are the versions of the GNU licenses SPDX knows.
var gnuVersions = map[string][]string{
	"GPL":  {"1.0", "2.0", "3.0"},
	"LGPL": {"2.0", "2.1", "3.0"},
	"AGPL": {"1.0", "3.0"},
	"GFDL": {"1.1", "1.2", "1.3"},
}

func init() {
	for _, id := range spdxLicenses {
		debianLicenses[strings.ToLower(id)] = id
	}
}

// gnuName matches the GNU licenses' names, Debian's (GPL-2, LGPL-2.1+) and
// SPDX's (GPL-2.0-only, GPL-2.0-or-later, the deprecated GPL-2.0+).
var gnuName = regexp.MustCompile(`^(gpl|lgpl|agpl|gfdl)-(\d)(?:\.(\d))?(\+|-only|-or-later)?$`)

// gnuLicense is the SPDX identifier of a GNU license name, if it is one.
func gnuLicense(lower string) (string, bool) {
	m := gnuName.FindStringSubmatch(lower)
	if m == nil {
		return "", false
	}
	family, version := strings.ToUpper(m[1]), m[2]+"."+m[3]
	if m[3] == "" {
		version += "0"
	}
	known := false
	for _, v := range gnuVersions[family] {
		known = known || v == version
	}
	if !known {
		return "", false
	}
	if m[4] == "+" || m[4] == "-or-later" {
		return family + "-" + version + "-or-later", true
	}
	return family + "-" + version + "-only", true
}

// licenseRefChars are the characters a LicenseRef's idstring may not have.
var licenseRefChars = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// LicenseRef is the SPDX LicenseRef- identifier of a license name SPDX
// does not know.
func LicenseRef(name string) string {
	return "LicenseRef-" + licenseRefChars.ReplaceAllString(name, "-")
}

// licenseTerm is the SPDX expression of one Debian license name, and
// whether it is a LicenseRef (a name SPDX does not know).
func licenseTerm(name string) (expr string, ref bool) {
	lower := strings.ToLower(name)
	if strings.Contains(lower, " with ") {
		// "GPL-2+ with OpenSSL exception": Debian's exceptions are free
		// text, not SPDX's exception list.
		return LicenseRef(name), true
	}
	if id, ok := debianLicenses[lower]; ok {
		return id, strings.HasPrefix(id, "LicenseRef-")
	}
	if id, ok := gnuLicense(lower); ok {
		return id, false
	}
	return LicenseRef(name), true
}

// licenseWord splits a DEP-5 License value into names and the operators
// between them.
var licenseWord = regexp.MustCompile(`(?i)\s+(or|and)\s+`)

// LicenseExpression maps a DEP-5 License value (Debian short names joined
// with "or" and "and", commas lowering the precedence of the operator that
// follows) to an SPDX license expression. It also returns the names it
// made LicenseRef- identifiers of, keyed by identifier.
func LicenseExpression(value string) (expr string, refs map[string]string) {
	refs = map[string]string{}
	var groups []string
	var ops []string
	for i, group := range strings.Split(value, ",") {
		group = strings.TrimSpace(group)
		op := "AND"
		lower := strings.ToLower(group)
		switch {
		case strings.HasPrefix(lower, "or "):
			op, group = "OR", group[3:]
		case strings.HasPrefix(lower, "and "):
			op, group = "AND", group[4:]
		}
		e := groupExpression(group, refs)
		if e == "" {
			continue
		}
		if i > 0 && len(groups) > 0 {
			ops = append(ops, op)
		}
		groups = append(groups, e)
	}
	if len(groups) == 1 {
		return groups[0], refs
	}
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteString(" " + ops[i-1] + " ")
		}
		b.WriteString(parenthesize(g))
	}
	return b.String(), refs
}

// groupExpression is the expression of names joined by "or" and "and"
// (no commas). DEP-5 and SPDX give "and" the same precedence over "or", so
// the operators stay where they are.
func groupExpression(group string, refs map[string]string) string {
	names := licenseWord.Split(group, -1)
	ops := licenseWord.FindAllStringSubmatch(group, -1)
	var terms, termOps []string
	for i, name := range names {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		term, ref := licenseTerm(name)
		if ref {
			if _, ok := refs[term]; !ok {
				refs[term] = name
			}
		}
		if len(terms) > 0 {
			termOps = append(termOps, strings.ToUpper(ops[i-1][1]))
		}
		terms = append(terms, term)
	}
	if len(terms) == 1 {
		return terms[0]
	}
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteString(" " + termOps[i-1] + " ")
		}
		b.WriteString(parenthesize(t))
	}
	return b.String()
}

// parenthesize wraps a compound expression in parentheses.
func parenthesize(expr string) string {
	wrapped := strings.HasPrefix(expr, "(") && strings.HasSuffix(expr, ")") && balanced(expr[1:len(expr)-1])
	if strings.Contains(expr, " ") && !wrapped {
		return "(" + expr + ")"
	}
	return expr
}

// balanced reports whether expr's parentheses pair up, so that "(a) OR
// (b)" is not taken for one parenthesized expression.
func balanced(expr string) bool {
	depth := 0
	for _, c := range expr {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// packageLicense is the SPDX expression of a package's License values: the
// unique expressions of each, joined with AND; NOASSERTION for none.
func packageLicense(values []string) string {
	var exprs []string
	seen := map[string]bool{}
	for _, v := range values {
		e, _ := LicenseExpression(v)
		if e == "" || seen[e] {
			continue
		}
		seen[e] = true
		exprs = append(exprs, e)
	}
	switch len(exprs) {
	case 0:
		return NoAssertion
	case 1:
		return exprs[0]
	}
	for i, e := range exprs {
		exprs[i] = parenthesize(e)
	}
	return strings.Join(exprs, " AND ")
}

// licenseRefs are the LicenseRef- identifiers in an SPDX expression.
var licenseRefs = regexp.MustCompile(`LicenseRef-[A-Za-z0-9.-]+`)

// describeRef is the extracted text of a LicenseRef made of a Debian
// license name.
func describeRef(name, pkg string) string {
	return fmt.Sprintf("The license named %q in the Debian copyright file of package %s", name, pkg)
}
