# A reusable layer file for the recipe fixtures.

variable "extra" {
  type    = list(string)
  default = []
}

variable "with_htop" {
  type = bool
}

locals {
  base = ["jq", "curl"]
}

description       = "Tools"
packages          = concat(local.base, var.extra)
optional_packages = var.with_htop ? ["htop"] : []

services {
  enable = ["chrony"]
}
