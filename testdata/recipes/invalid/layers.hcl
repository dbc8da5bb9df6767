image "layers" {
  title = "Layer files"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  layer "missing" {
    source = "../layers/nope.hcl" # ERROR: Missing layer file
  }

  layer "self" {
    source = "layers.hcl" # ERROR: Layer imports itself
  }

  layer "mixed" {
    source   = "../layers/tools.hcl"
    variables = { with_htop = false }
    packages = ["curl"] # ERROR: Layer content beside source
  }

  layer "undeclared" {
    source    = "../layers/tools.hcl"
    variables = { with_htop = true, colour = "red" } # ERROR: Undeclared variable
  }

  layer "unset" {
    source = "../layers/tools.hcl" # ERROR: No value for layer variable "with_htop"
  }

  layer "orphan" {
    variables = { a = 1 } # ERROR: Variables without a layer file
  }

  layer "Bad Name" { # ERROR: Invalid layer name
  }
}
