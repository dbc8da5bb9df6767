site "a" {
  maas_url    = "ftp://maas.example/MAAS" # ERROR: Invalid maas_url
  api_key_env = "A_KEY"
}

site "b" { # ERROR: Where is the API key?
  maas_url = "http://maas.example/MAAS"
}

site "c" { # ERROR: Where is the API key?
  maas_url     = "http://maas.example/MAAS"
  api_key_env  = "C_KEY"
  api_key_file = "c.key"
}

site "d" {
  maas_url     = "http://maas.example/MAAS"
  api_key_env  = "D KEY" # ERROR: Invalid api_key_env
  timeout      = "soon" # ERROR: Invalid timeout
  architecture = "amd64" # ERROR: Invalid architecture
  warm_racks   = "yes" # ERROR: Invalid warm_racks
  rack_port    = 70000 # ERROR: Invalid rack_port
}

site "a" { # ERROR: Duplicate site
  maas_url    = "http://maas.example/MAAS"
  api_key_env = "A_KEY"
}

site "e" {
  maas_url = "http://maas.example/MAAS"
  api_key_env = "E_KEY"
  api_ky = "x" # ERROR: Unsupported argument
}
