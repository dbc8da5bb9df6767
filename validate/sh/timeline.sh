# shellcheck shell=sh
# The first boot's timeline for the result document of a live run:
# timeline, and what it reads: systemd's monotonic timestamps, cloud-init's
# record, the site bootstrap's done-markers, the script's own uptime. Times
# are seconds since the kernel started, in validate.Milestones' names; what
# the host cannot tell is left out, and no missing tool fails a check.
# validate.Script copies what follows this comment into the generated script
# as it is (see validate/scriptlib.go).

# milestone NAME SECONDS SOURCE: one milestone, unless SECONDS is not a
# number.
milestone() {
	case $2 in "" | - | *[!0-9.-]* | ?*-*) return 0 ;; esac
	TIMELINE=$TIMELINE${TIMELINE:+$NL}"$1 $2 $3"
}

# milestones: the names in TIMELINE.
milestones() { printf '%s\n' "$TIMELINE" | cut -d' ' -f1 | tr '\n' ' '; }

# since_boot EPOCH: EPOCH (seconds, maybe fractional) as seconds since the
# kernel started (BOOT_EPOCH); nothing for a moment before this boot.
since_boot() {
	awk -v t="$1" -v b="$BOOT_EPOCH" 'BEGIN { if (t !~ /^[0-9]+(\.[0-9]+)?$/ || t + 0 < b + 0) exit; printf "%.3f", t - b }'
}

# systemd_time NAME PROPERTY [UNIT]: a systemd monotonic timestamp (µs
# since the kernel started; 0 when it did not happen), of the manager
# when no UNIT. The loader's counts back from the kernel's start.
systemd_time() {
	us=$(systemctl show -p "$2" --value -- ${3:+"$3"} 2>/dev/null)
	case $us in "" | 0 | *[!0-9]*) return 0 ;; esac
	sign=
	[ "$1" = loader ] && sign=-
	milestone "$1" "$(awk -v us="$us" -v sign="$sign" 'BEGIN { printf "%s%.3f", sign, us / 1000000 }')" systemd
}

# cloud_init_status NAME STAGE KEY: STAGE's KEY (start, finished) in
# cloud-init's status.json, for a host whose systemd did not tell.
cloud_init_status() {
	has_word "$(milestones)" "$1" && return 0
	t=$(awk -v stage="\"$2\": {" -v key="\"$3\": " '
		index($0, stage) { inside = 1; next }
		inside && /^ *[}]/ { exit }
		inside && index($0, key) { v = substr($0, index($0, key) + length(key)); sub(/,$/, "", v); print v; exit }
	' "$ROOT/var/lib/cloud/data/status.json" 2>/dev/null)
	milestone "$1" "$(since_boot "$t")" cloud-init
}

# bootstrap_start: when cloud-init began the module that runs user-data's
# runcmd (config-scripts_user in modules-final), where a MAAS deploy's
# user-data runs the site bootstrap: its first start this boot, from
# cloud-init analyze dump (one key a line, sorted: description,
# event_type, name, origin, [result,] timestamp).
bootstrap_start() {
	command -v cloud-init >/dev/null 2>&1 || return 0
	t=$(cloud-init analyze dump 2>/dev/null | awk -v b="$BOOT_EPOCH" '
		/"event_type": / { type = $2 }
		/"name": / { name = $2 }
		/"timestamp": / {
			t = $2; sub(/,$/, "", t)
			if (type == "\"start\"," && name == "\"modules-final/config-scripts_user\"," && t + 0 >= b + 0) { print t; exit }
			type = ""; name = ""
		}')
	milestone bootstrap-start "$(since_boot "$t")" cloud-init
}

# bootstrap_done: the latest mtime of the done-markers the converged checks
# found (DONE_MARKERS), when one was written this boot.
bootstrap_done() {
	latest=
	for f in $DONE_MARKERS; do
		t=$(stat -c %Y "$ROOT$f" 2>/dev/null) || continue
		if [ -z "$latest" ] || [ "$t" -gt "$latest" ]; then
			latest=$t
		fi
	done
	[ -n "$latest" ] && milestone bootstrap-done "$(since_boot "$latest")" marker
	return 0
}

# timeline: the first boot's milestones in TIMELINE, in time order. A boot
# after the first (cloud-init ran the instance's once-per-instance modules
# before this boot began) tells nothing of the first: no timeline.
timeline() {
	BOOT_EPOCH=$(awk '$1 == "btime" { print $2; exit }' "$ROOT/proc/stat" 2>/dev/null)
	case $BOOT_EPOCH in "" | *[!0-9]*) return 0 ;; esac
	sem=$ROOT/var/lib/cloud/instance/sem/config_scripts_user
	if [ -e "$sem" ] && [ "$(stat -c %Y "$sem" 2>/dev/null || echo 0)" -lt "$BOOT_EPOCH" ]; then
		return 0
	fi
	if command -v systemctl >/dev/null 2>&1; then
		systemd_time loader LoaderTimestampMonotonic
		systemd_time userspace UserspaceTimestampMonotonic
		# systemd's monotonic clock starts with the kernel.
		has_word "$(milestones)" userspace && milestone kernel 0 systemd
		systemd_time boot-finished FinishTimestampMonotonic
		systemd_time cloud-init-start InactiveExitTimestampMonotonic cloud-init-local.service
		systemd_time multi-user ActiveEnterTimestampMonotonic multi-user.target
		# The process's exit, not the unit's activation: set when it failed too.
		systemd_time cloud-init-done ExecMainExitTimestampMonotonic cloud-final.service
	fi
	cloud_init_status cloud-init-start init-local start
	cloud_init_status cloud-init-done modules-final finished
	# The site bootstrap runs at stage converged (and cloud-init analyze,
	# Python reading its log, takes a while).
	if [ "$STAGE" = converged ]; then
		bootstrap_start
		bootstrap_done
	fi
	milestone validation-start "$UPTIME_START" script
	milestone validation-done "$(uptime_now)" script
	# In time order; a tie in the order found.
	[ -n "$TIMELINE" ] && TIMELINE=$(printf '%s\n' "$TIMELINE" | awk '{ print NR, $0 }' | sort -k3,3n -k1,1n | cut -d' ' -f2-)
	return 0
}
