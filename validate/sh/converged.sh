# shellcheck shell=sh
# The checks of a profile's runtime baseline after the site bootstrap:
# done-markers, the fabric's netplan, address and route, bridges, DHCP.
# validate.Script copies what follows this comment into the generated script
# as it is (see validate/scriptlib.go).

# check_done_marker PATH BUNDLE [ENTRYPOINT]: the bootstrap done-marker
# BUNDLE writes when it completes.
check_done_marker() {
	check=done-marker:${1##*/}
	if [ -e "$ROOT$1" ]; then
		result PASS "$check" "present"
		DONE_MARKERS="$DONE_MARKERS $1"
		return
	fi
	fix="run the site bootstrap $2${3:+ ($3)} and read its log; the marker appears when it completes"
	case $BOOTSTRAP in
	"" | "$2" | "$2 "*) ;;
	*) fix="$fix (or re-run the profile's bootstrap $BOOTSTRAP, if it composes $2)" ;;
	esac
	result FAIL "$check" "missing $1: the $PROFILE host baseline is incomplete, whatever else passed (other done-markers, node-agent enrollment)" "$fix"
}

check_fabric_netplan() {
	if [ -e "$ROOT$1" ]; then
		result PASS fabric:netplan "$1 present"
	else
		result FAIL fabric:netplan "missing $1" "render $1$(bootstrap_hint ' with ') and run netplan apply"
	fi
}

# cidr_inside PREFIX SUBNET: whether the IPv4 PREFIX (a.b.c.d, or a.b.c.d/len)
# lies inside SUBNET (a.b.c.d/len).
cidr_inside() {
	awk -v p="$1" -v s="$2" '
		function ip(a,   o, n, i) {
			sub(/\/.*/, "", a)
			if (split(a, o, ".") != 4) return -1
			for (i = 1; i <= 4; i++) {
				if (o[i] !~ /^[0-9]+$/ || o[i] + 0 > 255) return -1
				n = n * 256 + o[i]
			}
			return n
		}
		function len(c) { return c ~ /\/[0-9]+$/ ? substr(c, index(c, "/") + 1) + 0 : 32 }
		BEGIN {
			pa = ip(p); sa = ip(s); pl = len(p); sl = len(s)
			if (pa < 0 || sa < 0 || pl > 32 || sl > 32 || pl < sl) exit 1
			block = 2 ^ (32 - sl)
			exit !(int(pa / block) == int(sa / block))
		}'
}

# fabric_links PATTERN: the interfaces whose name matches the shell PATTERN.
fabric_links() {
	ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | while read -r link; do
		# shellcheck disable=SC2254 # PATTERN is a pattern.
		case $link in $1) echo "$link" ;; esac
	done
}

# fabric_hardware CHECK PATTERN: WARN CHECK and fail when no interface
# matches PATTERN (no fabric hardware); sets FABRIC_LINKS.
fabric_hardware() {
	FABRIC_LINKS=$(fabric_links "$2")
	[ -n "$FABRIC_LINKS" ] && return 0
	result WARN "$1" "no $2 interface: no InfiniBand hardware"
	return 1
}

check_fabric_address() {
	if needs_host fabric:address || ! fabric_hardware fabric:address "$1"; then
		return
	fi
	found='' seen=''
	for link in $FABRIC_LINKS; do
		for addr in $(ip -4 -o addr show dev "$link" 2>/dev/null | awk '{ print $4 }'); do
			seen="$seen $link $addr,"
			cidr_inside "${addr%/*}" "$2" && found="$link $addr"
		done
	done
	if [ -n "$found" ]; then
		result PASS fabric:address "$found in $2"
	else
		result FAIL fabric:address "no $1 interface has an address in $2 (have:${seen:- none})" \
			"netplan apply and check the IPoIB link (ip addr, ibstat)$(bootstrap_hint '; the fabric netplan comes from ')"
	fi
}

check_fabric_route() {
	if needs_host fabric:route || ! fabric_hardware fabric:route "$1"; then
		return
	fi
	found=
	routes=$(ip -4 route show 2>/dev/null | awk '{ dev = ""; for (i = 2; i < NF; i++) if ($i == "dev") dev = $(i + 1); print $1, dev }')
	while read -r dest dev; do
		# shellcheck disable=SC2254 # PATTERN is a pattern.
		case $dev in $1) cidr_inside "$dest" "$2" && found="$dest dev $dev" ;; esac
	done <<EOF
$routes
EOF
	if [ -n "$found" ]; then
		result PASS fabric:route "$found"
	else
		result FAIL fabric:route "no route into $2 via a $1 interface" \
			"netplan apply and check ip -4 route and the IPoIB link$(bootstrap_hint '; the fabric netplan comes from ')"
	fi
}

# check_bridge NAME ADDRESS: the bridge NAME owns ADDRESS (with its prefix
# length when ADDRESS has one).
check_bridge() {
	if needs_host "bridge:$1"; then
		return
	elif ! out=$(ip -4 -o addr show dev "$1" 2>&1); then
		result FAIL "bridge:$1" "no interface $1: $out" \
			"create the bridge$(bootstrap_hint ': re-run '); check its unit (systemctl --failed) and ovs-vsctl show or ip link show type bridge"
		return
	fi
	case $2 in
	*/*) addrs=$(printf '%s\n' "$out" | awk '{ print $4 }') ;;
	*) addrs=$(printf '%s\n' "$out" | awk '{ sub(/\/.*/, "", $4); print $4 }') ;;
	esac
	if has_word "$(printf '%s' "$addrs" | tr '\n' ' ')" "$2"; then
		result PASS "bridge:$1" "$1 has $2"
	else
		result FAIL "bridge:$1" "$1 has $(printf '%s' "${addrs:-no IPv4 address}" | tr '\n' ' '), expected $2" \
			"assign $2 to $1$(bootstrap_hint ': re-run '); check the unit that configures it (systemctl --failed)"
	fi
}

# check_dhcp SERVICE SUBNET_FILE: the DHCP server is active with its subnet
# configuration.
check_dhcp() {
	if [ -e "$ROOT$2" ]; then file="$2 present"; else file="$2 missing"; fi
	if [ "$LIVE" = 0 ]; then
		state="not checked (needs a running host)"
	elif ! state=$(systemctl is-active -- "$1" 2>/dev/null); then
		state=${state:-unknown}
	fi
	detail="$1 $state, $file"
	if [ "$state" = active ] && [ -e "$ROOT$2" ]; then
		result PASS "dhcp:$1" "$detail"
	elif [ "$LIVE" = 0 ] && [ -e "$ROOT$2" ]; then
		result WARN "dhcp:$1" "$detail"
	else
		result FAIL "dhcp:$1" "$detail" \
			"render $2$(bootstrap_hint ' with '), then systemctl restart $1 and read journalctl -u $1 -b"
	fi
}
