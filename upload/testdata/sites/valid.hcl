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
}
