# Mellanox DOCA/OFED, best effort. Disabled by default: OFED DKMS packages can
# make curtin fail its kernel/initramfs post-install at deploy; prefer the
# site-bootstrap bundle for node-specific OFED until the artifact is validated.

variable "enabled" {
  type    = bool
  default = false
}

variable "repo_uri" {
  type    = string
  default = "https://linux.mellanox.com/public/repo/doca/latest/ubuntu24.04/x86_64/"
}

variable "key_url" {
  type    = string
  default = "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub"
}

description = "Mellanox DOCA/OFED (best effort)"
enabled     = var.enabled

apt_repository "doca" {
  uri   = var.repo_uri
  suite = "/"
  key   = var.key_url
}

optional_packages = ["doca-ofed", "mlnx-fw-updater"]
