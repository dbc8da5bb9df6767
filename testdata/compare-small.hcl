# The smoke comparison's small recipe (smoke's TestCompareFirstBoot, which
# CI runs): the project's Debian test base image with two small packages
# and a file, nothing else, so that the baked path and the first-boot path
# (the same work done at first boot, then the same validation) are cheap to
# boot under TCG. make base-image writes base_image and base_checksum.

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
  default = "0.0.0-compare"
}

image "imagectl-compare-small" {
  title        = "imagectl smoke comparison (Debian 12, two small packages and a file)"
  version      = var.version
  architecture = "amd64/generic"

  base {
    source   = var.base_image
    checksum = var.base_checksum
    format   = "qcow2"
    size     = "4G"
  }

  layer "small" {
    description = "Two small packages and a file"
    packages    = ["hello", "tree"]

    file "/etc/imagectl-compare" {
      content = "baked or installed at first boot: the same file\n"
      mode    = "0644"
    }
  }

  artifact {
    compression_level = 1
  }
}
