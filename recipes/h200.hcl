# GPUaaS H200 host image (Ubuntu 24.04), for bare-metal and slice-capable
# H200 hosts alike: the heavy, static work of first boot baked in, and both
# site-bootstrap bundles staged, since the slice bootstrap runs the H200/IB
# baseline first. See shared/context 001 (MAAS H200 Host Image Pipeline
# Runbook) and 004 (GPU slice node bootstrap). Every override the old
# pipeline took as GPUAAS_MAAS_HOST_IMAGE_* is a variable here (its
# legacy_env), set with -var, a var file or IMAGECTL_VAR_<name>; imagectl
# warns when the old variable is set.
#
# The bundles come from the operators' infra checkout:
#
#   imagectl build recipes/h200.hcl \
#     -var site_bootstrap_dir=/srv/infra/env/maas/site-bootstrap
#
# Without it, imagectl build recipes/h200.hcl --dry-run shows the plan with
# the bundles unresolved.

variable "version" {
  type        = string
  default     = ""
  description = "Image version; empty means the build generates one (date.time)."
}

variable "base_url" {
  type        = string
  default     = "https://cloud-images.ubuntu.com/noble/20250805/noble-server-cloudimg-amd64.img"
  description = "Source Ubuntu cloud image."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_BASE_URL"
}

variable "base_checksum" {
  type        = string
  default     = "sha256:834af9cd766d1fd86eca156db7dff34c3713fbbc7f5507a3269be2a72d2d1820"
  description = "sha256 of the base image; change it with base_url."
}

variable "size" {
  type        = string
  default     = "80G"
  description = "Expanded image size."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_SIZE"
}

variable "install_packages" {
  type        = list(string)
  default     = []
  description = "Extra required packages, comma-separated from the environment."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_INSTALL_PACKAGES"
}

variable "optional_packages" {
  type        = list(string)
  default     = []
  description = "Extra best-effort packages: missing ones are recorded, not fatal."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_OPTIONAL_PACKAGES"
}

variable "enable_nvidia_repos" {
  type        = bool
  default     = true
  description = "Add NVIDIA's package repositories."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_ENABLE_NVIDIA_REPOS"
}

variable "nvidia_driver_branch" {
  type        = string
  default     = "580"
  description = "NVIDIA server driver branch."
}

variable "enable_doca_repos" {
  type        = bool
  default     = false
  description = "Add the DOCA repository and try doca-ofed/mlnx-fw-updater."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_ENABLE_DOCA_REPOS"
}

variable "doca_key_url" {
  type        = string
  default     = "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub"
  description = "DOCA repository signing key."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_DOCA_KEY_URL"
}

variable "doca_repo_url" {
  type        = string
  default     = "https://linux.mellanox.com/public/repo/doca/latest/ubuntu24.04/x86_64/"
  description = "DOCA Ubuntu 24.04 repository."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_DOCA_REPO_URL"
}

variable "enable_netdata" {
  type        = bool
  default     = true
  description = "Install and configure Netdata."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_ENABLE_NETDATA"
}

variable "netdata_retention_mb" {
  type        = number
  default     = 256
  description = "Netdata dbengine disk budget in MB."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_NETDATA_RETENTION_MB"
}

variable "netdata_bind" {
  type        = string
  default     = "127.0.0.1:19998"
  description = "Netdata bind address; site bootstrap adds the nginx edge on :19999."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_NETDATA_BIND"
}

variable "slice_kernel_args" {
  type        = string
  default     = "intel_iommu=on iommu=pt"
  description = "Kernel args for slice passthrough, space-separated."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_SLICE_KERNEL_ARGS"
}

variable "maas_profile" {
  type        = string
  default     = ""
  description = "Default MAAS site for upload and promotion."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_MAAS_PROFILE"
}

variable "maas_name" {
  type        = string
  default     = "custom/gpuaas-h200-host-ubuntu2404"
  description = "MAAS boot resource name."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_MAAS_NAME"
}

variable "maas_filetype" {
  type        = string
  default     = "tgz"
  description = "MAAS file type; imagectl builds tgz."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_MAAS_FILETYPE"
}

variable "maas_base_image" {
  type        = string
  default     = "ubuntu/noble"
  description = "MAAS base image."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_MAAS_BASE_IMAGE"
}

variable "artifact_dir" {
  type        = string
  default     = "artifacts"
  description = "Where the build writes its artifacts."
  legacy_env  = "GPUAAS_MAAS_HOST_IMAGE_UPLOAD_STAGING_DIR"
}

variable "sign_key" {
  type        = string
  default     = ""
  description = "cosign private key that signs the artifact; empty leaves it unsigned."
}

variable "site_bootstrap_dir" {
  type        = string
  description = "The infra checkout's env/maas/site-bootstrap directory, holding h200-ib/ and h200-slice-vm/ (relative to the working directory)."
}

variable "netdata_repository" {
  type        = string
  default     = "netdata"
  description = "Where Netdata comes from: \"netdata\" (its own repository, with go.d.plugin for the nvidia_smi and docker collectors) or \"distribution\"."
}

variable "gpu_model" {
  type        = string
  default     = "H200"
  description = "Part of nvidia-smi's name every GPU must have."
}

variable "gpu_count" {
  type        = number
  default     = 8
  description = "GPUs per host."
}

variable "nvswitch" {
  type        = bool
  default     = true
  description = "The hosts have NVSwitch (HGX H200): nvidia-fabricmanager must be active on bare metal."
}

variable "fabric_interface" {
  type        = string
  default     = "ibp*"
  description = "Shell pattern of the IPoIB fabric interfaces."
}

variable "fabric_subnet" {
  type        = string
  default     = "192.168.0.0/16"
  description = "The site's IPoIB fabric subnet: a fabric interface's address and route lie in it."
}

variable "slice_bridge" {
  type        = string
  default     = "ovsbr0"
  description = "The Open vSwitch bridge of the slice network."
}

variable "slice_bridge_address" {
  type        = string
  default     = "10.100.0.1/24"
  description = "The slice bridge's address, with its prefix length."
}

variable "slice_dhcp_subnet_file" {
  type        = string
  default     = "/etc/dnsmasq.d/gpu_subnet.conf"
  description = "dnsmasq's configuration for the slice subnet, written by the slice bootstrap."
}

variable "bootstrap_state_dir" {
  type        = string
  default     = "/var/lib/gpuaas/site-bootstrap"
  description = "Where the site bootstraps leave their done-markers (<bundle>.done)."
}

variable "wait_online_timeout" {
  type        = string
  default     = "30s"
  description = "Bound on systemd-networkd-wait-online at boot."
}

image "gpuaas-h200-host-ubuntu2404" {
  title        = "GPUaaS H200 Host Ubuntu 24.04"
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

  layer "site-bootstrap-packages" {
    source = "../layers/site-bootstrap.hcl"
  }

  layer "slice-runtime" {
    source = "../layers/virtualization.hcl"
  }

  layer "netdata" {
    source    = "../layers/netdata.hcl"
    variables = { enabled = var.enable_netdata, repository = var.netdata_repository }
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
    source     = "${var.site_bootstrap_dir}/h200-ib"
    entrypoint = "bootstrap.sh"
  }

  bundle "h200-slice-vm" {
    source     = "${var.site_bootstrap_dir}/h200-slice-vm"
    entrypoint = "bootstrap.sh"
  }

  artifact {
    directory         = var.artifact_dir
    compression_level = 6
    sign_key          = var.sign_key != "" ? var.sign_key : null
  }

  maas {
    name       = var.maas_name
    title      = "GPUaaS H200 Host Ubuntu 24.04"
    filetype   = var.maas_filetype
    base_image = var.maas_base_image
    site       = var.maas_profile != "" ? var.maas_profile : null
  }

  validation {
    script          = "/usr/local/sbin/gpuaas-h200-host-image-validate.sh"
    default_profile = "bare-metal"
    default_stage   = "image"
    services_active = ["docker", "containerd"]
    files_exist = [
      "/usr/local/share/gpuaas/site-bootstrap/h200-ib/bootstrap.sh",
      "/usr/local/share/gpuaas/site-bootstrap/h200-slice-vm/bootstrap.sh",
    ]

    check "docker-compose" {
      command = "docker compose version"
    }

    gpu {
      model            = var.gpu_model
      count            = var.gpu_count
      driver_branch    = var.nvidia_driver_branch
      persistence_mode = true
      ecc              = true
      nvswitch         = var.nvswitch
    }

    profile "bare-metal" {
      bootstrap = "h200-ib"

      converged {
        services_active = ["gpuaas-node-agent", "docker"]
        done_markers    = ["${var.bootstrap_state_dir}/h200-ib.done"]
      }
    }

    profile "slice" {
      services_active = ["libvirtd", "openvswitch-switch"]
      vfio_modules    = ["vfio", "vfio_iommu_type1", "vfio_pci"]
      bootstrap       = "h200-slice-vm"
      bootstrap_env   = { GPUAAS_SLICE_INSTALL_PACKAGES = "0" }

      converged {
        services_active = [
          "gpuaas-node-agent",
          "gpuaas-slice-fabric-vfs",
          "gpuaas-slice-vfio-devices",
          "gpuaas-slice-network-baseline",
          "gpuaas-slice-ovs-bridge",
          "libvirtd",
        ]
        done_markers = [
          "${var.bootstrap_state_dir}/h200-ib.done",
          "${var.bootstrap_state_dir}/h200-slice-vm.done",
        ]

        fabric {
          netplan   = "/etc/netplan/60-ipoib.yaml"
          interface = var.fabric_interface
          subnet    = var.fabric_subnet
        }

        bridge {
          name    = var.slice_bridge
          address = var.slice_bridge_address
        }

        dhcp {
          service     = "dnsmasq"
          subnet_file = var.slice_dhcp_subnet_file
        }
      }
    }
  }
}
