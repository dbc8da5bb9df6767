# Values that would become shell code in the image (issue 20): kernel args
# that break out of the grub.d drop-in's loop or do not parse on GRUB's
# linux line, a unit systemctl would read as an option, a version that
# would end a comment line of the validation script.
image "shell" {
  title   = "Shell"
  version = "0.1\ntouch x" # ERROR: Invalid version

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  layer "l" {
    services {
      enable = ["-Hroot@evil.example"] # ERROR: Invalid service name
    }
  }

  kernel {
    args = [
      "intel_iommu=on;", # ERROR: Invalid kernel argument
      "do",
      ":;",    # ERROR: Invalid kernel argument
      "done;", # ERROR: Invalid kernel argument
      "touch",
      "/x;",                                 # ERROR: Invalid kernel argument
      "nvidia.NVreg_RegistryDwords=A=1;B=0", # ERROR: Invalid kernel argument
      "pci=*",                               # ERROR: Invalid kernel argument
      "#rest",                               # ERROR: Invalid kernel argument
      "a>b",                                 # ERROR: Invalid kernel argument
      "x=(y)",                               # ERROR: Invalid kernel argument
      "{x}",                                 # ERROR: Invalid kernel argument
      "memmap=4G$4G",                        # ERROR: Invalid kernel argument
    ]
  }

  validation {
    services_active = ["-Hroot@evil.example"] # ERROR: Invalid service name
  }
}
