# MAAS sites for imagectl upload:
#   imagectl upload X.tgz --site maas280 --sites examples/sites.hcl --base-image ubuntu/noble
# A site names where its API key is - an environment variable or a file -
# never the key itself: a key written here is an error.

site "maas280" {
  maas_url = "http://maas280.example.internal:5240/MAAS"
  # `maas apikey --username admin`, exported by CI.
  api_key_env  = "MAAS280_API_KEY"
  architecture = "amd64/generic" # default
  # Each API request and each chunk but the last (default 60s).
  timeout = "60s"
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
