site "a" {
  maas_url    = "http://maas.example/MAAS"
  api_key_env = "A_KEY"

  deploy_profile {
    api_url    = "http://admin.example" # ERROR: Invalid api_url
    site_id    = "" # ERROR: Invalid site_id
    profile_id = "a/b" # ERROR: Invalid profile_id
    token_env  = "T"
    image      = "demo"
  }

  deploy_profile { # ERROR: Where is the admin token?
    api_url    = "https://admin.example"
    site_id    = "s"
    profile_id = "p"
    image      = "demo"
  }

  deploy_profile { # ERROR: Where is the admin token?
    api_url    = "https://admin.example"
    site_id    = "s"
    profile_id = "p"
    token_env  = "T"
    token_file = "t.token"
    image      = "demo"
  }

  deploy_profile {
    api_url    = "ftp://admin.example" # ERROR: Invalid api_url
    site_id    = "s"
    profile_id = "q"
    token_env  = "T"
    image      = "Not An Image" # ERROR: Invalid image
    timeout    = "never" # ERROR: Invalid timeout
  }

  deploy_profile {
    api_url    = "https://admin.example"
    site_id    = "s"
    profile_id = "ok"
    token_env  = "T"
    token_ev   = "T" # ERROR: Unsupported argument
    image      = "demo"
  }

  deploy_profile {
    api_url    = "https://admin.example/"
    site_id    = "s"
    profile_id = "p"
    token_env  = "T"
    image      = "demo"
  }

  deploy_profile { # ERROR: Duplicate deploy profile
    api_url    = "https://admin.example"
    site_id    = "s"
    profile_id = "p"
    token_file = "t.token"
    image      = "demo"
  }
}
