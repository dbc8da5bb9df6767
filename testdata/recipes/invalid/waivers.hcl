image "waivers" {
  title = "Waivers"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  waive "os-releas" { # ERROR: Unknown deployability check
    reason = "typo in the check name"
  }

  waive "machine-id" {
    reason = "  " # ERROR: Empty reason
  }

  waive "kernel" { # ERROR: Missing required argument
  }

  waive "stale-netplan" {
    reason = "first"
  }

  waive "stale-netplan" { # ERROR: Duplicate waiver
    reason = "second"
  }
}
