site "a" {
  maas_url    = "http://maas.example/MAAS"
  api_key     = "AbCdEf0123:GhIjKl4567:SecretSecret0123456789" # ERROR: API key written in clear
}

site "b" {
  maas_url    = "http://maas.example/MAAS"
  api_key_env = "ZzYyXx9876:WwVvUu5432:OtherSecret987654321" # ERROR: API key written in clear
}

# Outside any site block, and a URL with a password: neither may be shown.
api_key = "QqRrSs1234:TtUuVv5678:TopLevelSecret0123456789" # ERROR: API key written in clear

site "c" {
  maas_url    = "http://admin:Secret0pw@maas.example/MAAS" # ERROR: Credentials in a URL
  api_key_env = "MAAS_C_KEY"
}
