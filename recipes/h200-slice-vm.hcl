# GPUaaS H200 slice-capable host image (Ubuntu 24.04): the H200/IB baseline of
# h200.hcl composed with the slice runtime layer (libvirt, QEMU, OVMF, Open
# vSwitch, dnsmasq) and both site-bootstrap bundles, since the slice bootstrap
# runs the embedded H200/IB baseline first. See shared/context 001 and 004. Every override the old pipeline took as GPUAAS_MAAS_HOST_IMAGE_*
# is a variable here, settable with -var, a var file or IMAGECTL_VAR_<name>.

variable "version" {
  type        = string
  default     = ""
  description = "Image version; empty means the build generates one (date.time)."
}

variable "base_url" {
  type        = string
  default     = "https://cloud-images.ubuntu.com/noble/20250805/noble-server-cloudimg-amd64.img"
  description = "Source Ubuntu cloud image (GPUAAS_MAAS_HOST_IMAGE_BASE_URL)."
}

variable "base_checksum" {
  type        = string
  default     = "sha256:834af9cd766d1fd86eca156db7dff34c3713fbbc7f5507a3269be2a72d2d1820"
  description = "sha256 of the base image; change it with base_url."
}

variable "size" {
  type        = string
  default     = "80G"
  description = "Expanded image size (GPUAAS_MAAS_HOST_IMAGE_SIZE)."
}

variable "install_packages" {
  type        = list(string)
  default     = []
  description = "Extra required packages, comma-separated from the environment (GPUAAS_MAAS_HOST_IMAGE_INSTALL_PACKAGES)."
}

variable "optional_packages" {
  type        = list(string)
  default     = []
  description = "Extra best-effort packages: missing ones are recorded, not fatal (GPUAAS_MAAS_HOST_IMAGE_OPTIONAL_PACKAGES)."
}

variable "enable_nvidia_repos" {
  type        = bool
  default     = true
  description = "Add NVIDIA's package repositories (GPUAAS_MAAS_HOST_IMAGE_ENABLE_NVIDIA_REPOS)."
}

variable "nvidia_driver_branch" {
  type        = string
  default     = "570"
  description = "NVIDIA server driver branch."
}

variable "enable_doca_repos" {
  type        = bool
  default     = false
  description = "Add the DOCA repository and try doca-ofed/mlnx-fw-updater (GPUAAS_MAAS_HOST_IMAGE_ENABLE_DOCA_REPOS)."
}

variable "doca_key_url" {
  type        = string
  default     = "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub"
  description = "DOCA repository signing key (GPUAAS_MAAS_HOST_IMAGE_DOCA_KEY_URL)."
}

variable "doca_repo_url" {
  type        = string
  default     = "https://linux.mellanox.com/public/repo/doca/latest/ubuntu24.04/x86_64/"
  description = "DOCA Ubuntu 24.04 repository (GPUAAS_MAAS_HOST_IMAGE_DOCA_REPO_URL)."
}

variable "enable_netdata" {
  type        = bool
  default     = true
  description = "Install and configure Netdata (GPUAAS_MAAS_HOST_IMAGE_ENABLE_NETDATA)."
}

variable "netdata_retention_mb" {
  type        = number
  default     = 256
  description = "Netdata dbengine disk budget in MB (GPUAAS_MAAS_HOST_IMAGE_NETDATA_RETENTION_MB)."
}

variable "netdata_bind" {
  type        = string
  default     = "127.0.0.1:19998"
  description = "Netdata bind address; site bootstrap adds the nginx edge on :19999 (GPUAAS_MAAS_HOST_IMAGE_NETDATA_BIND)."
}

variable "slice_kernel_args" {
  type        = string
  default     = "intel_iommu=on iommu=pt"
  description = "Kernel args for slice passthrough, space-separated (GPUAAS_MAAS_HOST_IMAGE_SLICE_KERNEL_ARGS)."
}

variable "maas_profile" {
  type        = string
  default     = ""
  description = "Default MAAS site for upload and promotion (GPUAAS_MAAS_HOST_IMAGE_MAAS_PROFILE)."
}

variable "maas_name" {
  type        = string
  default     = "custom/gpuaas-h200-slice-host-ubuntu2404"
  description = "MAAS boot resource name (GPUAAS_MAAS_HOST_IMAGE_MAAS_NAME)."
}

variable "maas_filetype" {
  type        = string
  default     = "tgz"
  description = "MAAS file type (GPUAAS_MAAS_HOST_IMAGE_MAAS_FILETYPE); imagectl builds tgz."
}

variable "maas_base_image" {
  type        = string
  default     = "ubuntu/noble"
  description = "MAAS base image (GPUAAS_MAAS_HOST_IMAGE_MAAS_BASE_IMAGE)."
}

variable "artifact_dir" {
  type        = string
  default     = "artifacts"
  description = "Where the build writes its artifacts (GPUAAS_MAAS_HOST_IMAGE_UPLOAD_STAGING_DIR)."
}

variable "sign_key" {
  type        = string
  default     = ""
  description = "cosign private key that signs the artifact; empty leaves it unsigned."
}

variable "bundle_h200_ib" {
  type        = string
  default     = "site-bootstrap/h200-ib"
  description = "Directory or tarball of the h200-ib site-bootstrap bundle."
}

variable "bundle_h200_slice_vm" {
  type        = string
  default     = "site-bootstrap/h200-slice-vm"
  description = "Directory or tarball of the h200-slice-vm site-bootstrap bundle."
}

variable "wait_online_timeout" {
  type        = string
  default     = "30s"
  description = "Bound on systemd-networkd-wait-online at boot."
}

image "gpuaas-h200-slice-host-ubuntu2404" {
  title        = "GPUaaS H200 Slice Host Ubuntu 24.04"
  version      = var.version
  architecture = "amd64/generic"
  build_marker = "/etc/gpuaas/maas-host-image-build.json"

  base {
    source   = var.base_url
    checksum = var.base_checksum
    format   = "qcow2"
    size     = var.size
  }

  layer "maas-deployable" {
    source = "../layers/maas-deployable.hcl"
  }

  layer "base-diagnostics" {
    source = "../layers/base-diagnostics.hcl"
  }

  layer "docker" {
    source = "../layers/docker.hcl"
  }

  layer "nvidia" {
    source    = "../layers/nvidia.hcl"
    variables = { driver_branch = var.nvidia_driver_branch, enable_repos = var.enable_nvidia_repos }
  }

  layer "rdma" {
    source = "../layers/rdma.hcl"
  }

  layer "slice-runtime" {
    source = "../layers/virtualization.hcl"
  }

  layer "site-bootstrap-packages" {
    source = "../layers/site-bootstrap.hcl"
  }

  layer "netdata" {
    source    = "../layers/netdata.hcl"
    variables = { enabled = var.enable_netdata }
  }

  layer "doca" {
    source    = "../layers/doca.hcl"
    variables = { enabled = var.enable_doca_repos, repo_uri = var.doca_repo_url, key_url = var.doca_key_url }
  }

  layer "site-extra" {
    description       = "Packages added by the site (install_packages, optional_packages)"
    enabled           = length(var.install_packages) + length(var.optional_packages) > 0
    packages          = var.install_packages
    optional_packages = var.optional_packages
  }

  kernel {
    args = compact(split(" ", var.slice_kernel_args))
  }

  netdata {
    enabled      = var.enable_netdata
    bind         = var.netdata_bind
    retention_mb = var.netdata_retention_mb
    update_every = 5
    collectors   = ["nvidia_smi", "docker", "cgroups"]
  }

  network {
    wait_online_timeout = var.wait_online_timeout
    wait_online_any     = true
  }

  bundle "h200-ib" {
    source = var.bundle_h200_ib
  }

  bundle "h200-slice-vm" {
    source = var.bundle_h200_slice_vm
  }

  artifact {
    directory         = var.artifact_dir
    compression_level = 6
    sign_key          = var.sign_key != "" ? var.sign_key : null
  }

  maas {
    name       = var.maas_name
    title      = "GPUaaS H200 Slice Host Ubuntu 24.04"
    filetype   = var.maas_filetype
    base_image = var.maas_base_image
    site       = var.maas_profile != "" ? var.maas_profile : null
  }

  validation {
    script          = "/usr/local/sbin/gpuaas-h200-slice-host-image-validate.sh"
    services_active = ["docker", "containerd", "libvirtd", "openvswitch-switch"]
    files_exist = [
      "/usr/local/share/gpuaas/site-bootstrap/h200-ib",
      "/usr/local/share/gpuaas/site-bootstrap/h200-slice-vm",
      "/usr/share/OVMF/OVMF_CODE_4M.fd",
    ]

    check "docker-compose" {
      command = "docker compose version"
    }

    # Host NVML can be unavailable once GPUs are bound for passthrough, so a
    # slice host checks the runtime, not nvidia-smi.
    check "virsh" {
      command = "virsh --connect qemu:///system version"
    }

    check "ovs-vsctl" {
      command = "ovs-vsctl --version"
    }
  }
}
