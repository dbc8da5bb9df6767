# Docker engine and the compose plugin from the Ubuntu archive.

description = "Docker engine and compose plugin"

packages = ["docker.io", "docker-compose-v2", "containerd"]

services {
  enable = ["docker", "containerd"]
}
