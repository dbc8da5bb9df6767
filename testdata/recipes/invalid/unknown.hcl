variable "v" {
  tpye = string # ERROR: Unsupported argument
}

image "unknown" {
  title = "Unknown"
  colour = "blue" # ERROR: Unsupported argument

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  layer "l" {
    pakages = ["curl"] # ERROR: Unsupported argument
  }

  kernal { # ERROR: Unsupported block type
    args = ["quiet"]
  }
}

output "x" { # ERROR: Unsupported block type
}
