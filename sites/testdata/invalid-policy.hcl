site "canary-a" {
  maas_url    = "http://canary-a.example:5240/MAAS"
  api_key_env = "CANARY_A_KEY"

  policy {
    evidence {
      sites     = ["canary-b"] # ERROR: Unknown evidence site
      profiles  = ["slices"] # ERROR: Invalid profiles
      stage     = "convergd" # ERROR: Invalid stage
      min_hosts = 0 # ERROR: Invalid min_hosts
    }
    evidence { # ERROR: Missing required argument
      profiles = ["slice"]
    }
    soak = "a day" # ERROR: Invalid soak
  }
}

site "b" {
  maas_url    = "http://b.example:5240/MAAS"
  api_key_env = "B_KEY"

  policy {
    window {
      days      = ["mon", "tues"] # ERROR: Invalid days
      hours     = "17:00-09:00" # ERROR: Invalid hours
      time_zone = "Europe/Berln" # ERROR: Invalid time_zone
    }
    window {
      hours = "9-17" # ERROR: Invalid hours
      time_zon = "UTC" # ERROR: Unsupported argument
    }
    freeze {
      from   = "2027-01-04T00:00:00Z"
      to     = "2026-12-20T00:00:00Z" # ERROR: Invalid to
      reason = "year-end freeze"
    }
    freeze {
      from   = "2026-12-20" # ERROR: Invalid from
      to     = "2027-01-04T00:00:00Z"
      reason = " " # ERROR: Invalid reason
    }
  }
  policy { # ERROR: Duplicate policy
    soak = "1h" # ERROR: Soak without evidence
  }
}

site "c" {
  maas_url    = "http://c.example:5240/MAAS"
  api_key_env = "C_KEY"
  policy { # ERROR: Empty policy
  }
}

site "d" {
  maas_url    = "http://d.example:5240/MAAS"
  api_key_env = "D_KEY"
}

group "g" {
  sites = ["d"]
  policy {
    evidence {
      sites = ["canary"] # ERROR: Unknown evidence site
    }
  }
}
