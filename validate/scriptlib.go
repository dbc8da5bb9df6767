package validate

// The validation script's shell functions, in the order the script carries
// them. Script writes the variables they read (PROFILE, STAGE, PROFILES,
// STAGES) before them and the calls to the checks after them. POSIX sh: the
// script runs under dash; shellcheck reads every generated script in the
// tests.

// shCore parses the arguments and prints the result lines.
const shCore = `has_word() {
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
`

// shImage holds the checks of what the build put into the image.
const shImage = `# sha256 and octal mode of a file under ROOT.
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
`

// shGPU reads the GPUs with nvidia-smi's query interface only (never its
// table): one query for every field the checks need, all of them fields the
// H100 and H200 fixtures answer.
const shGPU = `GPU_FIELDS=index,name,driver_version,persistence_mode,ecc.mode.current
GPU_FIELDS=$GPU_FIELDS,ecc.errors.uncorrected.volatile.total,retired_pages.pending
GPU_FIELDS=$GPU_FIELDS,remapped_rows.pending,remapped_rows.failure
GPU_FIELDS=$GPU_FIELDS,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max
GPU_STATE=
GPU_ROWS=
GPU_WHY=
GPU_IDLE=

# gpu_query asks nvidia-smi once: GPU_STATE becomes ok (GPU_ROWS holds one
# CSV line per GPU, in GPU_FIELDS order), offline or unavailable (GPU_WHY
# says why).
gpu_query() {
	if [ -n "$GPU_STATE" ]; then
		return
	elif [ "$LIVE" = 0 ]; then
		GPU_STATE=offline
	elif ! command -v nvidia-smi >/dev/null 2>&1; then
		GPU_STATE=unavailable GPU_WHY="nvidia-smi is not installed"
	elif GPU_ROWS=$(nvidia-smi --query-gpu="$GPU_FIELDS" --format=csv,noheader,nounits 2>/dev/null) && [ -n "$GPU_ROWS" ]; then
		GPU_STATE=ok
	else
		GPU_STATE=unavailable GPU_ROWS=
		GPU_WHY="nvidia-smi fails: $(nvidia-smi --query-gpu="$GPU_FIELDS" --format=csv,noheader,nounits 2>&1 | head -n 2)"
	fi
}

# check_gpu NAME [ARGS]: the gpu:NAME line, from gpu_NAME ARGS when
# nvidia-smi answers. Without it, every GPU check FAILs on bare-metal and
# WARNs on slice, whose GPUs are bound to vfio-pci for passthrough (host NVML
# is no slice-readiness gate). nvidia-fabricmanager is a unit: on bare-metal
# it is checked whatever nvidia-smi says.
check_gpu() {
	gpu_query
	gpu_check=$1
	shift
	if needs_host "gpu:$gpu_check"; then
		return
	elif [ "$GPU_STATE" = unavailable ] && { [ "$gpu_check" != fabricmanager ] || [ "$PROFILE" = slice ]; }; then
		gpu_unavailable "$gpu_check"
	else
		case $gpu_check in
		nvml) gpu_nvml ;;
		count) gpu_count "$@" ;;
		model) gpu_model "$@" ;;
		driver) gpu_driver "$@" ;;
		persistence-mode) gpu_persistence_mode ;;
		ecc-mode) gpu_ecc_mode ;;
		ecc-errors) gpu_ecc_errors ;;
		row-remap) gpu_row_remap ;;
		retired-pages) gpu_retired_pages ;;
		pcie-link) gpu_pcie_link "$@" ;;
		fabricmanager) gpu_fabricmanager ;;
		esac
	fi
}

gpu_unavailable() {
	if [ "$PROFILE" = slice ]; then
		result WARN "gpu:$1" "$GPU_WHY: expected on a slice host once its GPUs are bound to vfio-pci (host NVML is no slice-readiness gate)"
	else
		result FAIL "gpu:$1" "$GPU_WHY" \
			"a bare-metal host needs the NVIDIA driver: check nvidia-smi -L, lsmod | grep nvidia, dmesg | grep -i nvrm, and that no GPU is bound to vfio-pci (lspci -k -d 10de:)"
	fi
}

# gpu_offenders AWK [WANT [WANT2]]: runs the AWK pattern-action statements
# on every GPU, its fields named, and prints "GPU <index>: TEXT; ..." for
# each flag(TEXT) they call.
gpu_offenders() {
	printf '%s\n' "$GPU_ROWS" | awk -F', *' -v want="${2-}" -v want2="${3-}" -v idle="$GPU_IDLE" '
		function flag(text) { out = out sep "GPU " idx ": " text; sep = "; " }
		function num(v) { return v ~ /^[0-9]+$/ }
		function is_idle(i) { return index(" " idle " ", " " i " ") > 0 }
		{
			idx = $1; name = $2; driver = $3; persistence = $4; ecc = $5; ecc_errors = $6
			retired = $7; remap_pending = $8; remap_failure = $9
			gen = $10; gen_max = $11; width = $12; width_max = $13
		}
		'"$1"'
		END { printf "%s", out }'
}

# gpu_distinct COLUMN: the distinct values of a GPU_FIELDS column.
gpu_distinct() {
	printf '%s\n' "$GPU_ROWS" | awk -F', *' -v c="$1" '!seen[$c]++ { printf "%s%s", sep, $c; sep = ", " }'
}

gpu_count_rows() { printf '%s\n' "$GPU_ROWS" | grep -c .; }

# gpu_verdict NAME BAD PASS FIX: FAIL gpu:NAME with the detail BAD and the
# remediation FIX when BAD is not empty, else PASS it with the detail PASS.
gpu_verdict() {
	if [ -n "$2" ]; then
		result FAIL "gpu:$1" "$2" "$4"
	else
		result PASS "gpu:$1" "$3"
	fi
}

gpu_nvml() {
	result PASS gpu:nvml "nvidia-smi answers for $(gpu_count_rows) GPU(s): $(gpu_distinct 2)"
}

# gpu_count N: N GPUs answer. On slice, fewer WARN: the others may be bound
# to vfio-pci for passthrough, out of NVML's sight.
gpu_count() {
	got=$(gpu_count_rows)
	if [ "$got" -eq "$1" ]; then
		result PASS gpu:count "$got GPUs"
	elif [ "$PROFILE" = slice ] && [ "$got" -lt "$1" ]; then
		result WARN gpu:count "$got GPUs answer (indices $(gpu_distinct 1)), expected $1: on a slice host the others may be bound to vfio-pci (lspci -k -d 10de: shows their driver)"
	else
		result FAIL gpu:count "$got GPUs answer (indices $(gpu_distinct 1)), expected $1" \
			"find the missing GPUs: nvidia-smi -L, lspci -d 10de: (on the bus?), dmesg | grep -i -e nvrm -e xid; reseat the GPU or check its PCIe slot/riser and power"
	fi
}

gpu_model() {
	bad=$(gpu_offenders 'index(name, want) == 0 { flag(name) }' "$1")
	gpu_verdict model "${bad:+expected $1: $bad}" "$(gpu_distinct 2)" \
		"this host's GPUs are not the image's target: deploy the image for its GPU model, or fix the MAAS tag/profile that selected it"
}

gpu_driver() {
	if [ -z "$1" ]; then
		result PASS gpu:driver "$(gpu_distinct 3) (the recipe names no branch)"
		return
	fi
	bad=$(gpu_offenders 'index(driver, want ".") != 1 { flag("driver " driver) }' "$1")
	gpu_verdict driver "${bad:+expected branch $1: $bad}" "$(gpu_distinct 3)" \
		"install the recipe's $1 driver branch, check dkms status and that the running kernel has its module, and reboot"
}

gpu_persistence_mode() {
	gpu_verdict persistence-mode "$(gpu_offenders 'persistence != "Enabled" { flag("persistence mode " persistence) }')" \
		"Enabled on every GPU" \
		"systemctl enable --now nvidia-persistenced (or nvidia-smi -pm 1) and check journalctl -u nvidia-persistenced"
}

gpu_ecc_mode() {
	gpu_verdict ecc-mode "$(gpu_offenders 'ecc != "Enabled" { flag("ECC " ecc) }')" \
		"Enabled on every GPU" \
		"nvidia-smi -i <index> -e 1, then reset the GPU or reboot (ECC mode changes at the next reset)"
}

gpu_ecc_errors() {
	bad=$(gpu_offenders 'num(ecc_errors) && ecc_errors > 0 { flag(ecc_errors " uncorrected volatile ECC errors") }')
	unknown=$(gpu_offenders '!num(ecc_errors) { flag(ecc_errors) }')
	gpu_verdict ecc-errors "$bad" "no uncorrected volatile ECC errors${unknown:+ (not reported by $unknown)}" \
		"drain the host; read nvidia-smi -q -d ECC,ROW_REMAPPER and dmesg (Xid 48/63/94/95), reset the GPU (nvidia-smi -r -i <index>) or reboot, RMA it if errors recur"
}

gpu_row_remap() {
	bad=$(gpu_offenders 'remap_pending == "Yes" { flag("row remap pending") } remap_failure == "Yes" { flag("row remap failed") }')
	unknown=$(gpu_offenders '!(remap_pending ~ /^(Yes|No)$/) { flag(remap_pending) }')
	gpu_verdict row-remap "$bad" "no pending or failed row remaps${unknown:+ (not reported by $unknown)}" \
		"a pending remap applies at the next GPU reset: drain the host and nvidia-smi -r -i <index> or reboot; a failed remap means the GPU ran out of spare rows: RMA it"
}

gpu_retired_pages() {
	bad=$(gpu_offenders 'retired == "Yes" { flag("page retirement pending") }')
	na=$(gpu_offenders 'retired ~ /N\/A/ { flag(retired) }')
	pass="no pages pending retirement"
	if [ -z "$bad" ] && [ -n "$na" ]; then
		if [ -z "$(gpu_offenders 'retired !~ /N\/A/ { flag(retired) }')" ]; then
			na="$(gpu_distinct 7) on every GPU"
		fi
		pass="not applicable: $na (this GPU generation remaps rows instead of retiring pages, see gpu:row-remap)"
	fi
	gpu_verdict retired-pages "$bad" "$pass" \
		"pending retirements apply at the next GPU reset: drain the host and reset the GPU or reboot; RMA it if pages keep retiring"
}

# gpu_idle_indices: the indices of the GPUs that report themselves idle
# (clock event reason gpu_idle Active), or "unknown" when nvidia-smi does not
# know the field under either of its names.
gpu_idle_indices() {
	for field in clocks_event_reasons.gpu_idle clocks_throttle_reasons.gpu_idle; do
		if out=$(nvidia-smi --query-gpu="index,$field" --format=csv,noheader,nounits 2>/dev/null); then
			printf '%s\n' "$out" | awk -F', *' '$2 == "Active" { printf "%s ", $1 }'
			return
		fi
	done
	echo unknown
}

# gpu_pcie_link GEN WIDTH: each GPU's link against GEN and WIDTH, 0 meaning
# the GPU's own maximum (pcie.link.*.max: what this GPU in this slot can
# train at). The width is judged strictly. A link that cannot reach GEN
# fails. A GPU below its expected gen passes only while it reports itself
# idle: GPUs lower the link gen when idle, so the detail says so; busy, or
# when nvidia-smi cannot tell, it fails.
gpu_pcie_link() {
	below='{ want_gen = want > 0 ? want : gen_max } num(gen) && num(want_gen) && gen + 0 < want_gen + 0'
	GPU_IDLE=
	if [ -n "$(gpu_offenders "$below { flag(gen) }" "$1")" ]; then
		GPU_IDLE=$(gpu_idle_indices)
	fi
	bad=$(gpu_offenders '
		{ want_gen = want > 0 ? want : gen_max; want_width = want2 > 0 ? want2 : width_max }
		!num(gen) || !num(gen_max) || !num(width) || !num(width_max) { flag("link not reported (gen " gen ", width " width ")"); next }
		width + 0 < want_width + 0 { flag("x" width ", expected x" want_width); next }
		gen_max + 0 < want_gen + 0 { flag("trains at gen " gen_max " at most, expected gen " want_gen); next }
		gen + 0 < want_gen + 0 && !is_idle(idx) { flag("gen " gen ", expected gen " want_gen " and " (idle == "unknown" ? "nvidia-smi cannot tell whether it is idle" : "it is not idle")) }' "$1" "$2")
	if [ "$1" -gt 0 ]; then want="gen $1"; else want="its max gen"; fi
	if [ "$2" -gt 0 ]; then want="$want x$2"; else want="$want and width"; fi
	if [ -n "$bad" ]; then
		result FAIL gpu:pcie-link "expected $want: $bad" \
			"compare lspci -vv -s <bus id> LnkSta with LnkCap; reseat the GPU or its riser, check the slot and the BIOS PCIe settings; re-check under load (an idle GPU may lower its gen)"
		return
	fi
	links="$(printf '%s\n' "$GPU_ROWS" | awk -F', *' '!seen[$10 " x" $12]++ { printf "%sgen %s x%s", sep, $10, $12; sep = ", " }')"
	idle=$(gpu_offenders "$below { flag(\"idle at gen \" gen \" of \" want_gen) }" "$1")
	result PASS gpu:pcie-link "$links (expected $want)${idle:+; $idle: an idle GPU lowers its link gen, its width is intact}"
}

gpu_fabricmanager() {
	if state=$(systemctl is-active -- nvidia-fabricmanager 2>/dev/null); then
		result PASS gpu:fabricmanager "nvidia-fabricmanager $state"
	else
		result FAIL gpu:fabricmanager "nvidia-fabricmanager is ${state:-unknown}: NVSwitch GPUs cannot run CUDA work without it" \
			"systemctl enable --now nvidia-fabricmanager; its version must match the driver's; journalctl -u nvidia-fabricmanager -b says why it stopped"
	fi
}
`

// shSlice holds the slice profile's prerequisites.
const shSlice = `# vm prints the hypervisor when this host is a virtual machine (a smoke
# boot), nothing on bare metal. A VM's missing virtualization hardware is
# absent hardware, not a misconfigured host.
vm() {
	v=$(systemd-detect-virt --vm 2>/dev/null) || v=
	[ "$v" = none ] || printf '%s' "$v"
}

check_kvm() {
	if needs_host slice:kvm; then
		return
	elif [ -e "$ROOT/dev/kvm" ]; then
		result PASS slice:kvm "/dev/kvm present"
	elif [ -n "$(vm)" ]; then
		result WARN slice:kvm "/dev/kvm missing: this host is a $(vm) virtual machine without nested virtualization (absent hardware)"
	else
		result FAIL slice:kvm "/dev/kvm missing: no hardware virtualization" \
			"enable VT-x/AMD-V in the firmware (BIOS), then check dmesg | grep -i kvm and that kvm_intel or kvm_amd is loaded"
	fi
}

check_iommu_groups() {
	if needs_host slice:iommu-groups; then
		return
	fi
	set -- "$ROOT"/sys/kernel/iommu_groups/*
	if [ -e "$1" ]; then
		result PASS slice:iommu-groups "$# IOMMU groups"
	elif [ -n "$(vm)" ]; then
		result WARN slice:iommu-groups "no IOMMU groups: this host is a $(vm) virtual machine without a virtual IOMMU (absent hardware)"
	else
		result FAIL slice:iommu-groups "no IOMMU groups in /sys/kernel/iommu_groups" \
			"enable VT-d/AMD-Vi in the firmware and boot with the image's kernel args (see the kernel-arg lines); dmesg | grep -i -e dmar -e iommu"
	fi
}

# module_loaded MODULE: loaded or built in (/sys/module names it either way
# once it has parameters; modules.builtin lists the rest).
module_loaded() {
	[ -d "$ROOT/sys/module/$1" ] && return 0
	builtin=$ROOT/lib/modules/$(uname -r)/modules.builtin
	[ -f "$builtin" ] && tr - _ <"$builtin" | grep -q "/$1\.ko"
}

# check_vfio_module MODULE: loaded passes. Loadable but not loaded (modprobe
# -n) WARNs at stage image, where the slice bootstrap or modules-load.d has
# still to load it, and FAILs at stage converged. Neither fails.
check_vfio_module() {
	mod=$(printf '%s' "$1" | tr - _)
	if needs_host "slice:vfio:$1"; then
		return
	elif module_loaded "$mod"; then
		result PASS "slice:vfio:$1" "loaded"
	elif ! command -v modprobe >/dev/null 2>&1 || ! modprobe -n "$1" >/dev/null 2>&1; then
		result FAIL "slice:vfio:$1" "neither loaded nor loadable (modprobe -n $1 fails)" \
			"install the running kernel's extra modules package (for $(uname -r)) and modprobe $1"
	elif [ "$STAGE" = converged ]; then
		result FAIL "slice:vfio:$1" "loadable, not loaded: the converged slice host has it loaded" \
			"modprobe $1 and list it in /etc/modules-load.d/ so it loads at boot$(bootstrap_hint ', or re-run ')"
	else
		result WARN "slice:vfio:$1" "loadable, not loaded yet (the slice bootstrap or /etc/modules-load.d loads it)"
	fi
}
`

// shNetdata checks that Netdata's collectors collect: that their charts
// appear in Netdata's /api/v1/charts. A chart names its collector in its
// "plugin" and "module" members (rrdset2json in Netdata's web API, as
// '"plugin": "x"' up to 1.37 and '"plugin":"x"' since): internal and
// external plugins as "<name>.plugin" (cgroups.plugin, apps.plugin,
// proc.plugin), go.d modules by their module ("module": "nvidia_smi" or
// "docker", the plugin being "go.d" or "go.d.plugin").
const shNetdata = `# http_get URL: the body, with curl or wget.
http_get() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsS --max-time 10 "$1"
	else
		wget -q -T 10 -O - "$1"
	fi
}

# netdata_chart_sources: reads /api/v1/charts JSON on stdin and prints
# "plugin|module" for each chart (no jq: the image may lack it). Split at
# the double quotes, a string is a record: a "plugin" or "module" record,
# then one that is only a colon, then the value.
netdata_chart_sources() {
	awk 'BEGIN { RS = "\"" }
		(key == "plugin" || key == "module") && colon ~ /^[ \t\r\n]*:[ \t\r\n]*$/ {
			if (key == "plugin") plugin = $0
			else { print plugin "|" $0; plugin = "" }
		}
		{ key = colon; colon = $0 }'
}

# collector_charts NAME: how many of the charts seen are NAME's.
collector_charts() {
	printf '%s\n' "$ND_SOURCES" | awk -F'|' -v c="$1" '$1 == c ".plugin" || $2 == c { n++ } END { print n + 0 }'
}

# collector_absent NAME: why what NAME collects is not on this host; fails
# when it is (or when NAME is no collector known to depend on hardware or a
# service).
collector_absent() {
	case $1 in
	nvidia_smi)
		if ! command -v nvidia-smi >/dev/null 2>&1; then
			echo "nvidia-smi is not installed: no NVIDIA GPU to collect"
		elif ! nvidia-smi --query-gpu=index --format=csv,noheader >/dev/null 2>&1; then
			echo "nvidia-smi fails: no NVML (no driver, or the GPUs are bound to vfio-pci)"
		else
			return 1
		fi
		;;
	docker)
		docker_state=$(systemctl is-active -- docker 2>/dev/null)
		if [ "$docker_state" != active ] && [ ! -e "$ROOT/run/docker.sock" ] && [ ! -e "$ROOT/var/run/docker.sock" ]; then
			echo "docker is ${docker_state:-unknown} and there is no docker socket: no containers to collect"
		else
			return 1
		fi
		;;
	*) return 1 ;;
	esac
}

# absent_reason NAME: NAME's line of ND_ABSENT.
absent_reason() {
	printf '%s\n' "$ND_ABSENT" | awk -F'|' -v c="$1" '$1 == c { print $2; found = 1 } END { exit !found }'
}

# netdata_waiting NAME...: whether a NAME whose subject is here has no charts yet.
netdata_waiting() {
	for c; do
		[ "$(collector_charts "$c")" -gt 0 ] && continue
		absent_reason "$c" >/dev/null && continue
		return 0
	done
	return 1
}

# netdata_poll URL WAIT NAME...: asks URL/api/v1/charts every second until
# every NAME whose subject is here has charts or WAIT seconds passed, one
# bound for all. Sets ND_SOURCES, and ND_ANSWERED when Netdata answered.
netdata_poll() {
	nd_deadline=$(($(date +%s) + $2))
	nd_api=$1/api/v1/charts
	shift 2
	while :; do
		if nd_json=$(http_get "$nd_api" 2>/dev/null); then
			ND_ANSWERED=1
			ND_SOURCES=$(printf '%s' "$nd_json" | netdata_chart_sources)
		fi
		netdata_waiting "$@" || return 0
		[ "$(date +%s)" -le "$nd_deadline" ] || return 0
		sleep 1
	done
}

# check_netdata_collectors URL WAIT NAME...: a netdata-collector:NAME line
# for each collector.
check_netdata_collectors() {
	nd_url=$1 nd_wait=$2
	shift 2
	ND_SOURCES='' ND_ANSWERED='' ND_ABSENT=''
	if [ "$LIVE" = 0 ]; then
		for c; do needs_host "netdata-collector:$c"; done
		return
	elif ! command -v curl >/dev/null 2>&1 && ! command -v wget >/dev/null 2>&1; then
		for c; do result WARN "netdata-collector:$c" "neither curl nor wget to ask Netdata at $nd_url"; done
		return
	fi
	for c; do
		if reason=$(collector_absent "$c"); then
			ND_ABSENT="$ND_ABSENT$c|$reason
"
		fi
	done
	netdata_poll "$nd_url" "$nd_wait" "$@"
	for c; do report_collector "$c"; done
}

# report_collector NAME: its line. Missing charts FAIL on bare-metal; on
# slice they WARN, Netdata being ops telemetry there, no slice-readiness
# dependency.
report_collector() {
	n=$(collector_charts "$1")
	if [ "$n" -gt 0 ]; then
		result PASS "netdata-collector:$1" "$n charts at $nd_url"
		return
	elif reason=$(absent_reason "$1"); then
		result WARN "netdata-collector:$1" "no charts: $reason"
		return
	elif [ -z "$ND_ANSWERED" ]; then
		why="Netdata did not answer at $nd_url/api/v1/charts within ${nd_wait}s"
		fix="systemctl status netdata and journalctl -u netdata; check 'bind to' in /etc/netdata/netdata.conf"
	else
		why="no $1 charts at $nd_url after ${nd_wait}s"
		fix="check that $1 is enabled (netdata.conf [plugins] for a plugin, go.d.conf for a go.d module) and read Netdata's collector log (journalctl -u netdata)"
	fi
	if [ "$PROFILE" = slice ]; then
		result WARN "netdata-collector:$1" "$why (Netdata is no slice-readiness dependency)"
	else
		result FAIL "netdata-collector:$1" "$why" "$fix"
	fi
}
`

// shConverged holds the checks of a profile's runtime baseline after the
// site bootstrap.
const shConverged = `# check_done_marker PATH BUNDLE [ENTRYPOINT]: the bootstrap done-marker
# BUNDLE writes when it completes.
check_done_marker() {
	check=done-marker:${1##*/}
	if [ -e "$ROOT$1" ]; then
		result PASS "$check" "present"
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
`
