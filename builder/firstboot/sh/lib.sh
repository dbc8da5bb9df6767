# shellcheck shell=sh
# The first-boot script's functions: logging with a timestamp, steps run
# once (a rerun skips the steps it finished before), files written whole
# and checked against the plan's sha256, apt with its downloads counted, the
# result line. The generated script sets PREFIX, STATE_DIR, STEPS, IMAGE,
# VERSION, the milestones' names and DONE_MARKER before them;
# firstboot.Script copies what follows this comment into it as it is.
# shellcheck disable=SC2153 # PREFIX, STATE_DIR, STEPS and the names are the generated script's

DONE=0
SKIPPED=0
NOT_HERE=0
STEP=0
APT_FRESH=no
ARCHIVE_BYTES=0
INDEX_BYTES=0
REBOOT=no
START=
GRUB_DEFAULT_FILE=/etc/default/grub

# say WORDS...: one line of the script's log on stdout.
say() { printf '%s %s\n' "$PREFIX" "$*"; }

# uptime_s: seconds since the kernel started, the clock of the boot's
# milestones (0 where /proc is not mounted).
uptime_s() { cut -d' ' -f1 /proc/uptime 2>/dev/null || echo 0; }

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# fail MESSAGE: the current step fails with MESSAGE.
fail() {
	say "step=$STEP/$STEPS error $*" >&2
	exit 1
}

# step N KEY SUMMARY FUNCTION: runs FUNCTION as step N unless a run before
# finished it (its KEY, a digest of its shell, is in STATE_DIR/done).
step() {
	STEP=$1
	if [ -e "$STATE_DIR/done/$2" ]; then
		say "step=$1/$STEPS time=$(now) uptime=$(uptime_s) already-done $3"
		SKIPPED=$((SKIPPED + 1))
		return 0
	fi
	say "step=$1/$STEPS time=$(now) uptime=$(uptime_s) start $3"
	"$4"
	: >"$STATE_DIR/done/$2"
	say "step=$1/$STEPS time=$(now) uptime=$(uptime_s) done"
	DONE=$((DONE + 1))
}

# not_here N SUMMARY WHY: step N does not run at first boot, and why.
not_here() {
	say "step=$1/$STEPS time=$(now) not-at-first-boot $2 (why: $3)"
	NOT_HERE=$((NOT_HERE + 1))
}

# partly WHY: the current step runs in part; WHY says what does not.
partly() { say "step=$STEP/$STEPS partly: $1"; }

# logged COMMAND...: runs COMMAND with its output on stdout and in
# STATE_DIR/output.log; returns its exit status.
logged() {
	{
		"$@" 2>&1 && rc=0 || rc=$?
		echo "$rc" >"$STATE_DIR/rc"
	} | tee "$STATE_DIR/output.log"
	read -r rc <"$STATE_DIR/rc"
	return "$rc"
}

# put_file PATH MODE OWNER SHA256 ENCODING DATA: writes DATA (text, or
# base64) to PATH whole (a new temporary file beside it, renamed over it),
# with MODE and OWNER, failing when its sha256 is not the plan's.
put_file() {
	dir=$(dirname -- "$1")
	mkdir -p -- "$dir"
	tmp=$(mktemp -- "$dir/.imagectl-firstboot.XXXXXX")
	case $5 in
	base64) printf '%s' "$6" | base64 -d >"$tmp" ;;
	*) printf '%s' "$6" >"$tmp" ;;
	esac
	got=$(sha256sum <"$tmp" | cut -d' ' -f1)
	if [ "$got" != "$4" ]; then
		rm -f -- "$tmp"
		fail "$1: its content has sha256 $got, the plan's is $4"
	fi
	chown -- "$3" "$tmp"
	chmod -- "$2" "$tmp"
	mv -f -- "$tmp" "$1"
}

# put_dir PATH MODE: a directory owned by root with MODE.
put_dir() {
	mkdir -p -- "$1"
	chown root:root -- "$1"
	chmod -- "$2" "$1"
}

# put_link PATH TARGET: a symbolic link, replacing what PATH was.
put_link() {
	mkdir -p -- "$(dirname -- "$1")"
	rm -rf -- "$1"
	ln -s -- "$2" "$1"
}

# fetch URL FILE: downloads URL into FILE with curl or wget.
fetch() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 --max-time 120 -o "$2" --url "$1"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -T 120 -O "$2" -- "$1"
	else
		fail "neither curl nor wget is installed to fetch $1"
	fi
}

# put_key URL KEYRING SHA256: fetches an apt signing key, dearmors it when
# armored (apt reads binary keyrings named .gpg), checks it against SHA256
# when the plan knows it, and installs it as KEYRING.
put_key() {
	tmp=$STATE_DIR/key.download
	fetch "$1" "$tmp" || fail "fetching the apt key $1"
	if grep -q '^-----BEGIN PGP' "$tmp"; then
		sed -n '/^-----BEGIN PGP/,/^-----END PGP/p' "$tmp" | sed '1d;$d' |
			awk 'body { if ($0 !~ /^=/) print; next } /^\r?$/ { body = 1 }' | tr -d '\r' |
			base64 -d >"$tmp.gpg" || fail "dearmoring the apt key $1"
	else
		cp -- "$tmp" "$tmp.gpg"
	fi
	got=$(sha256sum <"$tmp.gpg" | cut -d' ' -f1)
	if [ -n "$3" ] && [ "$got" != "$3" ]; then
		fail "the apt key $1 has sha256 $got, the build's was $3"
	fi
	[ -n "$3" ] || say "step=$STEP/$STEPS apt key $1 sha256 $got (not pinned: no build's digest was given)"
	put_file "$2" 0644 root:root "$got" base64 "$(base64 <"$tmp.gpg")"
	rm -f -- "$tmp" "$tmp.gpg"
}

# apt_update: apt-get update once after the sources changed, adding what
# apt says it fetched (rounded by apt) to INDEX_BYTES.
apt_update() {
	[ "$APT_FRESH" = yes ] && return 0
	logged apt-get update -q || fail "apt-get update failed"
	n=$(awk '/^Fetched [0-9.,]+ [kMG]?B in/ {
		v = $2; gsub(",", "", v); u = $3
		m = (u == "kB") ? 1000 : (u == "MB") ? 1000000 : (u == "GB") ? 1000000000 : 1
		s += v * m
	} END { printf "%.0f", s }' "$STATE_DIR/output.log")
	INDEX_BYTES=$((INDEX_BYTES + n))
	APT_FRESH=yes
}

# apt_install OPTION|- PACKAGE...: apt-get install as the build's packages
# steps run it (OPTION is --no-install-recommends or -), counting the bytes
# of the archives apt downloads (its --print-uris) in ARCHIVE_BYTES.
apt_install() {
	opt=$1
	shift
	[ "$opt" = - ] && opt=
	n=$(apt-get install -y -qq --print-uris ${opt:+"$opt"} "$@" 2>/dev/null |
		awk -v q="'" 'substr($1, 1, 1) == q { s += $3 } END { printf "%.0f", s }') || n=0
	if logged apt-get install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold ${opt:+"$opt"} "$@"; then
		ARCHIVE_BYTES=$((ARCHIVE_BYTES + ${n:-0}))
		return 0
	fi
	return 1
}

# packages OPTION PACKAGE...: a required packages step.
packages() {
	apt_update
	apt_install "$@" || fail "apt-get install failed"
}

# optional_packages OPTION PACKAGE...: installs what the archive has, all
# at once when it can, else one by one, recording the others in
# STATE_DIR/missing-optional.
optional_packages() {
	apt_update
	apt_install "$@" && return 0
	opt=$1
	shift
	for p in "$@"; do
		if ! apt_install "$opt" "$p"; then
			say "step=$STEP/$STEPS optional package $p not installed: $(tail -n 1 "$STATE_DIR/output.log")"
			grep -qx -- "$p" "$STATE_DIR/missing-optional" 2>/dev/null || echo "$p" >>"$STATE_DIR/missing-optional"
		fi
	done
}

# services enable|disable UNIT...: enables (disables) units and starts
# (stops) them without waiting: this runs inside the boot (cloud-init's last
# stage), and a unit ordered after it would wait for it.
services() {
	if [ "$1" = enable ]; then
		shift
		systemctl enable -- "$@"
		systemctl start --no-block -- "$@" || say "step=$STEP/$STEPS WARN starting $* failed: the boot does not start them either"
	else
		shift
		systemctl disable -- "$@"
		systemctl stop --no-block -- "$@" || say "step=$STEP/$STEPS WARN stopping $* failed"
	fi
}

# kernel_args ARG...: adds each ARG missing from GRUB_CMDLINE_LINUX's last
# assignment in /etc/default/grub (or adds the variable), as the build does,
# then update-grub: the args take effect at the next boot.
kernel_args() {
	f=$GRUB_DEFAULT_FILE
	[ -e "$f" ] || : >"$f"
	tmp=$(mktemp -- "$f.imagectl-firstboot.XXXXXX")
	IMAGECTL_ARGS="$*" awk '
		/^[ \t]*GRUB_CMDLINE_LINUX=/ { last = NR }
		{ line[NR] = $0 }
		END {
			n = split(ENVIRON["IMAGECTL_ARGS"], want, " ")
			for (i = 1; i <= NR; i++) {
				if (i != last) { print line[i]; continue }
				pre = line[i]; sub(/=.*/, "=", pre)
				v = line[i]; sub(/^[^=]*=/, "", v); sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v)
				q = substr(v, 1, 1)
				if (length(v) >= 2 && (q == "\"" || q == "\047") && substr(v, length(v), 1) == q) v = substr(v, 2, length(v) - 2)
				k = split(v, have, " ")
				out = ""
				for (j = 1; j <= k; j++) { out = out (out == "" ? "" : " ") have[j]; seen[have[j]] = 1 }
				for (j = 1; j <= n; j++) if (!(want[j] in seen)) { out = out (out == "" ? "" : " ") want[j]; seen[want[j]] = 1 }
				print pre "\"" out "\""
			}
			if (!last) {
				out = ""
				for (j = 1; j <= n; j++) out = out (out == "" ? "" : " ") want[j]
				print "GRUB_CMDLINE_LINUX=\"" out "\""
			}
		}' "$f" >"$tmp"
	chmod 0644 "$tmp"
	mv -f -- "$tmp" "$f"
	if command -v update-grub >/dev/null 2>&1; then
		logged update-grub || fail "update-grub failed: the kernel args would not take effect"
	else
		say "step=$STEP/$STEPS no update-grub here: the args take effect once grub.cfg is regenerated"
	fi
	REBOOT=yes
	say "step=$STEP/$STEPS kernel args take effect after a reboot: $*"
}

# result STATUS: the machine-readable result line, also kept in
# STATE_DIR/result.
result() {
	missing=$(paste -sd, "$STATE_DIR/missing-optional" 2>/dev/null) || missing=
	line="result status=$1 steps=$STEPS ran=$DONE already_done=$SKIPPED not_at_first_boot=$NOT_HERE"
	[ "$1" = ok ] || line="$line failed_step=$STEP"
	line="$line download_bytes=$((ARCHIVE_BYTES + INDEX_BYTES)) archive_bytes=$ARCHIVE_BYTES index_bytes=$INDEX_BYTES"
	line="$line missing_optional=${missing:--} reboot_required=$REBOOT"
	line="$line seconds=$(awk -v a="$START" -v b="$(uptime_s)" 'BEGIN { printf "%.3f", b - a }')"
	say "$line"
	printf '%s\n' "$line" >"$STATE_DIR/result" 2>/dev/null || true
}

# finish: on exit, a failure's result line.
finish() {
	rc=$?
	trap - EXIT
	if [ "$rc" -ne 0 ]; then
		say "step=$STEP/$STEPS time=$(now) uptime=$(uptime_s) failed exit=$rc"
		result failed
	fi
	exit "$rc"
}

# begin: the start milestone, the state directory, root.
begin() {
	[ "$(id -u)" = 0 ] || {
		echo "$0: run as root" >&2
		exit 2
	}
	mkdir -p -- "$STATE_DIR/done"
	touch -- "$STATE_DIR/missing-optional"
	START=$(uptime_s)
	trap finish EXIT
	say "time $MILESTONE_START=$START"
	say "image=$IMAGE version=$VERSION steps=$STEPS time=$(now) state=$STATE_DIR"
}

# end: the done milestone and marker, the result line.
end() {
	t=$(uptime_s)
	: >"$STATE_DIR/$DONE_MARKER"
	say "time $MILESTONE_DONE=$t"
	result ok
	trap - EXIT
}
