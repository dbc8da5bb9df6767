# A small real image: the Debian bookworm base disk the project builds for
# its tests (make base-image), customized with a reused layer file, an inline
# layer, kernel args, Netdata, the bounded wait-online and a site-bootstrap
# bundle. `make demo` builds it on a fresh machine, passing the base image
# and its checksum in the var file make base-image writes beside it.

variable "base_image" {
  type        = string
  description = "The Debian base disk built by make base-image."
}

variable "base_checksum" {
  type        = string
  description = "sha256 of base_image."

  validation {
    condition     = can(regex("^sha256:[0-9a-f]{64}$", var.base_checksum))
    error_message = "base_checksum must be sha256:<64 hex digits>."
  }
}

variable "version" {
  type    = string
  default = "0.1.0"
}

variable "enable_netdata" {
  type    = bool
  default = true
}

variable "netdata_retention_mb" {
  type        = number
  default     = 64
  description = "Netdata's dbengine disk space, in MiB."
}

variable "extra_packages" {
  type        = list(string)
  default     = []
  description = "More packages, in a layer of their own after the others (-var extra_packages=tree,ncdu)."
}

locals {
  tools = ["jq", "less", "curl"]
}

image "imagectl-demo" {
  title        = "imagectl demo (Debian 12)"
  version      = var.version
  architecture = "amd64/generic"

  base {
    source   = var.base_image
    checksum = var.base_checksum
    format   = "qcow2"
    size     = "4G"
  }

  layer "tools" {
    description       = "Operator tools"
    packages          = local.tools
    optional_packages = ["htop", "no-such-package-imagectl-demo"]

    file "/etc/motd" {
      content = "imagectl demo image ${var.version}\n"
      mode    = "0644"
    }

    file "/usr/local/bin/demo-hello" {
      template = "templates/hello.sh.tmpl"
      vars     = { image = "imagectl-demo", version = var.version }
      mode     = "0755"
    }

    run = ["install -d -m 0750 /var/lib/imagectl-demo"]
  }

  layer "netdata" {
    source    = "../layers/netdata.hcl"
    variables = { enabled = var.enable_netdata }
  }

  layer "extras" {
    description = "Packages added at build time (-var extra_packages=tree,ncdu)"
    enabled     = length(var.extra_packages) > 0
    packages    = var.extra_packages
  }

  kernel {
    args = ["intel_iommu=on", "iommu=pt"]
  }

  netdata {
    enabled      = var.enable_netdata
    bind         = "127.0.0.1:19998"
    retention_mb = var.netdata_retention_mb
    update_every = 5
    collectors   = ["cgroups", "apps"]
  }

  network {
    wait_online_timeout = "20s"
    wait_online_any     = true
  }

  bundle "demo" {
    source     = "site-bootstrap/demo"
    entrypoint = "bootstrap.sh"
  }

  artifact {
    directory         = "../artifacts"
    compression_level = 6
  }

  validation {
    services_active = ["netdata"]
    files_exist     = ["/usr/local/bin/demo-hello"]

    check "hello" {
      command = "/usr/local/bin/demo-hello"
    }
  }
}
