# Docker engine and the compose plugin from the Ubuntu archive.

description = "Docker engine and compose plugin"

variable "compose_package" {
  type        = string
  default     = "docker-compose-v2"
  description = "The compose package: Ubuntu's docker-compose-v2 (docker compose); Debian 12 has only docker-compose."
}

packages = ["docker.io", var.compose_package, "containerd"]

services {
  enable = ["docker", "containerd"]
}
