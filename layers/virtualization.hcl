# The slice runtime: libvirt/QEMU/OVMF and cloud image tools for slice
# guests, Open vSwitch, dnsmasq and iptables/nftables for slice networking.
# GPU binding, bridges and VFs stay first-boot work of the site bootstrap.

variable "qemu_package" {
  type        = string
  default     = "qemu-kvm"
  description = "QEMU with KVM: Ubuntu's qemu-kvm; Debian 12 calls it qemu-system-x86."
}

description = "Slice runtime: libvirt, QEMU, OVMF, Open vSwitch, dnsmasq"

packages = [
  var.qemu_package,
  "qemu-utils",
  "libvirt-daemon-system",
  "libvirt-clients",
  "virtinst",
  "ovmf",
  "cloud-image-utils",
  "genisoimage",
  "openvswitch-switch",
  "dnsmasq",
  "iptables",
  "nftables",
  "bridge-utils",
]

optional_packages = ["driverctl"]

# VFIO modules load at boot; which devices bind to them is decided on the host.
file "/etc/modules-load.d/gpuaas-vfio.conf" {
  content = "vfio\nvfio_iommu_type1\nvfio_pci\n"
  mode    = "0644"
}

services {
  enable = ["libvirtd", "openvswitch-switch"]
  # The site bootstrap writes gpu_subnet.conf and starts dnsmasq; until then
  # it must not fight systemd-resolved for port 53.
  disable = ["dnsmasq"]
}
