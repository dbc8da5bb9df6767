site "maas280" {
  maas_url           = "http://maas280.example:5240/MAAS/"
  api_key_env        = "MAAS280_API_KEY"
  architecture       = "amd64/generic"
  timeout            = "30s"
  last_chunk_timeout = "20m"
}

site "lab" {
  maas_url     = "https://maas.lab.example/MAAS"
  api_key_file = "lab.key"
  verify_key   = "keys/cosign.pub"
  warm_racks   = true
  rack_port    = 8248
}

site "gpuaas" {
  maas_url    = "http://maas.gpuaas.example:5240/MAAS"
  api_key_env = "GPUAAS_MAAS_KEY"

  deploy_profile {
    api_url    = "https://admin.gpuaas.example/"
    site_id    = "site-7"
    profile_id = "h200-bare-metal"
    token_env  = "GPUAAS_ADMIN_TOKEN"
    image      = "gpuaas-h200-host-ubuntu2404"
  }

  deploy_profile {
    api_url    = "http://127.0.0.1:8080"
    site_id    = "site-7"
    profile_id = "h200-slice-vm"
    token_file = "admin.token"
    image      = "gpuaas-h200-host-ubuntu2404"
    timeout    = "10s"
  }
}
