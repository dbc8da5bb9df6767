site "a" {
  maas_url    = "http://maas.example/MAAS"
  api_key_env = "A_KEY"

  deploy_profile {
    api_url    = "https://admin.example"
    site_id    = "s"
    profile_id = "p1"
    token      = "SecretToken0123456789" # ERROR: Token written in clear
    image      = "demo"
  }

  deploy_profile {
    api_url    = "https://admin.example"
    site_id    = "s"
    profile_id = "p2"
    token_env  = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcHMifQ.SecretSignature0123" # ERROR: Token written in clear
    image      = "demo"
  }

  deploy_profile {
    api_url    = "https://admin.example"
    site_id    = "s"
    profile_id = "p3"
    token_env  = "Secret-opaque-token-0123" # ERROR: Invalid token_env
    image      = "demo"
  }

  deploy_profile {
    api_url    = "https://ops:SecretPassword@admin.example" # ERROR: Credentials in a URL
    site_id    = "s"
    profile_id = "p4"
    token_file = "Bearer SecretBearer0123" # ERROR: Token written in clear
    image      = "demo"
  }
}

site "b" {
  maas_url    = "http://maas.example/MAAS"
  api_key_env = "B_KEY"

  deploy_profile {
    api_url    = "https://admin.example/?access_token=SecretQuery0123" # ERROR: Credentials in a URL
    site_id    = "s"
    profile_id = "p"
    token_env  = "T"
    image      = "demo"
  }
}
