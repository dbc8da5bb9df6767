# Debian stand-in of recipes/h200.hcl, built and smoke-booted by make test:
# Ubuntu's archive and cloud images are out of reach of CI, so this builds
# the project's Debian 12 base disk (make base-image) with the H200 recipe's
# layer files for what the boot proves (Docker, the slice runtime, Netdata;
# Debian's package names passed where they differ), the same kernel args,
# bounded wait-online, both site-bootstrap bundles (small real test bundles
# under bundles/, whose bootstrap converges a slice baseline in the VM) and
# the same validation: both profiles, both stages.
#
# Left out: the NVIDIA, DOCA and MAAS-deployability layers (Ubuntu-only
# archives and kernels; the base disk already boots as MAAS deploys it), the
# package-only layers (base diagnostics, RDMA tools, site-bootstrap
# packages: their names are Debian's too, and every layer test proves
# package installs; they would add minutes under TCG and nothing to the
# boot), Recommends (install_recommends = false: the slice runtime's pull in
# a desktop's worth of QEMU UI libraries, twenty minutes under TCG), and
# go.d collectors (Debian's netdata lacks go.d.plugin). The VM has
# no GPU, InfiniBand, nested KVM or IOMMU: those checks WARN there.

variable "base_image" {
  type        = string
  description = "The Debian base disk built by make base-image."
}

variable "base_checksum" {
  type        = string
  description = "sha256 of base_image."
}

variable "version" {
  type    = string
  default = "0.0.0-debian"
}

variable "site_bootstrap_dir" {
  type        = string
  default     = "bundles"
  description = "The directory holding the h200-ib and h200-slice-vm test bundles."
}

variable "slice_kernel_args" {
  type    = string
  default = "intel_iommu=on iommu=pt"
}

image "gpuaas-h200-host-debian12" {
  title        = "GPUaaS H200 Host (Debian 12 stand-in)"
  version      = var.version
  architecture = "amd64/generic"
  build_marker = "/etc/gpuaas/maas-host-image-build.json"

  base {
    source   = var.base_image
    checksum = var.base_checksum
    format   = "qcow2"
    size     = "6G"
  }

  layer "docker" {
    source             = "../layers/docker.hcl"
    variables          = { compose_package = "docker-compose" }
    install_recommends = false
  }

  layer "slice-runtime" {
    source             = "../layers/virtualization.hcl"
    variables          = { qemu_package = "qemu-system-x86" }
    install_recommends = false
  }

  layer "netdata" {
    source             = "../layers/netdata.hcl"
    variables          = { repository = "distribution" }
    install_recommends = false
  }

  kernel {
    args = compact(split(" ", var.slice_kernel_args))
  }

  netdata {
    bind         = "127.0.0.1:19998"
    retention_mb = 64
    update_every = 5
    collectors   = ["cgroups", "apps"]
  }

  network {
    wait_online_timeout = "30s"
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
    directory = "../artifacts"
  }

  maas {
    name       = "custom/gpuaas-h200-host-debian12"
    base_image = "ubuntu/noble"
  }

  validation {
    script          = "/usr/local/sbin/gpuaas-h200-host-image-validate.sh"
    default_profile = "bare-metal"
    default_stage   = "image"
    collector_wait  = "120s"
    services_active = ["docker", "containerd"]
    files_exist = [
      "/usr/local/share/gpuaas/site-bootstrap/h200-ib/bootstrap.sh",
      "/usr/local/share/gpuaas/site-bootstrap/h200-slice-vm/bootstrap.sh",
    ]

    check "docker-compose" {
      command = "docker-compose version"
    }

    gpu {
      model         = "H200"
      count         = 8
      driver_branch = "580"
      nvswitch      = true
    }

    profile "bare-metal" {
      bootstrap = "h200-ib"

      converged {
        services_active = ["gpuaas-node-agent", "docker"]
        done_markers    = ["/var/lib/gpuaas/site-bootstrap/h200-ib.done"]
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
          "/var/lib/gpuaas/site-bootstrap/h200-ib.done",
          "/var/lib/gpuaas/site-bootstrap/h200-slice-vm.done",
        ]

        fabric {
          netplan   = "/etc/netplan/60-ipoib.yaml"
          interface = "ibp*"
          subnet    = "192.168.0.0/16"
        }

        bridge {
          name    = "ovsbr0"
          address = "10.100.0.1/24"
        }

        dhcp {
          service     = "dnsmasq"
          subnet_file = "/etc/dnsmasq.d/gpu_subnet.conf"
        }
      }
    }
  }
}
