variable "site" {
  type    = string
  default = "x"

  validation {
    condition     = length(var.site) > 2 # ERROR: Invalid value for variable "site"
    error_message = "site needs three characters."
  }
}

variable "count" {
  type    = number
  default = "many" # ERROR: Invalid default value for variable
}

variable "bad-type" {
  type = strng # ERROR: Invalid type specification
}

variable "peek" {
  default = "a"

  validation {
    condition     = var.site != "" # ERROR: Invalid validation condition
    error_message = "no peeking."
  }
}

locals {
  a = local.b # ERROR: Circular local value
  b = local.a # ERROR: Circular local value
}

image "vars" {
  title = "Variables"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  layer "l" {
    packages = [var.nope] # ERROR: Unsupported attribute
  }
}
