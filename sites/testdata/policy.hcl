site "canary-a" {
  maas_url    = "http://canary-a.example:5240/MAAS"
  api_key_env = "CANARY_A_KEY"
}

site "canary-b" {
  maas_url    = "http://canary-b.example:5240/MAAS"
  api_key_env = "CANARY_B_KEY"
}

site "fleet-1" {
  maas_url    = "http://fleet-1.example:5240/MAAS"
  api_key_env = "FLEET_1_KEY"

  # A site's own policy adds to its group's.
  policy {
    freeze {
      from   = "2026-12-20T00:00:00Z"
      to     = "2027-01-04T00:00:00Z"
      reason = "year-end freeze"
    }
  }
}

site "fleet-2" {
  maas_url    = "http://fleet-2.example:5240/MAAS"
  api_key_env = "FLEET_2_KEY"
}

group "fleet" {
  sites = ["fleet-1", "fleet-2"]

  policy {
    evidence {
      sites     = ["canary-a", "canary-b"]
      profiles  = ["slice", "bare-metal"]
      min_hosts = 2
    }
    evidence {
      sites = ["canary-a"]
      stage = "image"
    }
    soak = "24h"
    window {
      days      = ["mon", "tue", "wed", "thu"]
      hours     = "09:00-17:00"
      time_zone = "Europe/Berlin"
    }
    window {
      days = ["fri"]
      hours = "09:00-12:00"
    }
  }
}
