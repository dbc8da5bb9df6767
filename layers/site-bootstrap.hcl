# The H200 site-bootstrap base package set, so first boot skips its package
# phase (GPUAAS_SLICE_INSTALL_PACKAGES=0).

description = "H200 site-bootstrap base packages"

packages = [
  "environment-modules",
  "ipmitool",
  "lldpd",
  "nfs-common",
  "pdsh",
  "lsscsi",
  "sg3-utils",
  "rasdaemon",
  "fio",
]

services {
  enable = ["lldpd"]
}
