#!/bin/sh
# Demo site bootstrap, staged into the image by examples/demo.hcl. Like the
# H200 bootstraps it runs at first boot, skips its package phase in a
# prebaked image, and records that it converged.
set -eu

state_dir=/var/lib/gpuaas/site-bootstrap
marker=/etc/imagectl/build.json
here=$(dirname "$0")

. "$here/lib/common.sh"

if [ ! -f "$marker" ]; then
	log "no image build marker at $marker: not a prebaked image"
	exit 1
fi
if [ "${GPUAAS_SLICE_INSTALL_PACKAGES:-0}" != "0" ]; then
	log "package phase requested, but this image has its packages baked in"
fi
mkdir -p "$state_dir"
date -u +%Y-%m-%dT%H:%M:%SZ >"$state_dir/demo.done"
log "converged"
