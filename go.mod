module github.com/gpuaas/imagectl

go 1.26.8

require (
	// OpenPGP armor decoding for apt keys fetched by URL (apt wants binary keyrings).
	github.com/ProtonMail/go-crypto v1.5.2
	// "did you mean" for names HCL does not already suggest (collectors, -var names).
	github.com/agext/levenshtein v1.2.1
	github.com/hashicorp/hcl/v2 v2.25.0
	// Parallel gzip for the tgz: curtin reads gzip, not zstd.
	github.com/klauspost/pgzip v1.3.0
	// dpkg's version ordering for imagectl diff (upgraded vs downgraded).
	github.com/knqyf263/go-deb-version v0.0.0-20241115132648-6f4aee6ccd23
	github.com/spf13/cobra v1.10.2
	github.com/zclconf/go-cty v1.19.0
	// libguestfs's Go binding: Debian ships it as source only, so the
	// Makefile copies it into third_party/guestfs (see the replace below).
	// Only code built with the guestfs tag imports it.
	libguestfs.org/guestfs v0.0.0
)

require (
	github.com/apparentlymart/go-textseg/v15 v15.0.0 // indirect
	github.com/apparentlymart/go-textseg/v17 v17.0.1 // indirect
	github.com/google/go-cmp v0.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mitchellh/go-wordwrap v1.0.1 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/mod v0.29.0 // indirect
	golang.org/x/sync v0.18.0 // indirect
	golang.org/x/text v0.31.0 // indirect
	golang.org/x/tools v0.38.0 // indirect
)

replace libguestfs.org/guestfs => ./third_party/guestfs
