# MAAS sites for imagectl upload, promote, rollback, status and gc:
#   imagectl upload X.tgz --site maas280 --sites examples/sites.hcl --base-image ubuntu/noble
# A site names where its API key is - an environment variable or a file -
# never the key itself: a key written here is an error.

site "maas280" {
  maas_url = "http://maas280.example.internal:5240/MAAS"
  # `maas apikey --username admin`, exported by CI.
  api_key_env  = "MAAS280_API_KEY"
  architecture = "amd64/generic" # default
  # Each API request and each chunk but the last (default 60s). A MAAS
  # that refuses connections is reported within it, not retried past it.
  timeout = "60s"

  # The GPUaaS deploy profile promote and rollback point at the promoted
  # version (PATCH {api_url}/api/v1/admin/maas-sites/{site_id}/profiles/{profile_id}
  # with its distro_series), and status reads back. Without a deploy_profile,
  # promote prints the curl command an operator must run instead.
  # Repeat the block for each profile; the token, like the MAAS key, is
  # named by token_env or token_file and never written here.
  deploy_profile {
    api_url    = "https://admin.gpuaas.example.internal" # https; http only to loopback
    site_id    = "maas280"
    profile_id = "h200-bare-metal"
    token_env  = "GPUAAS_ADMIN_TOKEN"
    # The image whose promotions the profile follows (required: a profile
    # selects one image, and promoting another must not repoint it).
    image = "gpuaas-h200-host-ubuntu2404"
    # Each admin API request (default 30s); as for MAAS, a refused
    # connection is not retried past it.
    timeout = "30s"
  }
}

site "lab" {
  maas_url = "https://maas.lab.example.internal/MAAS"
  # Relative paths are relative to this file's directory.
  api_key_file = "/etc/imagectl/lab-maas.key"
  # MAAS hashes the whole file while answering the last chunk (default 15m).
  last_chunk_timeout = "15m"
  # MAAS 3.5+ syncs the file to every region before it reports it complete (default 10m).
  complete_timeout = "10m"
}

# A group is promoted to together (imagectl promote IMAGE VERSION --site h200-prod).
group "h200-prod" {
  sites = ["maas280"]

  # What a version needs before promote points a site of the group at it.
  # A site is held to every policy that applies to it: its own policy block
  # (in its site block, same form) and each of its groups'; a site's own
  # adds conditions, it cannot loosen a group's. Without any policy a site
  # is promoted to as soon as asked. promote refuses with what is missing
  # and exit status 3; --override --reason WHY promotes anyway and the
  # site's history records it. rollback is never gated.
  policy {
    # Passing results (imagectl hostcheck, imagectl evidence add) of the
    # version from at least min_hosts distinct hosts (machine id, else site
    # and host name; a host's latest result counts) at any of these sites,
    # for each profile (none: any profile), at the stage (default converged).
    # A host whose latest result failed blocks the promotion. Repeatable.
    evidence {
      sites     = ["lab"]
      profiles  = ["bare-metal", "slice"]
      stage     = "converged"
      min_hosts = 2
    }
    # How long after the first passing result of the evidence above the
    # version waits; a failing result restarts it from the next pass.
    soak = "24h"
    # When promotions may happen (any of the windows; none: always): days
    # (none: every day) and hours [from, to) of the zone's day, at most 24:00.
    window {
      days      = ["mon", "tue", "wed", "thu"]
      hours     = "09:00-17:00"
      time_zone = "Europe/Berlin"
    }
    # When they may not, and why (RFC 3339 times, [from, to)). Repeatable.
    freeze {
      from   = "2026-12-20T00:00:00Z"
      to     = "2027-01-04T00:00:00Z"
      reason = "year-end freeze"
    }
  }
}
