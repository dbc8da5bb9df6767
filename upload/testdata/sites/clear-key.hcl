site "a" {
  maas_url    = "http://maas.example/MAAS"
  api_key     = "AbCdEf0123:GhIjKl4567:SecretSecret0123456789" # ERROR: API key written in clear
}

site "b" {
  maas_url    = "http://maas.example/MAAS"
  api_key_env = "ZzYyXx9876:WwVvUu5432:OtherSecret987654321" # ERROR: API key written in clear
}
