variable "needed" { # ERROR: No value for variable "needed"
  type = string
}

image "missing" { # ERROR: Missing base block # ERROR: Missing required argument
  layer "l" {
    packages = [var.needed]
  }

  bundle "b" { # ERROR: Missing required argument # ERROR: Missing required argument
  }

  layer "f" {
    file "/etc/empty" { # ERROR: Missing file content
    }
  }

  maas { # ERROR: Missing required argument
  }
}
