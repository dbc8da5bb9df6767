image "signing" {
  title = "Signing"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  artifact {
    sign_key = "assets/cosign-test.pub" # ERROR: Not a signing key
  }
}
