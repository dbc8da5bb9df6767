# shellcheck shell=sh
# The first-boot script's functions: logging with a timestamp, steps run
# once (a rerun skips the steps it finished before), files written whole
# and checked against the plan's sha256, apt with its downloads counted, the
# result line. The generated script sets PREFIX, STATE_DIR, STEPS, IMAGE,
# VERSION, the milestones' names, DONE_MARKER and APT_NO_TRANSLATIONS before
# them; firstboot.Script copies what follows this comment into it as it is.
# shellcheck disable=SC2153 # PREFIX, STATE_DIR, STEPS, the names and APT_NO_TRANSLATIONS are the generated script's

DONE=0
SKIPPED=0
NOT_HERE=0
STEP=0
APT_FRESH=no
ARCHIVE_BYTES=0
INDEX_BYTES=0
START=
GRUB_DEFAULT_FILE=/etc/default/grub
POLICY_RC=/usr/sbin/policy-rc.d
POLICY_RC_MARK='# imagectl first boot: no service starts while packages install'
# shellcheck disable=SC2016 # the policy's own shell, written as it is
POLICY_RC_BODY='for a; do [ "$a" = start ] && exit 101; done; exit 0'
SERVICES_HELD=no
# apt and dpkg wait up to 10 minutes for a lock another apt holds at first
# boot (apt-daily, unattended-upgrades, cloud-init's own package modules).
APT_LOCK_TIMEOUT=600

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
# with MODE and OWNER, failing when its sha256 is not the plan's, and when
# PATH is a directory (the build fails there too).
put_file() {
	if [ -d "$1" ] && [ ! -L "$1" ]; then
		fail "$1 is a directory, not a file"
	fi
	pf_dir=$(dirname -- "$1")
	mkdir -p -- "$pf_dir"
	pf_tmp=$(mktemp -- "$pf_dir/.imagectl-firstboot.XXXXXX")
	case $5 in
	base64) printf '%s' "$6" | base64 -d >"$pf_tmp" || pf_fail "$1: decoding its content" ;;
	*) printf '%s' "$6" >"$pf_tmp" || pf_fail "$1: writing its content" ;;
	esac
	pf_got=$(sha256sum <"$pf_tmp" | cut -d' ' -f1)
	[ "$pf_got" = "$4" ] || pf_fail "$1: its content has sha256 $pf_got, the plan's is $4"
	chown -- "$3" "$pf_tmp" || pf_fail "$1: chown $3"
	chmod -- "$2" "$pf_tmp" || pf_fail "$1: chmod $2"
	mv -fT -- "$pf_tmp" "$1" || pf_fail "$1: renaming the written file over it"
}

# pf_fail MESSAGE: put_file's temporary file removed, the step failed.
pf_fail() {
	rm -f -- "$pf_tmp"
	fail "$*"
}

# put_dir PATH MODE: a directory owned by root with MODE (never through a
# symlink at PATH).
put_dir() {
	[ ! -L "$1" ] || fail "$1 is a symlink, not a directory"
	mkdir -p -- "$1"
	chown root:root -- "$1"
	chmod -- "$2" "$1"
}

# put_link PATH TARGET: a symbolic link, replacing a file or link at PATH
# (renamed over it), never a directory.
put_link() {
	if [ -d "$1" ] && [ ! -L "$1" ]; then
		fail "$1 is a directory: a symlink does not replace it"
	fi
	pl_dir=$(dirname -- "$1")
	mkdir -p -- "$pl_dir"
	pl_tmp=$(mktemp -d -- "$pl_dir/.imagectl-firstboot.XXXXXX")
	if ! ln -s -- "$2" "$pl_tmp/link" || ! mv -fT -- "$pl_tmp/link" "$1"; then
		rm -rf -- "$pl_tmp"
		fail "$1: making the symlink"
	fi
	rmdir -- "$pl_tmp"
}

# bundle_dest DEST: a bundle's destination, made when missing (an existing
# one is left as it is, as the build leaves it).
bundle_dest() {
	mkdir -p -- "$1"
	[ -d "$1" ] || fail "the bundle's destination $1 is not a directory"
}

# in_bundle DEST REL: fails when a directory on REL's way below DEST is a
# symlink or not a directory, so an entry is never staged through a link.
in_bundle() {
	ib_cur=$1
	ib_rest=$2
	while :; do
		case $ib_rest in
		*/*) ;;
		*) break ;;
		esac
		ib_cur=$ib_cur/${ib_rest%%/*}
		ib_rest=${ib_rest#*/}
		if [ -L "$ib_cur" ] || { [ -e "$ib_cur" ] && [ ! -d "$ib_cur" ]; }; then
			fail "$ib_cur, on the way to the bundle's entry $2, is not a directory"
		fi
	done
}

# fetch URL FILE: downloads URL into FILE with curl or wget, at most 1 MiB
# (the build's bound on a key); an https URL is never redirected to
# anything but https.
fetch() {
	case $1 in
	https://*) fe_https=yes ;;
	*) fe_https=no ;;
	esac
	if command -v curl >/dev/null 2>&1; then
		if [ "$fe_https" = yes ]; then
			curl -fsSL --proto =https --proto-redir =https --max-filesize 1048576 --retry 3 --max-time 120 -o "$2" --url "$1" || return 1
		else
			curl -fsSL --max-filesize 1048576 --retry 3 --max-time 120 -o "$2" --url "$1" || return 1
		fi
	elif command -v wget >/dev/null 2>&1; then
		# wget follows a redirect to http: none is followed for https,
		# and has no bound on a file's size: the size is checked after.
		if [ "$fe_https" = yes ]; then
			wget -q -T 120 --max-redirect=0 -O "$2" -- "$1" || return 1
		else
			wget -q -T 120 -O "$2" -- "$1" || return 1
		fi
	else
		fail "neither curl nor wget is installed to fetch an apt key"
	fi
	fe_size=$(wc -c <"$2")
	if [ "$fe_size" -eq 0 ] || [ "$fe_size" -gt 1048576 ]; then
		say "step=$STEP/$STEPS the download has $fe_size bytes, not 1 to 1048576"
		return 1
	fi
}

# put_key NAME URL KEYRING SHA256: fetches repository NAME's apt signing
# key from URL, dearmors it when armored (apt reads binary keyrings named
# .gpg), checks it against SHA256 when the plan knows it, and installs it
# as KEYRING. Its log names the repository, never the URL (it may carry a
# token).
put_key() {
	pk_tmp=$STATE_DIR/key.download
	rm -f -- "$pk_tmp" "$pk_tmp.gpg"
	fetch "$2" "$pk_tmp" || pk_fail "fetching the apt key of repository $1"
	if grep -q '^-----BEGIN PGP' "$pk_tmp"; then
		sed -n '/^-----BEGIN PGP/,/^-----END PGP/p' "$pk_tmp" | sed '1d;$d' |
			awk 'body { if ($0 !~ /^=/) print; next } /^\r?$/ { body = 1 }' | tr -d '\r' |
			base64 -d >"$pk_tmp.gpg" || pk_fail "dearmoring the apt key of repository $1"
	else
		cp -- "$pk_tmp" "$pk_tmp.gpg"
	fi
	pk_got=$(sha256sum <"$pk_tmp.gpg" | cut -d' ' -f1)
	if [ -n "$4" ] && [ "$pk_got" != "$4" ]; then
		pk_fail "the apt key of repository $1 has sha256 $pk_got, the build's was $4"
	fi
	[ -n "$4" ] || say "step=$STEP/$STEPS apt key of repository $1 sha256 $pk_got (not pinned: no build's digest was given)"
	pk_data=$(base64 <"$pk_tmp.gpg")
	rm -f -- "$pk_tmp" "$pk_tmp.gpg"
	put_file "$3" 0644 root:root "$pk_got" base64 "$pk_data"
}

# pk_fail MESSAGE: put_key's downloads removed, the step failed.
pk_fail() {
	rm -f -- "$pk_tmp" "$pk_tmp.gpg"
	fail "$*"
}

# apt_update: apt-get update once after the sources changed, adding what
# apt says it fetched (rounded by apt) to INDEX_BYTES. A lists lock held by
# another apt is waited for (APT_LOCK_TIMEOUT), as dpkg's is. Without the
# Translation indexes when APT_NO_TRANSLATIONS=yes (the script's clean-up
# removes apt's lists), as the build's apt-get update.
apt_update() {
	[ "$APT_FRESH" = yes ] && return 0
	au_waited=0
	set -- -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT"
	[ "${APT_NO_TRANSLATIONS:-no}" = yes ] && set -- "$@" -o Acquire::Languages=none
	until logged apt-get "$@" update -q; do
		if ! grep -q 'Could not get lock\|Unable to lock' "$STATE_DIR/output.log" || [ "$au_waited" -ge "$APT_LOCK_TIMEOUT" ]; then
			fail "apt-get update failed"
		fi
		say "step=$STEP/$STEPS apt's lists are locked by another apt: waiting"
		sleep 5
		au_waited=$((au_waited + 5))
	done
	au_n=$(awk '/^Fetched [0-9.,]+ [kMG]?B in/ {
		v = $2; gsub(",", "", v); u = $3
		m = (u == "kB") ? 1000 : (u == "MB") ? 1000000 : (u == "GB") ? 1000000000 : 1
		s += v * m
	} END { printf "%.0f", s }' "$STATE_DIR/output.log")
	INDEX_BYTES=$((INDEX_BYTES + au_n))
	APT_FRESH=yes
}

# hold_services: while apt or a run step runs, services are not started,
# as the build keeps them from starting (its policy-rc.d): the recipe's
# services steps decide what runs, so a service it disables never starts on
# the way (dnsmasq, installed beside systemd-resolved, would fail for port
# 53). Unlike the build's, this policy lets a service that runs be
# restarted, reloaded or stopped: a package upgraded under it on a live
# host restarts as apt would restart it. A policy-rc.d the host has of its
# own is left as it is; one a killed run of this script left is this
# script's.
hold_services() {
	if [ -e "$POLICY_RC" ] && ! held_policy; then
		return 0
	fi
	if ! { printf '#!/bin/sh\n%s\n%s\n' "$POLICY_RC_MARK" "$POLICY_RC_BODY" >"$POLICY_RC.imagectl-firstboot" &&
		chmod 0755 "$POLICY_RC.imagectl-firstboot" &&
		mv -f -- "$POLICY_RC.imagectl-firstboot" "$POLICY_RC"; }; then
		rm -f -- "$POLICY_RC.imagectl-firstboot"
		fail "writing $POLICY_RC failed"
	fi
	SERVICES_HELD=yes
}

# held_policy: POLICY_RC is this script's (it carries the mark).
held_policy() { grep -qxF -- "$POLICY_RC_MARK" "$POLICY_RC" 2>/dev/null; }

# release_services: undoes hold_services; a policy-rc.d that is not this
# script's (a package's, written meanwhile) stays.
release_services() {
	[ "$SERVICES_HELD" = yes ] || return 0
	if held_policy; then
		rm -f -- "$POLICY_RC"
	fi
	SERVICES_HELD=no
}

# start_boot_services: starts, without waiting, what the image's boot
# starts (the default target and all it wants), so that the services the
# packages enabled while held run as on the baked host.
start_boot_services() {
	systemctl start --no-block default.target || say "WARN starting default.target failed: the services the packages enabled may not run until the next boot"
}

# run_command COMMAND: a run step, from /, with services held as in the
# build.
run_command() {
	hold_services
	(cd / && sh -c "$1")
	release_services
}

# apt_install OPTION|- PACKAGE...: apt-get install as the build's packages
# steps run it (OPTION is --no-install-recommends or -; services held),
# counting the bytes of the archives apt downloads (its --print-uris) in
# ARCHIVE_BYTES.
apt_install() {
	ai_opt=$1
	shift
	[ "$ai_opt" = - ] && ai_opt=
	ai_n=$(apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" install -y -qq --print-uris ${ai_opt:+"$ai_opt"} "$@" 2>/dev/null |
		awk -v q="'" 'substr($1, 1, 1) == q { s += $3 } END { printf "%.0f", s }') || ai_n=0
	hold_services
	if logged apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold ${ai_opt:+"$ai_opt"} "$@"; then
		release_services
		ARCHIVE_BYTES=$((ARCHIVE_BYTES + ${ai_n:-0}))
		return 0
	fi
	release_services
	return 1
}

# packages OPTION PACKAGE...: a required packages step.
packages() {
	apt_update
	apt_install "$@" || fail "apt-get install failed"
}

# no_candidate PACKAGE: apt's archives have no version of PACKAGE to install.
no_candidate() {
	nc_policy=$(apt-cache policy -- "$1" 2>/dev/null) || return 1
	[ -z "$nc_policy" ] || printf '%s\n' "$nc_policy" | grep -q '^ *Candidate: (none)$'
}

# optional_packages OPTION PACKAGE...: installs what the archive has, all
# at once when it can, else one by one, recording in
# STATE_DIR/missing-optional a package apt has no candidate for; any other
# failure (a lock, a broken dependency, the network) fails the step.
optional_packages() {
	apt_update
	apt_install "$@" && return 0
	op_opt=$1
	shift
	for p in "$@"; do
		apt_install "$op_opt" "$p" && continue
		no_candidate "$p" || fail "apt-get install $p failed, and the archive has it"
		say "step=$STEP/$STEPS optional package $p not installed: the archive has no candidate"
		grep -qxF -- "$p" "$STATE_DIR/missing-optional" 2>/dev/null || echo "$p" >>"$STATE_DIR/missing-optional"
	done
}

# apply_now WHAT COMMAND...: a file just written that the host reads at
# boot (WHAT) is applied to this boot by COMMAND; a failure is logged, as
# the boot would log it.
apply_now() {
	ap_what=$1
	shift
	logged sh -c "$*" || say "step=$STEP/$STEPS WARN applying $ap_what failed: $*"
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
	ka_tmp=$(mktemp -- "$f.imagectl-firstboot.XXXXXX")
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
		}' "$f" >"$ka_tmp" || {
		rm -f -- "$ka_tmp"
		fail "editing $f"
	}
	chmod 0644 "$ka_tmp"
	mv -f -- "$ka_tmp" "$f"
	# As the build: a failing update-grub is logged, not fatal (the
	# drop-in and /etc/default/grub hold the args for the next update-grub).
	if command -v update-grub >/dev/null 2>&1; then
		logged update-grub || say "step=$STEP/$STEPS WARN update-grub failed: the args take effect once grub.cfg is regenerated"
	else
		say "step=$STEP/$STEPS no update-grub here: the args take effect once grub.cfg is regenerated"
	fi
	reboot_later "kernel args $*"
}

# reboot_later WHAT: what the current step changed takes effect at the
# next boot; the result line says reboot_required=yes in this boot.
reboot_later() {
	boot_id >"$STATE_DIR/reboot-required"
	say "step=$STEP/$STEPS takes effect after a reboot: $1"
}

# boot_id: this boot's id (empty where /proc is not mounted).
boot_id() { cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo; }

# reboot_required: yes when a step whose change takes effect at the next
# boot ran in this boot (STATE_DIR/reboot-required holds its boot's id), in
# this run or an earlier one.
reboot_required() {
	if [ -e "$STATE_DIR/reboot-required" ] && [ "$(cat "$STATE_DIR/reboot-required")" = "$(boot_id)" ]; then
		echo yes
	else
		echo no
	fi
}

# result STATUS: the machine-readable result line, also kept in
# STATE_DIR/result.
result() {
	missing=$(paste -sd, "$STATE_DIR/missing-optional" 2>/dev/null) || missing=
	line="result status=$1 steps=$STEPS ran=$DONE already_done=$SKIPPED not_at_first_boot=$NOT_HERE"
	[ "$1" = ok ] || line="$line failed_step=$STEP"
	line="$line download_bytes=$((ARCHIVE_BYTES + INDEX_BYTES)) archive_bytes=$ARCHIVE_BYTES index_bytes=$INDEX_BYTES"
	line="$line missing_optional=${missing:--} reboot_required=$(reboot_required)"
	line="$line seconds=$(awk -v a="$START" -v b="$(uptime_s)" 'BEGIN { printf "%.3f", b - a }')"
	say "$line"
	printf '%s\n' "$line" >"$STATE_DIR/result" 2>/dev/null || true
}

# finish: on exit, a failure's result line.
finish() {
	rc=$?
	trap - EXIT
	release_services
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
	# sh runs the EXIT trap on exit, not when a signal ends it: a
	# signal exits, so that finish releases what the script holds.
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 143' TERM
	# A run killed before that (or by KILL) left its policy-rc.d.
	if held_policy; then
		rm -f -- "$POLICY_RC"
	fi
	say "time $MILESTONE_START=$START"
	say "image=$IMAGE version=$VERSION steps=$STEPS time=$(now) state=$STATE_DIR"
}

# end: the done milestone and marker, the result line.
end() {
	start_boot_services
	t=$(uptime_s)
	: >"$STATE_DIR/$DONE_MARKER"
	say "time $MILESTONE_DONE=$t"
	result ok
	trap - EXIT
}
