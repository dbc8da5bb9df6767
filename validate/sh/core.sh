# shellcheck shell=sh
# The validation script's argument parsing and result lines: has_word,
# usage, the option loop, result, summary, bootstrap_hint, needs_host.
# validate.Script copies what follows this comment into the generated script
# as it is (see validate/scriptlib.go).
# shellcheck disable=SC2153 # PROFILES and STAGES: the script's header sets them, before this file

has_word() {
	case " $1 " in
	*" $2 "*) return 0 ;;
	esac
	return 1
}

usage() {
	awk 'NR == 1 { next } !/^#/ || /^# shellcheck/ { exit } { sub(/^# ?/, ""); print }' "$0"
}

usage_error() {
	echo "$0: $1 (see --help)" >&2
	exit 2
}

ROOT=${IMAGECTL_VALIDATE_ROOT:-}
LIVE=1
while [ $# -gt 0 ]; do
	case $1 in
	--root)
		[ $# -ge 2 ] || usage_error "--root needs a directory"
		ROOT=$2 LIVE=0
		shift 2
		;;
	--root=*) ROOT=${1#*=} LIVE=0; shift ;;
	--profile)
		[ $# -ge 2 ] || usage_error "--profile needs one of: $PROFILES"
		PROFILE=$2
		shift 2
		;;
	--profile=*) PROFILE=${1#*=}; shift ;;
	--stage)
		[ $# -ge 2 ] || usage_error "--stage needs one of: $STAGES"
		STAGE=$2
		shift 2
		;;
	--stage=*) STAGE=${1#*=}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown argument: $1" ;;
	esac
done
case $PROFILE$STAGE in *[!A-Za-z0-9_-]*) usage_error "unknown profile '$PROFILE' or stage '$STAGE'" ;; esac
has_word "$PROFILES" "$PROFILE" || usage_error "unknown profile '$PROFILE', not one of: $PROFILES"
has_word "$STAGES" "$STAGE" || usage_error "unknown stage '$STAGE', not one of: $STAGES"
if [ "$LIVE" = 0 ] && [ ! -d "$ROOT" ]; then
	usage_error "--root $ROOT: not a directory"
fi
FAILURES=0
WARNINGS=0
CHECKS=0

# result STATUS NAME DETAIL [REMEDIATION]: one result line, its values
# percent-encoded (%, space, tab, newline); a FAIL line ends with what to do
# about it.
result() {
	CHECKS=$((CHECKS + 1))
	case $1 in
	FAIL)
		FAILURES=$((FAILURES + 1))
		set -- "$1" "$2" "$3" "${4:-read the detail and fix what it names}"
		;;
	WARN) WARNINGS=$((WARNINGS + 1)); set -- "$1" "$2" "$3" ;;
	*) set -- "$1" "$2" "$3" ;;
	esac
	printf '%s\037' "$@" | awk 'BEGIN { RS = "\036"; split("status check detail remediation", key, " ") } {
		n = split($0, value, "\037")
		line = "IMAGECTL_VALIDATE"
		for (i = 1; i < n; i++) {
			v = value[i]
			gsub(/%/, "%25", v); gsub(/ /, "%20", v); gsub(/\t/, "%09", v); gsub(/\n/, "%0A", v)
			line = line " " key[i] "=" v
		}
		print line
	}'
}

summary() {
	printf 'IMAGECTL_VALIDATE summary profile=%s stage=%s checks=%s failures=%s warnings=%s\n' \
		"$PROFILE" "$STAGE" "$CHECKS" "$FAILURES" "$WARNINGS"
	[ "$FAILURES" -eq 0 ]
	exit $?
}

# BOOTSTRAP names the checked profile's site bootstrap, for remediations.
BOOTSTRAP=

# bootstrap_hint PREFIX: PREFIX and the profile's site bootstrap; nothing
# when the profile names none.
bootstrap_hint() {
	[ -n "$BOOTSTRAP" ] && printf '%sthe site bootstrap %s' "$1" "$BOOTSTRAP"
	return 0
}

# needs_host NAME: WARN NAME and succeed when checking a root offline.
needs_host() {
	[ "$LIVE" = 0 ] || return 1
	result WARN "$1" "needs a running host"
}
