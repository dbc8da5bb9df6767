image "sources" {
  title = "Sources"

  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }

  layer "files" {
    file "/etc/a" {
      source = "assets/nope.txt" # ERROR: Missing file source
    }

    file "/etc/b" {
      source = "../layers/tools.hcl" # ERROR: Source outside the recipe's directory tree
    }

    file "/etc/c" {
      template = "assets/nope.tmpl" # ERROR: Missing template
    }

    file "/etc/d" {
      content = file("/etc/hostname") # ERROR: Error in function call
    }

    file "/etc/e" {
      source  = "assets/file.txt"
      content = "both" # ERROR: Conflicting file content
    }
  }

  bundle "outside" {
    source     = "../../bundles/h200-ib" # ERROR: Source outside the recipe's directory tree
    entrypoint = "bootstrap.sh"
  }

  bundle "missing" {
    source     = "bundles/none" # ERROR: Missing bundle source
    entrypoint = "bootstrap.sh"
  }

  bundle "not-a-bundle" {
    source     = "assets/file.txt" # ERROR: Invalid bundle source
    entrypoint = "bootstrap.sh"
  }

  bundle "mismatch" {
    source     = "assets"
    entrypoint = "run.sh"
    checksum   = "sha256:1111111111111111111111111111111111111111111111111111111111111111" # ERROR: Bundle checksum mismatch
  }

  bundle "no-entrypoint" {
    source     = "assets"
    entrypoint = "bootstrap.sh" # ERROR: Bundle entrypoint missing
  }

  bundle "not-executable" {
    source     = "assets"
    entrypoint = "file.txt" # ERROR: Bundle entrypoint missing
  }

  bundle "absolute-entrypoint" {
    source     = "assets"
    entrypoint = "/bin/sh" # ERROR: Invalid bundle entrypoint
  }
}
