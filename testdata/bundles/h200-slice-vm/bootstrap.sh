#!/bin/sh
# Test bundle: a small, real slice-host site bootstrap for the Debian
# stand-in of the H200 image. As the runbook's h200-slice-vm bootstrap does,
# it first runs the embedded H200/IB baseline when that has not run, then
# converges the slice runtime: VFIO modules, the fabric-VF and VFIO-device
# units (no hardware to bind here: they record that and stay active), the
# slice network baseline (IP forwarding, NAT for the slice subnet), the Open
# vSwitch bridge with its address, dnsmasq with the slice subnet, libvirtd,
# and its done-marker.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/log.sh
. "$here/lib/log.sh"
# shellcheck source=site.conf
. "$here/site.conf"

state=${GPUAAS_BOOTSTRAP_STATE_DIR:-/var/lib/gpuaas/site-bootstrap}
ib=$here/../h200-ib/bootstrap.sh

if [ ! -f "$state/h200-ib.done" ]; then
	[ -x "$ib" ] || die "the H200/IB baseline $ib is not in the image"
	log "running the H200/IB baseline first"
	"$ib"
fi

for m in vfio vfio_iommu_type1 vfio_pci; do
	modprobe "$m" || die "cannot load $m"
done

# oneshot NAME DESCRIPTION COMMAND writes COMMAND as a script and a oneshot
# unit running it that stays active once it ran.
oneshot() {
	mkdir -p /usr/local/lib/gpuaas-slice
	printf '#!/bin/sh\nset -eu\n%s\n' "$3" >"/usr/local/lib/gpuaas-slice/$1.sh"
	chmod 0755 "/usr/local/lib/gpuaas-slice/$1.sh"
	cat >"/etc/systemd/system/$1.service" <<UNIT
[Unit]
Description=$2
After=network.target openvswitch-switch.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/lib/gpuaas-slice/$1.sh

[Install]
WantedBy=multi-user.target
UNIT
}

# shellcheck disable=SC2016 # expanded by the unit's script, not here
oneshot gpuaas-slice-fabric-vfs "GPUaaS slice fabric VFs" \
	'n=$(cat /sys/class/infiniband/*/device/sriov_totalvfs 2>/dev/null | head -n 1); echo "fabric VFs: ${n:-no SR-IOV fabric device}"'
# shellcheck disable=SC2016
oneshot gpuaas-slice-vfio-devices "GPUaaS slice VFIO devices" \
	'echo "GPUs for passthrough: $(ls /sys/bus/pci/drivers/vfio-pci 2>/dev/null | grep -c : || true)"'
oneshot gpuaas-slice-network-baseline "GPUaaS slice network baseline" \
	"sysctl -qw net.ipv4.ip_forward=1 && { iptables -t nat -C POSTROUTING -s $SLICE_SUBNET -j MASQUERADE 2>/dev/null || iptables -t nat -A POSTROUTING -s $SLICE_SUBNET -j MASQUERADE; }"
bridge="ovs-vsctl --may-exist add-br $SLICE_BRIDGE && ip link set $SLICE_BRIDGE up"
if [ -n "$SLICE_BRIDGE_ADDRESS" ]; then
	bridge="$bridge && ip addr replace $SLICE_BRIDGE_ADDRESS dev $SLICE_BRIDGE"
fi
oneshot gpuaas-slice-ovs-bridge "GPUaaS slice OVS bridge" "$bridge"

mkdir -p "$(dirname "$SLICE_DHCP_CONF")"
cat >"$SLICE_DHCP_CONF" <<CONF
# Written by the h200-slice-vm site bootstrap: DHCP for slice VMs only.
port=0
interface=$SLICE_BRIDGE
bind-dynamic
dhcp-range=$SLICE_DHCP_RANGE
CONF

systemctl daemon-reload
for unit in gpuaas-slice-fabric-vfs gpuaas-slice-vfio-devices gpuaas-slice-network-baseline gpuaas-slice-ovs-bridge; do
	systemctl enable "$unit.service"
	systemctl restart "$unit.service" || die "$unit did not start"
done
systemctl enable dnsmasq.service
systemctl restart dnsmasq.service || die "dnsmasq did not start"
systemctl enable --now libvirtd.service

mkdir -p "$state"
: >"$state/h200-slice-vm.done"
log "slice baseline converged"
