# shellcheck shell=sh
# The validation script's argument parsing, result lines and JSON result:
# has_word, usage, the option loop, result, summary, the result document
# (result_json, save_result), bootstrap_hint, needs_host.
# validate.Script copies what follows this comment into the generated script
# as it is (see validate/scriptlib.go).
# shellcheck disable=SC2153 # PROFILES, STAGES, IMAGE, ...: the script's header sets them, before this file

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
JSON=0
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
	--json) JSON=1; shift ;;
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
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# uptime_now: seconds since the kernel started.
uptime_now() { cut -d' ' -f1 "$ROOT/proc/uptime" 2>/dev/null; }
# shellcheck disable=SC2034 # timeline.sh reads it
UPTIME_START=$(uptime_now)
NL='
'
# CHECKS_JSON are the checks as JSON objects, one a line, for the result
# document; TIMELINE the first boot's milestones, "NAME SECONDS SOURCE" lines
# (timeline.sh); DONE_MARKERS the bootstrap done-markers found.
CHECKS_JSON=
TIMELINE=
# shellcheck disable=SC2034 # converged.sh adds to it, timeline.sh reads it
DONE_MARKERS=

# JSON_AWK are awk functions: json_init, then json(S), S as a JSON string.
# Run under LC_ALL=C, so awk reads bytes: quotes, backslashes and control
# bytes (and DEL) are escaped, valid UTF-8 is kept, and each byte of what
# is not UTF-8 becomes U+FFFD (as Go and most JSON readers decode it).
JSON_AWK='
function json_init(   i) { for (i = 1; i < 256; i++) ord[sprintf("%c", i)] = i }
function json(s,   out, c, o, need, lo, hi, ok, j, k) {
	out = ""
	# printable ASCII up to the next byte to escape is copied whole
	while (match(s, /[^ -~]|"|\\/)) {
		out = out substr(s, 1, RSTART - 1)
		c = substr(s, RSTART, 1)
		s = substr(s, RSTART + 1)
		o = ord[c]
		if (c == "\"") out = out "\\\""
		else if (c == "\\") out = out "\\\\"
		else if (o == 9) out = out "\\t"
		else if (o == 10) out = out "\\n"
		else if (o < 128) out = out sprintf("\\u%04x", o)
		else {
			# a sequence: its length from the lead byte, and the range of
			# its second byte (no overlong form, no surrogate, nothing
			# above U+10FFFF)
			need = 0; lo = 128; hi = 191
			if (o >= 194 && o <= 223) need = 1
			else if (o == 224) { need = 2; lo = 160 }
			else if ((o >= 225 && o <= 236) || o == 238 || o == 239) need = 2
			else if (o == 237) { need = 2; hi = 159 }
			else if (o == 240) { need = 3; lo = 144 }
			else if (o >= 241 && o <= 243) need = 3
			else if (o == 244) { need = 3; hi = 143 }
			ok = need > 0 && length(s) >= need
			for (j = 1; ok && j <= need; j++) {
				k = ord[substr(s, j, 1)]
				if (j > 1) { lo = 128; hi = 191 }
				if (k < lo || k > hi) ok = 0
			}
			if (ok) { out = out c substr(s, 1, need); s = substr(s, need + 1) }
			else out = out "\\ufffd"
		}
	}
	return "\"" out s "\""
}'

# result STATUS NAME DETAIL [REMEDIATION]: one result line, its values
# percent-encoded (%, space, tab, newline); a FAIL line ends with what to do
# about it. The line is printed unless --json; the check is kept for the
# result document either way.
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
	out=$(printf '%s\037' "$@" | LC_ALL=C awk "$JSON_AWK"'
	BEGIN { RS = "\036"; split("status check detail remediation", key, " "); json_init() } {
		n = split($0, value, "\037")
		line = "IMAGECTL_VALIDATE"
		obj = ""
		for (i = 1; i < n; i++) {
			v = value[i]
			obj = obj (i > 1 ? ", " : "") "\"" key[i] "\": " json(v)
			gsub(/%/, "%25", v); gsub(/ /, "%20", v); gsub(/\t/, "%09", v); gsub(/\n/, "%0A", v)
			line = line " " key[i] "=" v
		}
		print line
		print "{" obj "}"
	}')
	[ "$JSON" = 1 ] || printf '%s\n' "${out%%"$NL"*}"
	CHECKS_JSON=$CHECKS_JSON${CHECKS_JSON:+$NL}${out#*"$NL"}
}

# summary: on a live host, reads the first boot's timeline and keeps the
# result document under STATE_DIR; prints the summary line, or with --json
# the document; exits 1 when a check failed.
summary() {
	FINISHED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	if [ "$JSON" = 1 ] || [ "$LIVE" = 1 ]; then
		result_facts
	fi
	if [ "$LIVE" = 1 ]; then
		timeline
		save_result
	fi
	if [ "$JSON" = 1 ]; then
		result_json
	else
		printf 'IMAGECTL_VALIDATE summary profile=%s stage=%s checks=%s failures=%s warnings=%s\n' \
			"$PROFILE" "$STAGE" "$CHECKS" "$FAILURES" "$WARNINGS"
	fi
	[ "$FAILURES" -eq 0 ]
	exit $?
}

# script_sha256: the sha256 of this script's file ($0), with sha256sum or
# openssl; nothing when neither runs or $0 is not a file.
script_sha256() {
	[ -f "$0" ] || return 0
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum <"$0" 2>/dev/null | cut -d' ' -f1
	elif command -v openssl >/dev/null 2>&1; then
		openssl dgst -sha256 <"$0" 2>/dev/null | sed 's/^.*= *//'
	fi
}

# marker_image KEY: the image's KEY (name, version) in the build marker,
# the manifest as the build wrote it (two-space indent, one field a line).
marker_image() {
	awk -v key="$1" '
		/^  "image": [{]/ { inside = 1; next }
		inside && /^  [}]/ { exit }
		inside && index($0, "    \"" key "\": \"") == 1 {
			v = substr($0, length(key) + 10)
			sub(/",?$/, "", v)
			print v
			exit
		}' "$ROOT$MARKER" 2>/dev/null
}

# result_facts sets what the result document says beside the checks: the
# image and version the build marker names (the script's own when it names
# none), the host's name and machine id, the script's sha256 (a WARN when
# there is none).
result_facts() {
	RUN_IMAGE=$(marker_image name)
	RUN_VERSION=$(marker_image version)
	HOST=$(uname -n 2>/dev/null)
	MACHINE_ID=$(head -n 1 "$ROOT/etc/machine-id" 2>/dev/null)
	case $MACHINE_ID in *[!0-9a-f]* | "") MACHINE_ID= ;; esac
	SCRIPT_SHA256=$(script_sha256)
	case $SCRIPT_SHA256 in
	*[!0-9a-f]* | "")
		SCRIPT_SHA256=
		result WARN script-sha256 "no sha256 of $0: not a file, or neither sha256sum nor openssl ran"
		;;
	esac
}

# result_json: the result document (validate.Result), after result_facts.
result_json() {
	live=false
	[ "$LIVE" = 1 ] && live=true
	printf '%s\037' "$RESULT_SCHEMA" "${RUN_IMAGE:-$IMAGE}" "${RUN_VERSION:-$VERSION}" "$PROFILE" "$STAGE" "$HOST" "$MACHINE_ID" \
		"$STARTED" "$FINISHED" "$SCRIPT_SHA256" | LC_ALL=C awk -v live="$live" "$JSON_AWK"'
	BEGIN { RS = "\036"; split("schema image version profile stage host machine_id started finished script_sha256", key, " "); json_init() } {
		split($0, value, "\037")
		print "{"
		for (i = 1; i <= 7; i++) print "  \"" key[i] "\": " json(value[i]) ","
		print "  \"live\": " live ","
		for (i = 8; i <= 10; i++) print "  \"" key[i] "\": " json(value[i]) ","
	}'
	if [ -z "$CHECKS_JSON" ]; then
		echo '  "checks": [],'
	else
		echo '  "checks": ['
		printf '%s\n' "$CHECKS_JSON" | sed -e 's/^/    /' -e '$!s/$/,/'
		echo '  ],'
	fi
	printf '  "counts": {"checks": %s, "failures": %s, "warnings": %s}' "$CHECKS" "$FAILURES" "$WARNINGS"
	if [ -n "$TIMELINE" ]; then
		printf ',\n  "timeline": [\n'
		printf '%s\n' "$TIMELINE" | awk '{ printf "%s    {\"name\": \"%s\", \"seconds\": %s, \"source\": \"%s\"}", (NR > 1 ? ",\n" : ""), $1, $2, $3 } END { print "" }'
		printf '  ]'
	fi
	printf '\n}\n'
}

# save_result: keeps the result document as STATE_DIR/result.json and
# result-PROFILE-STAGE.json under ROOT, each written whole (a temporary
# file renamed over it, mode 0644, the directory 0755). Failing to is a
# WARN, never the verdict.
save_result() {
	doc=$(result_json)
	if ! err=$(save_to "$ROOT$STATE_DIR" "$doc" 2>&1); then
		result WARN state-dir "the result is not kept in $STATE_DIR: ${err:-it could not be written}"
	fi
}

save_to() (
	umask 022
	mkdir -p -- "$1" && chmod 0755 -- "$1" || exit 1
	for name in "result-$PROFILE-$STAGE.json" result.json; do
		tmp=$1/.$name.$$
		rm -f -- "$tmp"
		if ! (set -C && printf '%s\n' "$2" >"$tmp") || ! chmod 0644 -- "$tmp" || ! mv -f -- "$tmp" "$1/$name"; then
			rm -f -- "$tmp"
			exit 1
		fi
	done
)

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
