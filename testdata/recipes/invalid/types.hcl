image "types" {
  title   = ["not", "a", "string"] # ERROR: Incorrect attribute value type
  version = "1.0"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  layer "l" {
    packages = "curl" # ERROR: Incorrect attribute value type
    enabled  = "maybe" # ERROR: Incorrect attribute value type
  }

  netdata {
    retention_mb = "lots" # ERROR: Incorrect attribute value type
    update_every = 1.5 # ERROR: Invalid number
  }
}
