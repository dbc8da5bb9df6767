# The Netdata agent; its configuration comes from the recipe's netdata block.

variable "enabled" {
  type    = bool
  default = true
}

description = "Netdata agent"
enabled     = var.enabled
packages    = ["netdata"]
