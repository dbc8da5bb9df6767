# The Netdata agent; its configuration comes from the recipe's netdata block.
#
# The nvidia_smi and docker collectors are go.d.plugin modules. Debian's and
# Ubuntu's netdata packages do not ship go.d.plugin, so an image that
# configures them installs Netdata from Netdata's own repository
# (repository = "netdata"); the build fails, saying so, when a configured
# go.d module has no go.d.plugin to run it.

variable "enabled" {
  type    = bool
  default = true
}

variable "repository" {
  type        = string
  default     = "distribution"
  description = "Where Netdata comes from: \"distribution\" (the OS archive) or \"netdata\" (repo.netdata.cloud, with go.d.plugin)."

  validation {
    condition     = contains(["distribution", "netdata"], var.repository)
    error_message = "repository must be \"distribution\" or \"netdata\"."
  }
}

variable "netdata_repo_uri" {
  type        = string
  default     = "https://repo.netdata.cloud/repos/stable/ubuntu/"
  description = "Netdata's stable apt repository for the image's distribution."
}

variable "netdata_repo_suite" {
  type        = string
  default     = "noble/"
  description = "The repository's suite: the distribution's codename and a slash (a flat repository)."
}

description = "Netdata agent"
enabled     = var.enabled

apt_repository "netdata" {
  uri     = var.netdata_repo_uri
  suite   = var.netdata_repo_suite
  key     = "https://repo.netdata.cloud/netdatabot.gpg.key"
  enabled = var.repository == "netdata"
}

packages = var.repository == "netdata" ? ["netdata", "netdata-plugin-go"] : ["netdata"]
