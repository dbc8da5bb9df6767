image "broken" {
  title = "Broken"
  base {
    source = "x.qcow2" checksum = "sha256:00" # ERROR: Missing newline after argument
  }
}
