# A validation block whose default profile it does not declare.

image "default-profile" {
  title = "Default profile"

  base {
    source   = "assets/file.txt"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  validation {                  # ERROR: Default profile not declared
    default_stage = "converged" # the default profile is bare-metal: not declared below

    profile "slice" {
    }
  }
}
