# The validation block: profiles, stages, the GPU block, the converged
# baseline. Every value here is wrong in one way.

image "validation" { # ERROR: Unknown bootstrap bundle
  title = "Validation"

  base {
    source   = "assets/file.txt"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  bundle "site" {
    source     = "assets"
    entrypoint = "run.sh"
  }

  validation {
    default_profile = "baremetal" # ERROR: Unknown profile
    default_stage   = "final" # ERROR: Unknown stage
    collector_wait  = "1h" # ERROR: Invalid wait

    gpu {
      model         = "" # ERROR: Empty GPU model
      count         = 0 # ERROR: Invalid GPU count
      driver_branch = "r580" # ERROR: Invalid driver branch
      pcie_gen      = 9 # ERROR: Invalid PCIe generation
      pcie_width    = 12 # ERROR: Invalid PCIe width
    }

    profile "vm" { # ERROR: Unknown profile
    }

    profile "slice" {
      vfio_modules  = ["vfio pci"] # ERROR: Invalid module name
      bootstrap     = "sites" # the image's bundle is "site"
      bootstrap_env = { "1X" = "0" } # ERROR: Invalid environment variable

      converged {
        services_active = ["bad unit"] # ERROR: Invalid service name
        done_markers    = ["relative.done"] # ERROR: Invalid path

        fabric {
          interface = "ib p*" # ERROR: Invalid interface pattern
          subnet    = "192.168.1.0/16" # ERROR: Invalid subnet
        }

        bridge {
          name    = "ovsbr0"
          address = "10.100.0.1" # ERROR: Invalid bridge address
        }

        bridge {
          name    = "ovsbr0" # ERROR: Duplicate bridge
          address = "10.100.0.1/24"
        }

        dhcp {
          subnet_file = "gpu_subnet.conf" # ERROR: Invalid path
        }
      }
    }

    profile "slice" { # ERROR: Duplicate profile
    }
  }
}
