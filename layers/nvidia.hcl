# NVIDIA host driver utilities from the Ubuntu archive (precompiled, signed
# modules: no DKMS build at deploy), plus the best-effort NVIDIA tools from
# NVIDIA's repositories when they are enabled.

variable "driver_branch" {
  type        = string
  default     = "570"
  description = "NVIDIA server driver branch."
}

variable "enable_repos" {
  type        = bool
  default     = true
  description = "Add NVIDIA's CUDA and container-toolkit repositories."
}

variable "cuda_repo_uri" {
  type    = string
  default = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
}

variable "container_toolkit_repo_uri" {
  type    = string
  default = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"
}

description = "NVIDIA driver utilities, container runtime, DCGM, fabric manager"

apt_repository "nvidia-cuda" {
  uri     = var.cuda_repo_uri
  suite   = "/"
  key     = "${var.cuda_repo_uri}3bf863cc.pub"
  enabled = var.enable_repos
}

apt_repository "nvidia-container-toolkit" {
  uri     = var.container_toolkit_repo_uri
  suite   = "/"
  key     = "https://nvidia.github.io/libnvidia-container/gpgkey"
  enabled = var.enable_repos
}

packages = [
  "nvidia-utils-${var.driver_branch}-server",
  "nvidia-headless-no-dkms-${var.driver_branch}-server-open",
  "linux-modules-nvidia-${var.driver_branch}-server-open-generic",
]

optional_packages = [
  "nvidia-container-toolkit",
  "datacenter-gpu-manager",
  "nvidia-fabricmanager-${var.driver_branch}",
  "libnvidia-nscq-${var.driver_branch}",
]

# Configure Docker's NVIDIA runtime when the toolkit made it in.
run = [
  "if command -v nvidia-ctk >/dev/null 2>&1; then nvidia-ctk runtime configure --runtime=docker; fi",
]
