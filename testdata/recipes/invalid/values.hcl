image "Values!" { # ERROR: Invalid image name
  title        = "Values"
  version      = "1 0" # ERROR: Invalid version
  architecture = "x86_64" # ERROR: Invalid architecture
  build_marker = "etc/marker.json" # ERROR: Invalid build marker path
  apt_proxy    = "ftp://apt-cacher.invalid:3142" # ERROR: Invalid apt proxy

  base {
    source   = "base.qcow2"
    checksum = "sha256:ABC" # ERROR: Invalid checksum
    format   = "vmdk" # ERROR: Unsupported base image format
    size     = "80 gigs" # ERROR: Invalid size
  }

  layer "l" {
    packages          = ["curl", ""] # ERROR: Empty package name
    optional_packages = ["Not_A_Package"] # ERROR: Invalid package name
    run               = [" "] # ERROR: Empty command

    file "relative/path" { # ERROR: Invalid file path
      content = "x"
    }

    file "/boot/efi/EFI/x" { # ERROR: Invalid file path
      content = "x"
    }

    file "/etc/mode" {
      content = "x"
      mode    = "644x" # ERROR: Invalid file mode
      owner   = "Root User" # ERROR: Invalid owner
    }

    apt_repository "r" {
      uri        = "ftp://r.invalid" # ERROR: Invalid repository URI
      suite      = "./"
      components = ["main"] # ERROR: Components in a flat repository
      key        = "http://r.invalid/key" # ERROR: Insecure key URL
    }

    services {
      enable  = ["ssh", "bad unit"] # ERROR: Invalid service name
      disable = ["ssh"] # ERROR: Service both enabled and disabled
    }
  }

  kernel {
    args = ["iommu=pt quiet", "root=\"x\""] # ERROR: Invalid kernel argument # ERROR: Invalid kernel argument
  }

  netdata {
    bind         = "localhost" # ERROR: Invalid bind address
    retention_mb = 1 # ERROR: Retention too small
    update_every = 0 # ERROR: Invalid update interval
    collectors   = ["nvidia-smi"] # ERROR: Unknown Netdata collector
  }

  network {
    wait_online_timeout = "forever" # ERROR: Invalid duration
  }

  artifact {
    compression_level = 0 # ERROR: Invalid compression level
  }

  maas {
    name       = "custom/a/b" # ERROR: Invalid MAAS name
    filetype   = "ddgz" # ERROR: Unsupported MAAS file type
    base_image = "debian/bookworm" # ERROR: Invalid MAAS base image
  }
}
