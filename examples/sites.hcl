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
