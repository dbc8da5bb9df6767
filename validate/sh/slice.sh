# shellcheck shell=sh
# The slice profile's prerequisites: KVM, IOMMU groups, VFIO modules.
# validate.Script copies what follows this comment into the generated script
# as it is (see validate/scriptlib.go).

# vm prints the hypervisor when this host is a virtual machine (a smoke
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
