# The integration tests build this recipe: every step kind, against the
# project's Debian base image. The tests supply the base image, its checksum
# and the apt mirror the build machine uses (read from its own apt sources),
# and copy the Debian archive keyring in as keys/archive.gpg. The repository is
# the mirror's backports suite: apt refuses a second Signed-By for a source the
# base image already lists.

variable "base_image" {
  type = string
}

variable "base_checksum" {
  type = string
}

variable "mirror_uri" {
  type = string
}

image "every-step" {
  title   = "Every step kind"
  version = "1.0.0"

  base {
    source   = var.base_image
    checksum = var.base_checksum
    size     = "3G"
  }

  layer "repo" {
    apt_repository "mirror" {
      uri        = var.mirror_uri
      suite      = "bookworm-backports"
      components = ["main"]
      key        = "keys/archive.gpg"
    }
  }

  layer "tools" {
    packages          = ["jq", "iputils-ping", "libcap2-bin", "cron"]
    optional_packages = ["no-such-package-imagectl-test", "less"]

    file "/etc/every-step/plain.conf" {
      content = "plain\n"
      mode    = "0600"
      owner   = "root:crontab"
    }

    file "/usr/local/bin/every-step" {
      template = "hello.tmpl"
      vars     = { name = "every-step" }
      mode     = "0755"
    }

    run = ["touch /var/lib/every-step-ran", "setcap cap_net_raw+ep /usr/bin/ping", "ls /var/lib/apt/lists > /var/lib/every-step-lists"]

    services {
      enable  = ["cron"]
      disable = ["e2scrub_reap"]
    }
  }

  kernel {
    args = ["intel_iommu=on", "iommu=pt"]
  }

  network {
    wait_online_timeout = "20s"
  }

  bundle "site" {
    source     = "bundle"
    entrypoint = "bin/bootstrap.sh"
  }

  validation {
    services_active = ["cron"]
    files_exist     = ["/var/lib/every-step-ran"]

    check "jq" {
      command = "jq --version"
    }
  }

  # The test image is Debian: the Ubuntu check is waived, on the record.
  waive "os-release" {
    reason = "the test base image is Debian"
  }
}
