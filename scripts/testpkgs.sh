#!/usr/bin/env bash
# testpkgs.sh WHICH [-why]: the module's packages that make test must run in
# more than one way, computed from go list, never kept by hand.
#
#   short  packages whose test binary reads testing.Short() (in the package's
#          own test files or in any non-standard package linked into its
#          test binary, such as internal/testbase): their -short run is not
#          their full run, so make test runs them in full as well as under
#          -race -short. Every other package's -race -short run is its full
#          run, and the race run is its only run.
#   nocgo  packages whose test binary has another file set with
#          CGO_ENABLED=0 and no tags than in the tagged cgo build (the
#          package itself or any non-standard package it links: build tags,
#          cgo files, a dependency only one build imports): the CGO-free
#          build's tests run for these. The standard library's own cgo
#          variants (net's resolver, os/user) are Go's to test and are not
#          compared, or every package using net would count.
#   appliance  the short packages whose -short leaves out builds, boots or
#          appliance launches: they read testing.Short() through
#          internal/testbase (the test base image) or in test files of
#          their own that link libguestfs's Go binding (the tagged cgo
#          build), so their full run is left without -race. Any other
#          short package's full run is cheap enough for the race detector,
#          and make test runs it once, there.
#
# -why prints, after each package, what put it on the list.
# GO and TAGS come from the environment (make passes them).
set -euo pipefail
which=${1:?usage: testpkgs.sh short|appliance|nocgo [-why]}
why=${2:-}
go=${GO:-go}
tags=${TAGS:-guestfs}
module=$("$go" list -m)
work=$(mktemp -d -t imagectl-testpkgs.XXXXXX)
trap 'rm -rf "$work"' EXIT

# files OUT CGO TAGS: every non-standard package of the test binaries of
# ./... (variants such as "p [q.test]" included), one line each:
# import path, its directory, its compiled files, the files its build
# constraints leave out (tab-separated).
files() {
	CGO_ENABLED=$2 "$go" list -tags "$3" -e -test -deps -f '{{if not .Standard}}{{.ImportPath}}	{{.Dir}}	{{join .GoFiles " "}} {{join .CgoFiles " "}}	{{join .IgnoredGoFiles " "}}{{end}}' ./... >"$1"
}

# deps OUT CGO TAGS: each test binary "p.test" with its non-standard
# dependencies (variants such as "q [p.test]" included), one line: p, a
# tab, the dependencies separated by tabs.
deps() {
	CGO_ENABLED=$2 "$go" list -tags "$3" -e -test -f '{{.ImportPath}}	{{join .Deps "	"}}' ./... |
		awk -F '\t' '$1 ~ /\.test$/ { printf "%s", substr($1, 1, length($1) - 5); for (i = 2; i <= NF; i++) if ($i ~ /\./) printf "\t%s", $i; print "" }' >"$1"
}

# report LIST: the packages of the deps file $work/deps whose binary links
# one of the packages in LIST (one a line), with why when asked.
report() {
	awk -F '\t' -v why="$why" 'NR == FNR { hit[$0] = 1; next }
		{ n = ""; delete seen; for (i = 2; i <= NF; i++) if (($i in hit) && !($i in seen)) { seen[$i] = 1; n = n " \"" $i "\"" }
		  if (n != "") { print $1; if (why != "") print "  because of:" n } }' "$1" "$work/deps"
}

# short: the packages that read -short (see above), with why when asked.
short() {
	files "$work/files" 1 "$tags"
	deps "$work/deps" 1 "$tags"
	# A package reads -short when one of its compiled files does.
	awk -F '\t' '{ n = split($3, f, " "); for (i = 1; i <= n; i++) print $1 "\t" (f[i] ~ /^\// ? "" : $2 "/") f[i] }' "$work/files" |
		while IFS=$'\t' read -r pkg file; do
			if grep -q 'testing\.Short()' "$file"; then echo "$pkg"; fi
		done | sort -u >"$work/hit"
	report "$work/hit"
}

case $which in
short) short ;;
appliance)
	why='' short >/dev/null
	echo libguestfs.org/guestfs >"$work/guestfs"
	why='' report "$work/guestfs" | sort >"$work/links"
	# Of the readers of -short, internal/testbase and the test variants
	# ("p [p.test]") of packages that link libguestfs.
	awk -v tb="$module/internal/testbase" 'NR == FNR { links[$0] = 1; next }
		$0 == tb || ($2 ~ /^\[/ && ($1 in links))' "$work/links" "$work/hit" >"$work/hit.appliance"
	mv "$work/hit.appliance" "$work/hit"
	why='' report "$work/hit"
	;;
nocgo)
	files "$work/files.cgo" 1 "$tags"
	files "$work/files.nocgo" 0 ""
	deps "$work/deps.cgo" 1 "$tags"
	deps "$work/deps" 0 ""
	# A package differs when its files differ or only one build has it;
	# only packages the CGO-free build tests can run without cgo.
	sort "$work/files.cgo" >"$work/a"
	sort "$work/files.nocgo" >"$work/b"
	comm -3 "$work/a" "$work/b" | sed 's/^\t//' | cut -f1 | sort -u >"$work/hit"
	# A dependency only the cgo build links is on the hit list (only one
	# build has it): add the cgo build's dependencies to the CGO-free
	# build's test binaries so that such a package counts.
	awk -F '\t' 'NR == FNR { d[$1] = $0; next } ($1 in d) { n = split(d[$1], f, "\t"); for (i = 2; i <= n; i++) $0 = $0 "\t" f[i] } { print }' \
		"$work/deps.cgo" "$work/deps" >"$work/deps.both"
	mv "$work/deps.both" "$work/deps"
	report "$work/hit"
	;;
*)
	echo "testpkgs.sh: $which: want short, appliance or nocgo" >&2
	exit 2
	;;
esac
