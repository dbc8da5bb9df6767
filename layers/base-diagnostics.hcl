# cloud-init and the diagnostics every H200 host carries.

description = "Base diagnostics"

packages = [
  "ca-certificates",
  "curl",
  "gnupg",
  "jq",
  "htop",
  "iotop",
  "sysstat",
  "lsof",
  "strace",
  "tcpdump",
  "ethtool",
  "pciutils",
  "usbutils",
  "dmidecode",
  "lshw",
  "smartmontools",
  "nvme-cli",
  "numactl",
  "hwloc",
  "chrony",
  "rsync",
  "tmux",
]

services {
  enable = ["sysstat"]
}
