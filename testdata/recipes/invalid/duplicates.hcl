variable "v" {
  default = 1
}

variable "v" { # ERROR: Duplicate variable
  default = 2
}

image "dups" {
  title = "Duplicates"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  base { # ERROR: Duplicate base block
    source   = "other.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  layer "a" {
    packages = ["curl", "curl"] # WARNING: Duplicate package

    file "/etc/x" {
      content = "1"
    }

    file "/etc/x" { # ERROR: Duplicate file
      content = "2"
    }

    apt_repository "r" {
      uri        = "https://r.invalid/debian"
      suite      = "stable"
      components = ["main"]
      key        = "https://r.invalid/key"
    }

    apt_repository "r" { # ERROR: Duplicate apt repository
      uri        = "https://r.invalid/debian"
      suite      = "stable"
      components = ["main"]
      key        = "https://r.invalid/key"
    }
  }

  layer "a" { # ERROR: Duplicate layer
  }

  bundle "b" {
    source     = "assets"
    entrypoint = "run.sh"
  }

  bundle "b" { # ERROR: Duplicate bundle
    source     = "assets"
    entrypoint = "run.sh"
  }

  validation {
    check "c" {
      command = "true"
    }

    check "c" { # ERROR: Duplicate check
      command = "true"
    }
  }

  kernel {
    args = ["quiet", "quiet"] # WARNING: Duplicate kernel argument
  }
}

locals {
  a = 1
}

locals {
  a = 2 # ERROR: Duplicate local value
}
