# What a tgz needs to deploy through MAAS/curtin without reaching an archive
# (shared/reference/curtin-tgz-deploy.md): a generic kernel in place of the
# cloud image's virtual one, the UEFI grub/shim/efibootmgr packages curtin
# would otherwise install at deploy time, and cloud-init and netplan kept.

variable "kernel_package" {
  type        = string
  default     = "linux-generic"
  description = "Kernel metapackage for bare metal; curtin installs linux-generic at deploy when it is missing."
}

variable "purge_packages" {
  type        = list(string)
  default     = ["linux-virtual", "linux-image-virtual", "linux-headers-virtual"]
  description = "The cloud image's kernel metapackages, purged so GRUB boots the generic kernel."
}

description = "MAAS deployability: generic kernel, UEFI boot packages, cloud-init, netplan"

packages = [
  var.kernel_package,
  "grub-efi-amd64",
  "grub-efi-amd64-signed",
  "shim-signed",
  "efibootmgr",
  "e2fsprogs",
  "initramfs-tools",
  "cloud-init",
  "netplan.io",
  "lsb-release",
]

run = [
  "apt-get purge -y ${join(" ", var.purge_packages)}",
]
