# shellcheck shell=sh
# The checks of what the build put into the image: packages, kernel args,
# Netdata's config, wait-online, services, files, the build marker, the
# recipe's validation block. They read ROOT and LIVE (core.sh).
# validate.Script copies what follows this comment into the generated script
# as it is (see validate/scriptlib.go).

# sha256 and octal mode of a file under ROOT.
file_sha256() { sha256sum "$ROOT$1" 2>/dev/null | cut -d' ' -f1; }
file_mode() { stat -c %a "$ROOT$1" 2>/dev/null; }

check_marker() {
	f=$ROOT$1
	if [ ! -f "$f" ]; then
		result FAIL build-marker "missing $1" \
			"this host does not run the image: check the boot resource the MAAS deploy selected (distro_series) and redeploy"
	elif ! grep -q "\"version\": \"$2\"" "$f"; then
		result FAIL build-marker "$1 is not for version $2" \
			"the host runs another version of the image: redeploy it with version $2"
	elif [ -n "$3" ] && ! grep -q "\"top_key\": \"$3\"" "$f"; then
		result FAIL build-marker "$1 does not carry top key $3" \
			"the image was rebuilt with other content under version $2: redeploy the published artifact"
	else
		result PASS build-marker "$1 version $2"
	fi
}

check_package() {
	if ! command -v dpkg-query >/dev/null 2>&1; then
		result WARN "package:$1" "dpkg-query not available"
		return
	fi
	got=$(dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f='${db:Status-Abbrev}|${Version}' "$1" 2>/dev/null)
	case $got in
	ii*) ;;
	*)
		result FAIL "package:$1" "not installed" "apt-get install $1 (the recipe requires it), or redeploy the image"
		return
		;;
	esac
	version=${got#*|}
	if [ -n "$2" ] && [ "$version" != "$2" ]; then
		result FAIL "package:$1" "version $version, the build installed $2" \
			"$1 changed after the build (an upgrade?): install $1=$2 and hold it, or rebuild the image"
	else
		result PASS "package:$1" "$version"
	fi
}

# GRUB_CMDLINE_LINUX as grub-mkconfig computes it: /etc/default/grub, then
# the grub.d drop-ins in order, each of which may change it.
grub_cmdline() {
	(
		GRUB_CMDLINE_LINUX=
		# shellcheck disable=SC1090,SC1091
		[ -f "$ROOT/etc/default/grub" ] && . "$ROOT/etc/default/grub"
		for f in "$ROOT"/etc/default/grub.d/*.cfg; do
			# shellcheck disable=SC1090
			[ -f "$f" ] && . "$f"
		done
		printf '%s' "$GRUB_CMDLINE_LINUX"
	) 2>/dev/null
}

check_kernel_arg() {
	line=$(grep -E '^[[:space:]]*GRUB_CMDLINE_LINUX=' "$ROOT/etc/default/grub" 2>/dev/null | tail -n 1)
	if ! has_word "$(printf '%s' "${line#*=}" | tr -d "\"'")" "$1"; then
		result FAIL "kernel-arg:$1:default-grub" "not in GRUB_CMDLINE_LINUX of /etc/default/grub" \
			"add $1 to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub and reboot"
	else
		result PASS "kernel-arg:$1:default-grub" "in /etc/default/grub"
	fi
	if ! grep -qs -- "$1" "$ROOT"/etc/default/grub.d/*.cfg; then
		result FAIL "kernel-arg:$1:grub-d" "in no /etc/default/grub.d drop-in" \
			"restore the image's /etc/default/grub.d drop-in (redeploy or rebuild), run update-grub and reboot"
	elif ! has_word "$(grub_cmdline)" "$1"; then
		result FAIL "kernel-arg:$1:grub-d" "the grub.d drop-ins leave it out of GRUB_CMDLINE_LINUX" \
			"find the later /etc/default/grub.d drop-in that resets GRUB_CMDLINE_LINUX, fix it, run update-grub and reboot"
	else
		result PASS "kernel-arg:$1:grub-d" "in the effective GRUB_CMDLINE_LINUX"
	fi
	if needs_host "kernel-arg:$1:cmdline"; then
		return
	elif has_word "$(cat "$ROOT/proc/cmdline" 2>/dev/null)" "$1"; then
		result PASS "kernel-arg:$1:cmdline" "in /proc/cmdline"
	else
		result FAIL "kernel-arg:$1:cmdline" "not in /proc/cmdline" \
			"run update-grub, check that /boot/grub/grub.cfg carries $1, and reboot"
	fi
}

check_netdata() {
	conf=/etc/netdata/netdata.conf
	if ! grep -qs "bind to = $1\$" "$ROOT$conf"; then
		result FAIL netdata-config "$conf does not bind to $1" \
			"set 'bind to = $1' in /etc/netdata/netdata.conf (or re-run the site bootstrap's Netdata step) and restart netdata"
	elif ! grep -qs "disk space MB = $2\$" "$ROOT$conf"; then
		result FAIL netdata-config "$conf does not have $2 MB retention" \
			"set 'dbengine multihost disk space MB = $2' in /etc/netdata/netdata.conf and restart netdata"
	else
		result PASS netdata-config "bind $1, $2 MB"
	fi
	if needs_host netdata-listen; then
		return
	elif ! command -v ss >/dev/null 2>&1; then
		result WARN netdata-listen "ss not available"
	elif ss -ltnH 2>/dev/null | awk '{ print $4 }' | grep -qx -- "$1"; then
		result PASS netdata-listen "listening on $1"
	else
		result FAIL netdata-listen "nothing listens on $1" \
			"systemctl status netdata and journalctl -u netdata; check 'bind to' in /etc/netdata/netdata.conf"
	fi
}

check_wait_online() {
	f=/etc/systemd/system/systemd-networkd-wait-online.service.d/10-imagectl-timeout.conf
	if grep -qs -- "--timeout=$1" "$ROOT$f"; then
		result PASS wait-online "bounded to $1s"
	else
		result FAIL wait-online "$f does not bound wait-online to $1s" \
			"restore the image's drop-in $f (redeploy or rebuild) and systemctl daemon-reload"
	fi
}

check_service_enabled() {
	if [ "$LIVE" = 1 ]; then
		if state=$(systemctl is-enabled -- "$1" 2>/dev/null); then
			result PASS "service-enabled:$1" "$state"
		else
			result FAIL "service-enabled:$1" "${state:-unknown}" "systemctl enable $1"
		fi
		return
	fi
	unit=$1
	case $unit in *.*) ;; *) unit=$unit.service ;; esac
	if ls "$ROOT"/etc/systemd/system/*.wants/"$unit" >/dev/null 2>&1; then
		result PASS "service-enabled:$1" "wanted by a target"
	else
		result FAIL "service-enabled:$1" "no *.wants link in /etc/systemd/system" \
			"the recipe enables $1: rebuild the image, or systemctl enable $1 on the host"
	fi
}

# A socket-activated daemon may exit while idle and is started again by its
# socket on the next connection: libvirtd runs with --timeout 120 on Debian
# and Ubuntu. Inactive (not failed) with a listening trigger socket is ready.
check_service_active() {
	if needs_host "service-active:$1"; then
		return
	elif state=$(systemctl is-active -- "$1" 2>/dev/null); then
		result PASS "service-active:$1" "$state"
		return
	fi
	if [ "$state" = inactive ]; then
		for sock in $(systemctl show --property=TriggeredBy --value -- "$1" 2>/dev/null); do
			case $sock in *.socket) ;; *) continue ;; esac # not a timer's or a path's
			if [ "$(systemctl is-active -- "$sock" 2>/dev/null)" = active ]; then
				result PASS "service-active:$1" "inactive while idle, $sock listens and starts it on demand"
				return
			fi
		done
	fi
	result FAIL "service-active:$1" "${state:-unknown}" \
		"systemctl status $1 and journalctl -u $1 -b say why; start it with systemctl start $1$(bootstrap_hint ', or re-run ')"
}

check_file() {
	sum=$(file_sha256 "$1")
	mode=$(file_mode "$1")
	want_mode=$(printf '%s' "$3" | sed 's/^0*//')
	if [ -z "$sum" ]; then
		result FAIL "file:$1" "missing" "restore $1 from the image (redeploy), or find what removed it"
	elif [ "$sum" != "$2" ]; then
		result FAIL "file:$1" "sha256 $sum, expected $2" "$1 changed after the build: restore it from the image, or find what rewrote it"
	elif [ "$mode" != "$want_mode" ]; then
		result FAIL "file:$1" "mode $mode, expected $3" "chmod $3 $1"
	else
		result PASS "file:$1" "sha256 $2 mode $3"
	fi
}

check_exists() {
	if [ -e "$ROOT$1" ] || [ -L "$ROOT$1" ]; then
		result PASS "exists:$1" "present"
	else
		result FAIL "exists:$1" "missing" "redeploy the image if it ships $1$(bootstrap_hint ', or re-run '), and read the log of what writes it"
	fi
}

check_command() {
	if needs_host "command:$1"; then
		return
	fi
	if out=$(sh -c "$2" 2>&1); then
		result PASS "command:$1" "$2"
	else
		result FAIL "command:$1" "$2: $(printf '%s' "$out" | tail -n 3)" "run it by hand to see why it fails: $2"
	fi
}
