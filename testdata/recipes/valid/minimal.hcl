# The smallest recipe: an image with a title and a base.

image "minimal" {
  title = "Minimal"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
}
