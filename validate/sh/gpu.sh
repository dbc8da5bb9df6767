# shellcheck shell=sh
# check_gpu reads the GPUs with nvidia-smi's query interface only (never its
# table): one query for every field the checks need, all of them fields the
# H100 and H200 fixtures answer (validate/testdata/nvidia-smi).
# validate.Script copies what follows this comment into the generated script
# as it is (see validate/scriptlib.go).

GPU_FIELDS=index,name,driver_version,persistence_mode,ecc.mode.current
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
