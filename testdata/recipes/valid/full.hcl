# Every block and attribute of the recipe language, valid.

variable "site" {
  type        = string
  default     = "lab"
  description = "Site name."

  validation {
    condition     = length(var.site) > 1
    error_message = "site must have at least two characters."
  }
}

variable "extra_tools" {
  type    = list(string)
  default = ["rsync"]
}

variable "retention" {
  type    = number
  default = 128
}

variable "token" {
  type      = string
  default   = "s3cret"
  sensitive = true
}

variable "disabled_layer" {
  default = false
}

locals {
  title   = format("%s image for %s", upper("full"), local.site_lc)
  site_lc = lower(var.site)
  servers = ["ntp1", "ntp2"]
}

image "full-fixture" {
  title        = local.title
  version      = "1.2.3"
  architecture = "amd64/generic"
  build_marker = "/etc/gpuaas/maas-host-image-build.json"

  base {
    source   = "https://images.invalid/base.img"
    checksum = "sha256:${sha256("base")}"
    format   = "qcow2"
    size     = "8G"
  }

  layer "tools" {
    source    = "../layers/tools.hcl"
    variables = { extra = var.extra_tools, with_htop = true }
  }

  layer "repo" {
    description = "A third-party repository"

    apt_repository "example" {
      uri        = "https://packages.invalid/debian"
      suite      = "bookworm"
      components = ["main", "contrib"]
      key        = "keys/test-repo.asc"
    }

    apt_repository "flat" {
      uri   = "https://flat.invalid/repo/"
      suite = "./"
      key   = "https://flat.invalid/key.gpg"
    }

    apt_repository "off" {
      uri        = "https://off.invalid/debian"
      suite      = "stable"
      components = ["main"]
      key        = "keys/not-there.asc"
      enabled    = false
    }

    packages          = ["example-agent=1.2.3-1", "libfoo:amd64", "bar/bookworm-backports"]
    optional_packages = ["maybe-missing"]
  }

  layer "config" {
    file "/etc/chrony/chrony.conf" {
      source = "files/chrony.conf"
    }

    file "/etc/site.env" {
      template = "templates/site.env.tmpl"
      vars     = { site = local.site_lc, servers = local.servers }
      mode     = "0600"
      owner    = "root:adm"
    }

    file "/etc/site-digest" {
      content = "${filesha256("files/chrony.conf")} ${join(",", concat(["a"], ["b"]))}\n"
      owner   = "0:0"
    }

    file "/usr/local/bin/hello" {
      content = templatefile("templates/site.env.tmpl", { site = "x", servers = [] })
      mode    = "0755"
    }

    run = ["echo configured > /var/log/imagectl-fixture", "true"]

    services {
      enable  = ["chrony.service", "getty@tty1"]
      disable = ["apt-daily.timer"]
    }
  }

  layer "off" {
    enabled  = var.disabled_layer
    packages = ["never-installed"]
  }

  kernel {
    args = ["intel_iommu=on", "iommu=pt", "console=ttyS0,115200"]
  }

  netdata {
    bind         = "127.0.0.1:19998"
    retention_mb = var.retention
    update_every = 5
    collectors   = ["nvidia_smi", "docker", "cgroups"]
  }

  network {
    wait_online_timeout = 45
    wait_online_any     = false
  }

  bundle "h200-ib" {
    source     = "../../bundles/h200-ib"
    entrypoint = "bootstrap.sh"
  }

  bundle "fabric" {
    source      = "../../bundles/fabric.tar.gz"
    entrypoint  = "bin/run.sh"
    destination = "/opt/fabric"
    checksum    = "sha256:0e256907190b2f3931dab3a63a95a00c43fb67790cf51f286494bd027e9c60c8"
  }

  artifact {
    directory         = "out"
    compression_level = 9
  }

  maas {
    name       = "custom/full-fixture"
    title      = "Full fixture"
    filetype   = "tgz"
    base_image = "ubuntu/noble"
    site       = "lab-maas"
  }

  validation {
    script          = "/usr/local/sbin/full-validate.sh"
    services_active = ["chrony"]
    files_exist     = ["/etc/site.env"]

    check "hello" {
      command = "/usr/local/bin/hello"
    }
  }

  waive "stale-netplan" {
    reason = "the lab's netplan is rewritten by the site bootstrap"
  }
}
