#!/usr/bin/env bash
# testlanes.sh: make test's tests, fuzzing and dry-runs, as jobs that two
# lanes take from one queue, longest first, so that both cores stay busy to
# the end. make test calls it after lint, with GO, TAGS, BIN and
# BASE_VARS set and the run's package cache exported.
#
# What runs, and why once is enough:
#   - every package under -race (the race detector over every test that
#     needs no appliance): with -short the packages whose -short leaves
#     out builds, boots and appliance launches (scripts/testpkgs.sh
#     appliance), in full every other (their -short trims little);
#   - in full, without -race, those appliance packages (of cmd/imagectl,
#     only the tests its -short run skipped);
#   - the CGO-free build's tests (-short) of the packages whose file set
#     differs without cgo and the guestfs tag (scripts/testpkgs.sh nocgo);
#   - the fuzz targets (make fuzz) and the dry-runs of the shipped recipes.
# smoke runs as three processes (go test runs a package's tests one at a
# time): the tests that share the H200 stand-in build, the first-boot
# comparison, and the rest; the three patterns partition its tests.
#
# go vet does not run again inside go test (-vet=off): make lint vets
# both builds, tests included, before this runs.
#
# Each job's output lines start with its name; each job's and each lane's
# time is printed, and the names of the jobs that failed. The exit status
# is 1 when any job failed, and a failed job's failure lines are shown
# again at the end. TEST_LANES sets the number of lanes (2), TEST_DEADLINE
# the seconds after which the lanes are stopped (4500).
# Arguments name jobs to run alone (default: all), as in
# scripts/testlanes.sh race nocgo (GO, BIN and BASE_VARS as make sets them).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

go=${GO:-go}
tags=${TAGS:-guestfs}
module=github.com/gpuaas/imagectl

# The smoke tests that share the stand-in build (standInArtifact) run in
# one process, which builds it once; the comparison tests build their own
# small image. A new stand-in test left out of standin still runs (in
# smoke-rest), only building the stand-in a second time.
standin='TestSmokeH200StandIn|TestSmokeNoKernel|TestSmokeCancelledDuringDeploy'
compare='TestCompareFirstBoot.*'

# The jobs, about longest first (the order the last runs balanced well):
# the seconds each took in a local CI run (CI=true .ci/run, a clean clone,
# two-core machine) at 638b67b, its lanes busy 2850 and 2899 s. At
# 86ca403, before the test key pairs were made once a test binary, race
# and race-release were one job of 766 s.
jobs=(
	smoke-standin # 1877: the stand-in build, its boots, the release loop
	guestfs       # 1699: builder/guestfs, real builds
	smoke-compare # 747: the first-boot comparison (issue 24)
	cmd           # 580: cmd/imagectl under -race -short, then the tests it skipped
	race-release  # 292: -race, the release loop's packages (release_loop)
	race          # 282: -race, the others but cmd/imagectl
	nocgo         # 112: the CGO-free build's tests
	fuzz          # 59: make fuzz, four targets (50 s) and their builds
	full          # 44: the other appliance packages, in full
	smoke-rest    # 57: the boots of a blank disk, the smoke unit tests
	dry-run       # ~1: the shipped recipes' dry-runs
)

# release_loop matches the packages race-release tests, the release loop
# and what it is made of: a split of -race's packages in two about equal
# jobs, so that the lanes end together.
release_loop="^$module/(release|signing|store|upload|racks|sites)(/|\$)"

run() {
	echo "$*" >&2
	"$@"
}

# pkgs WHICH [EXCEPT...]: the packages of WHICH (all, or a list of
# scripts/testpkgs.sh, said first as what the job runs), less the ones
# named, one a line.
pkgs() {
	local which=$1 list p skip
	shift
	if [ "$which" = all ]; then
		list=$("$go" list -tags "$tags" ./...) || return 1
	else
		list=$(GO=$go TAGS=$tags scripts/testpkgs.sh "$which") || return 1
		echo "scripts/testpkgs.sh $which: $(echo "$list" | sed "s|^$module/||" | tr '\n' ' ')" >&2
	fi
	for p in $list; do
		for skip in "$@"; do
			[ "$p" = "$module/$skip" ] && continue 2
		done
		echo "$p"
	done
}

# race_full HEAVY: the packages -race tests in full, one a line: all but
# cmd/imagectl (its own job) and HEAVY, the appliance packages (tested
# with -short).
race_full() {
	local all
	all=$(pkgs all cmd/imagectl) || return 1
	grep -vxF -f <(echo "$1") <<<"$all"
}

# Every job runs one test binary at a time (-p 1): a lane is one core.
# Tests run with -v, into the job's log (see lane): the times of every
# test are kept for the run's summary, and a failed job's log is shown whole.
# The timeouts are for a hung test, not a slow machine: two CI runs of
# nearly the same code took 53 and 72 minutes, so the longest job (the
# stand-in's, 33 to 39 minutes on two-core machines here) gets about twice
# its time. The whole run has its own bound (TEST_DEADLINE, below).
full_test() { run "$go" test -v -count=1 -vet=off -p 1 -tags "$tags" -timeout 75m "$@"; }
race_test() { run "$go" test -v -count=1 -vet=off -p 1 -race -tags "$tags" -timeout 40m "$@"; }

job() {
	local list p
	case $1 in
	smoke-standin) full_test -run "^($standin)\$" ./smoke ;;
	smoke-compare) full_test -run "^($compare)\$" ./smoke ;;
	smoke-rest) full_test -skip "^($standin|$compare)\$" ./smoke ;;
	guestfs) full_test ./builder/guestfs ;;
	cmd)
		# Under -race -short, then in full, without -race, only the tests
		# that run skipped (a subtest's skip runs its whole test): the
		# others ran already.
		local out skipped rc=0
		out=$(mktemp) || return 1
		race_test -short ./cmd/imagectl | tee "$out" || rc=1
		skipped=$(sed -n -E 's/^[[:space:]]*--- SKIP: ([^/ ]+).*/\1/p' "$out" | sort -u | paste -sd '|')
		rm -f "$out"
		[ -z "$skipped" ] || full_test -run "^($skipped)\$" ./cmd/imagectl || rc=1
		return $rc
		;;
	full)
		list=$(pkgs appliance smoke builder/guestfs cmd/imagectl) || return 1
		mapfile -t p <<<"$list"
		[ -z "$list" ] || full_test "${p[@]}"
		;;
	race)
		# The appliance packages with -short, then the others in full but
		# the release loop's (race-release).
		local heavy rc=0
		heavy=$(pkgs appliance cmd/imagectl) || return 1
		list=$(race_full "$heavy") || return 1
		mapfile -t p <<<"$heavy"
		[ -z "$heavy" ] || race_test -short "${p[@]}" || rc=1
		mapfile -t p < <(grep -vE "$release_loop" <<<"$list")
		race_test "${p[@]}" || rc=1
		return $rc
		;;
	race-release)
		# The release loop's packages, in full (none is an appliance one).
		local heavy
		heavy=$(pkgs appliance cmd/imagectl) || return 1
		list=$(race_full "$heavy") || return 1
		mapfile -t p < <(grep -E "$release_loop" <<<"$list")
		if [ ${#p[@]} -eq 0 ]; then
			echo "testlanes.sh: no package matches $release_loop" >&2
			return 1
		fi
		race_test "${p[@]}"
		;;
	nocgo)
		list=$(pkgs nocgo) || return 1
		mapfile -t p <<<"$list"
		[ -z "$list" ] || run env CGO_ENABLED=0 "$go" test -v -count=1 -vet=off -p 1 -short "${p[@]}"
		;;
	fuzz) run "${MAKE:-make}" --no-print-directory fuzz GO="$go" ;;
	dry-run)
		local bundles=$PWD/testdata/bundles
		run "$BIN" build recipes/h200.hcl --dry-run >/dev/null &&
			run "$BIN" build recipes/h200.hcl --root testdata/bundles -var site_bootstrap_dir="$bundles" --dry-run --version 0.0.0-ci >/dev/null &&
			run "$BIN" build recipes/h200.hcl --root testdata/bundles -var site_bootstrap_dir="$bundles" --dry-run --output json --version 0.0.0-ci >/dev/null &&
			run "$BIN" build testdata/h200-debian.hcl -var-file "$BASE_VARS" --dry-run >/dev/null
		;;
	*)
		echo "testlanes.sh: no job $1" >&2
		return 2
		;;
	esac
}

# What a job shows as it runs: go test -v's lines less the test logs
# (indented), the === lines and the tests that passed; a failure is shown
# whole once the job has ended.
shown='^(--- FAIL|[^[:space:]=-])|^[[:space:]]+--- FAIL'

# lane N: takes the next job nobody has taken until none is left; a job is
# taken by making its directory (mkdir is atomic). The job's whole output
# is kept in its directory (log) until the run ends.
lane() {
	local n=$1 start=$SECONDS i name t0 rc
	for i in "${!jobs[@]}"; do
		name=${jobs[$i]}
		mkdir "$state/taken.$name" 2>/dev/null || continue
		echo "lane $n: $name started"
		t0=$SECONDS
		(job "$name") 2>&1 | tee "$state/taken.$name/log" | grep -a --line-buffered -E "$shown" | sed -u "s/^/$name: /"
		rc=${PIPESTATUS[0]}
		echo "$name $rc $((SECONDS - t0)) $n" >"$state/taken.$name/result"
		if [ "$rc" -eq 0 ]; then
			echo "lane $n: $name passed in $((SECONDS - t0)) s"
		else
			echo "lane $n: $name FAILED (exit $rc) in $((SECONDS - t0)) s; its whole output:"
			grep -av '^=== ' "$state/taken.$name/log" | sed "s/^/$name| /"
		fi
	done
	echo "lane $n: no job left after $((SECONDS - start)) s"
}

if [ "${1:-}" = --lane ]; then
	state=$3
	mapfile -t jobs <"$state/jobs"
	lane "$2"
	exit 0
fi
# --deadline SECONDS LANE...: the run's bound (see below).
if [ "${1:-}" = --deadline ]; then
	secs=$2
	shift 2
	sleep "$secs"
	echo "testlanes.sh: the tests ran past $secs s (TEST_DEADLINE): stopping the lanes"
	for p; do kill -TERM -- "-$p" 2>/dev/null; done
	exit 0
fi
if [ $# -gt 0 ]; then
	for name in "$@"; do
		case " ${jobs[*]} " in
		*" $name "*) ;;
		*)
			echo "testlanes.sh: no job $name (the jobs: ${jobs[*]})" >&2
			exit 2
			;;
		esac
	done
	jobs=("$@")
fi

state=$(mktemp -d -t imagectl-lanes.XXXXXX) || exit 1
pids=()
watchdog=
stop() {
	local p
	for p in "${pids[@]}" $watchdog; do kill -TERM -- "-$p" 2>/dev/null; done
	wait
	rm -rf "$state"
	exit 130
}
trap stop INT TERM
trap 'rm -rf "$state"' EXIT

printf '%s\n' "${jobs[@]}" >"$state/jobs"
start=$SECONDS
for n in $(seq 1 "${TEST_LANES:-2}"); do
	# Each lane in a session of its own, so that stop ends its tests too.
	setsid "$0" --lane "$n" "$state" &
	pids+=($!)
done
# The run's bound: TEST_DEADLINE seconds (75 minutes, which with make
# test's setup stays inside CI's 90), past which the lanes are stopped, so
# that the summary below still says which jobs did not end and where they
# were, rather than CI cutting the run off without one.
setsid "$0" --deadline "${TEST_DEADLINE:-4500}" "${pids[@]}" &
watchdog=$!
wait "${pids[@]}"
kill -TERM -- "-$watchdog" 2>/dev/null
wait "$watchdog" 2>/dev/null

failed=()
declare -A busy
for name in "${jobs[@]}"; do
	if ! read -r _ rc secs n 2>/dev/null <"$state/taken.$name/result"; then
		echo "$name: did not run to its end"
		failed+=("$name")
		continue
	fi
	printf '%-14s lane %s %6s s  %s\n' "$name" "$n" "$secs" "$([ "$rc" -eq 0 ] && echo passed || echo "FAILED (exit $rc)")"
	busy[$n]=$((${busy[$n]:-0} + secs))
	[ "$rc" -eq 0 ] || failed+=("$name")
done
for n in $(printf '%s\n' "${!busy[@]}" | sort -n); do
	echo "lane $n: busy ${busy[$n]} s"
done
echo "tests: $((SECONDS - start)) s in ${TEST_LANES:-2} lanes"
# Where the time went: the slowest tests of the run (go test -v's times).
echo "slowest tests:"
for name in "${jobs[@]}"; do
	[ -f "$state/taken.$name/log" ] || continue
	sed -n -E "s/^--- (PASS|FAIL): ([^ ]+) \(([0-9.]+)s\)$/\3 $name \2 \1/p" "$state/taken.$name/log"
done | sort -rn | head -n 25 | awk '{printf "  %8.1f s  %-14s %s %s\n", $1, $2, $3, ($4 == "FAIL" ? "(FAILED)" : "")}'
if [ ${#failed[@]} -gt 0 ]; then
	# Why, again at the end, where a reader of only the run's last lines
	# looks: each failed job's failure lines (a test's --- FAIL and the
	# indented lines it logged before, a panic or a timeout with the tests
	# still running, a build error), bounded.
	# A job whose log has none of them (a dry-run's error, one stopped by
	# the deadline) shows its last lines instead.
	for name in "${failed[@]}"; do
		echo "why $name failed:"
		log=$state/taken.$name/log
		if [ ! -f "$log" ]; then
			echo "  $name| (no log: the job never started)"
			continue
		fi
		why=$(grep -av '^=== ' "$log" |
			grep -a --no-group-separator -E -B 8 -A 4 '^[[:space:]]*--- FAIL|^panic:|^FAIL|^fatal error:|timed out|running tests:|\[build failed\]|^[^[:space:]]+\.go:[0-9]+:[0-9]+: ' |
			tail -n 60)
		[ -n "$why" ] || why=$(grep -av '^=== ' "$log" | tail -n 20)
		[ -n "$why" ] || why="(the job printed nothing)"
		printf '%s\n' "$why" | cut -c 1-300 | sed "s/^/  $name| /"
	done
	echo "failed: ${failed[*]}"
	exit 1
fi
