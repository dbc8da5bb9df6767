#!/usr/bin/env bash
# fuzz.sh PACKAGE TARGET FUZZTIME: runs one fuzz target (go test -fuzz) and
# fails on what it finds, not on the fuzzing engine's own deadline.
#
# Go 1.26's fuzz coordinator can report "context deadline exceeded" as a
# failure when -fuzztime ends while a worker is mid-call (golang/go#75804,
# fixed in Go 1.27): no input failed then, and none is written. A real
# finding always writes its input under PACKAGE/testdata/fuzz/TARGET, so a
# failure that wrote none and ended with that message is reported and
# passed; any other failure fails.
set -euo pipefail
pkg=$1 target=$2 fuzztime=$3
go=${GO:-go}
corpus=$pkg/testdata/fuzz/$target
inputs() { if [ -d "$corpus" ]; then find "$corpus" -type f | sort; fi; }
before=$(inputs)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if "$go" test "$pkg" -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" 2>&1 | tee "$log"; then
	exit 0
fi
if [ "$(inputs)" = "$before" ] && tail -n 6 "$log" | grep -q '^    context deadline exceeded$'; then
	echo "fuzz.sh: $target: the fuzz coordinator reported its own -fuzztime deadline (golang/go#75804) and wrote no failing input: not a finding"
	exit 0
fi
exit 1
