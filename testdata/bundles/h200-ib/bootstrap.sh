#!/bin/sh
# Test bundle: a small, real H200/IB site bootstrap for the Debian stand-in
# of the H200 image. It does what the runbook's h200-ib bootstrap does on a
# prebaked image, minus the hardware: checks the image's build marker, skips
# the package phase, writes the IPoIB netplan for the fabric ports, installs
# and starts the node agent, and records completion (h200-ib.done), which
# the converged validation gates on.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/log.sh
. "$here/lib/log.sh"
# shellcheck source=site.conf
. "$here/site.conf"

marker=/etc/gpuaas/maas-host-image-build.json
state=${GPUAAS_BOOTSTRAP_STATE_DIR:-/var/lib/gpuaas/site-bootstrap}

[ -f "$marker" ] || die "missing image build marker $marker"
# A prebaked image has the packages: this test bundle has no package phase.
log "prebaked image: package phase skipped"

# IPoIB: the netplan file that claims the fabric ports (a real site's
# bundle renders each port's address into it; a host without InfiniBand
# has no port matching it).
mkdir -p /etc/netplan
cat >/etc/netplan/60-ipoib.yaml <<NETPLAN
# Written by the h200-ib site bootstrap.
network:
  version: 2
  ethernets:
    ipoib0:
      match:
        name: "$FABRIC_INTERFACE"
      dhcp4: false
      optional: true
NETPLAN
chmod 600 /etc/netplan/60-ipoib.yaml

install -m 0755 "$here/bin/gpuaas-node-agent" /usr/local/sbin/gpuaas-node-agent
cat >/etc/systemd/system/gpuaas-node-agent.service <<UNIT
[Unit]
Description=GPUaaS node agent (test stand-in)
After=network-online.target

[Service]
ExecStart=/usr/local/sbin/gpuaas-node-agent
Restart=on-failure

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now gpuaas-node-agent.service

mkdir -p "$state"
: >"$state/h200-ib.done"
log "h200-ib baseline converged"
