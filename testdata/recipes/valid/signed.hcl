# A recipe whose builds are signed: sign_key names a cosign private key,
# relative to this file. keys/cosign-test.key is a test key (password
# "test"); keys/cosign-test.pub verifies what it signs.

image "signed" {
  title = "Signed"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  artifact {
    sign_key = "keys/cosign-test.key"
  }
}
