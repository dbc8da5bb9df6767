image "signing-dir" {
  title = "Signing"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  artifact {
    sign_key = "assets" # ERROR: Not a signing key
  }
}
