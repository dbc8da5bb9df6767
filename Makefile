# imagectl: build, test and benchmark.
#
#   make build       the imagectl binary in bin/ (with libguestfs support)
#   make unit        the fast tests, for the edit loop (no appliance)
#   make test        everything CI runs, installing what it needs first
#   make lint        gofmt, go vet, staticcheck, shellcheck, imagectl fmt --check
#   make test-setup  lint, the base image, cosign and syft, side by side (make test's first step)
#   make bench       benchmarks
#   make demo        builds examples/demo.hcl into a tgz, manifest and validation script
#   make base-image  the Debian test base image (built once per machine, cached by content)
#   make cosign      the real cosign CLI for the signing interop tests (built once per version)
#   make syft        syft, the independent SBOM tool the SBOM is compared with (built once per version)
#   make staticcheck staticcheck, which make lint runs (built once per version)

SHELL := /bin/bash
GO ?= go
export PATH := /usr/local/go/bin:$(PATH)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/gpuaas/imagectl/internal/buildinfo.Version=$(VERSION)
TAGS := guestfs
FUZZTIME ?= 20s
RULES_FUZZTIME ?= 10s
BIN := bin/imagectl

# Debian packages: libguestfs and its Go binding (source only), QEMU tools,
# what scripts/mkbase.sh uses, shellcheck for generated shell, OVMF (UEFI
# firmware) for imagectl smoke, the CNCF registry (docker-registry) and git for
# the registry store and git catalog tests, OpenSSH (client and sshd) for
# the hostcheck tests.
APT_PACKAGES := libguestfs-tools golang-guestfs-dev libguestfs-dev linux-image-amd64 qemu-utils \
	qemu-system-x86 mmdebstrap e2fsprogs dosfstools mtools gdisk faketime shellcheck gcc pigz ovmf \
	docker-registry git openssh-server openssh-client
GUESTFS_GO := /usr/share/gocode/src/libguestfs.org/guestfs/guestfs.go

# The test base image is keyed by the script that builds it and kept per
# machine, outside the checkout, so a fresh clone reuses it.
IMAGES_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/imagectl/test-images
BASE_KEY := $(shell cat scripts/mkbase.sh 2>/dev/null | sha256sum | cut -c1-16)
BASE_DIR := $(IMAGES_CACHE)/$(BASE_KEY)
BASE_IMAGE := $(BASE_DIR)/debian-bookworm-base.qcow2
BASE_VARS := $(BASE_DIR)/base.vars.hcl
export IMAGECTL_TEST_BASE_VARS := $(BASE_VARS)

# The real cosign CLI, which the signing tests check imagectl's keys,
# signatures and bundles against: built once from the module proxy and kept
# per version outside the checkout, static (no cgo: it may build before
# apt-deps has installed gcc) and without symbol tables or DWARF
# (-s -w: less for the linker to write). test and bench build it; other targets
# pass it to the tests when it is there (without it they skip, except CI=true).
COSIGN_VERSION := v2.6.5
TOOLS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/imagectl/tools
COSIGN := $(TOOLS_CACHE)/cosign-$(COSIGN_VERSION)/cosign
export IMAGECTL_COSIGN := $(if $(wildcard $(COSIGN)),$(COSIGN))
test bench: export IMAGECTL_COSIGN := $(COSIGN)

# syft (anchore/syft), an SBOM tool independent of imagectl's: the tests
# compare the packages of imagectl's SBOM with what syft finds in the same
# tree extracted from a built tgz. Built like cosign.
SYFT_VERSION := v1.57.0
SYFT := $(TOOLS_CACHE)/syft-$(SYFT_VERSION)/syft
export IMAGECTL_SYFT := $(if $(wildcard $(SYFT)),$(SYFT))
test: export IMAGECTL_SYFT := $(SYFT)

# staticcheck (dominikh/go-tools), which lint runs over both builds at once
# (-matrix: code that only the guestfs build uses is not dead). Built like
# cosign.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(TOOLS_CACHE)/staticcheck-$(STATICCHECK_VERSION)/staticcheck

.PHONY: all build deps apt-deps guestfs-binding unit test test-setup lint fuzz bench demo base-image cosign syft staticcheck clean

all: build

deps: apt-deps
	$(MAKE) --no-print-directory guestfs-binding
	$(GO) mod download

# The Debian packages of APT_PACKAGES that are missing, installed.
apt-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Debian ships libguestfs's Go binding as source only; third_party/guestfs is
# the module that holds it (see its doc.go).
guestfs-binding: third_party/guestfs/guestfs.go
third_party/guestfs/guestfs.go: $(GUESTFS_GO)
	cp $< $@

build: deps
	$(GO) build -tags $(TAGS) -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/imagectl

unit:
	$(GO) test -short ./...

lint: build $(STATICCHECK)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^third_party/')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags $(TAGS) ./...
	printf 'untagged:\n$(TAGS): -tags=$(TAGS)\n' | $(STATICCHECK) -matrix ./...
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/imagectl
	shellcheck scripts/*.sh .ci/run validate/sh/*.sh builder/firstboot/sh/*.sh
	$(BIN) fmt --check recipes layers examples testdata/recipes/valid testdata/recipes/layers testdata/h200-debian.hcl
	shellcheck -x -P SCRIPTDIR testdata/bundles/h200-ib/bootstrap.sh testdata/bundles/h200-slice-vm/bootstrap.sh

# The recipe parser, then the rules that keep values out of generated shell
# and paths: kernel args through the grub.d drop-in, image names and
# versions as file names (shorter: small, fast properties). scripts/fuzz.sh
# runs each, failing on a finding, not on Go 1.26's fuzz deadline race.
fuzz:
	GO=$(GO) scripts/fuzz.sh ./recipes FuzzLoad $(FUZZTIME)
	GO=$(GO) scripts/fuzz.sh ./builder/compile FuzzGrubDropIn $(RULES_FUZZTIME)
	GO=$(GO) scripts/fuzz.sh ./manifest FuzzNames $(RULES_FUZZTIME)
	GO=$(GO) scripts/fuzz.sh ./internal/textsafe FuzzTerminal $(RULES_FUZZTIME)

base-image: $(BASE_VARS)

# No prerequisite on the script: a fresh clone's mtimes are new, and the
# script's content is already in the path. mkbase.sh needs mmdebstrap.
$(BASE_VARS): | apt-deps
	@mkdir -p $(BASE_DIR)
	scripts/mkbase.sh $(BASE_IMAGE).tmp
	mv $(BASE_IMAGE).tmp $(BASE_IMAGE)
	printf 'base_image    = "%s"\nbase_checksum = "sha256:%s"\n' $(BASE_IMAGE) \
		$$(sha256sum $(BASE_IMAGE) | cut -d' ' -f1) > $@.tmp
	mv $@.tmp $@

# lint and what the tests need beside the code, made side by side: the
# tools (Go only) compile while apt-deps installs the packages, then the base
# image and lint join them. On a fresh machine all of it is CPU bound but
# the downloads, which now overlap the compiles. Their output interleaves as
# it comes (no --output-sync: make would hold a command's output until it
# ends, and a hung apt-get or mkbase.sh would show nothing).
test-setup:
	@$(MAKE) --no-print-directory -j4 lint base-image cosign syft

cosign: $(COSIGN)
$(COSIGN):
	@mkdir -p $(@D).tmp
	CGO_ENABLED=0 GOBIN=$(@D).tmp $(GO) install -ldflags '-s -w' github.com/sigstore/cosign/v2/cmd/cosign@$(COSIGN_VERSION)
	@mkdir -p $(@D)
	mv $(@D).tmp/cosign $@
	rmdir $(@D).tmp

syft: $(SYFT)
$(SYFT):
	@mkdir -p $(@D).tmp
	CGO_ENABLED=0 GOBIN=$(@D).tmp $(GO) install -ldflags '-s -w -X main.version=$(SYFT_VERSION)' github.com/anchore/syft/cmd/syft@$(SYFT_VERSION)
	@mkdir -p $(@D)
	mv $(@D).tmp/syft $@
	rmdir $(@D).tmp

staticcheck: $(STATICCHECK)
$(STATICCHECK):
	@mkdir -p $(@D).tmp
	CGO_ENABLED=0 GOBIN=$(@D).tmp $(GO) install -ldflags '-s -w' honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@mkdir -p $(@D)
	mv $(@D).tmp/staticcheck $@
	rmdir $(@D).tmp

# The tests, fuzzing and dry-runs, as jobs that two lanes (the two cores
# CI has) take from one queue, longest first (scripts/testlanes.sh says
# what each job runs and why): the tagged build's tests in full where
# -short leaves out builds and boots, the race detector over every test
# that needs no appliance, the CGO-free build's tests where its file set differs
# (scripts/testpkgs.sh computes both lists), make fuzz, the dry-runs.
# smoke runs as three processes, the tagged builds' longest package beside
# the others from the start. make fails if any job does, naming it. The
# builds of the run share one package cache (testenv.PackageCache), new
# for each run, so each .deb is fetched once a run, on the host, by
# whichever test needs it first. (The recipe names no $(MAKE), so that
# make -n test shows it and runs nothing; the fuzz job calls make itself.)
test: test-setup
	@pkgs=$$(mktemp -d -t imagectl-test-packages.XXXXXX) || exit 1; export IMAGECTL_TEST_PACKAGE_CACHE=$$pkgs; \
	trap 'rm -rf "$$pkgs"' EXIT; trap 'exit 130' INT TERM; \
	GO=$(GO) TAGS=$(TAGS) BIN=$(BIN) BASE_VARS=$(BASE_VARS) scripts/testlanes.sh; rc=$$?; \
	du -sh "$$pkgs"; exit $$rc

# Plan and repack benchmarks, then the packing comparison on the base image
# (one iteration each: every run launches an appliance).
bench: build base-image cosign
	$(GO) test -run '^$$' -bench . -benchmem ./builder/pack ./builder/plan ./recipes
	$(GO) test -run '^$$' -bench Upload1GiB -benchtime 3x ./upload/maas
	$(GO) test -run '^$$' -bench PushPull1GiB -benchtime 1x ./store/oci
	$(GO) test -run '^$$' -bench Rollout20Sites -benchtime 1x ./release
	$(GO) test -run '^$$' -bench PredeployVsStatus -benchtime 5x ./release
	$(GO) test -run '^$$' -bench WarmRacks -benchtime 1x ./racks
	$(GO) test -run '^$$' -bench CompareWithLocalCopy ./racks
	$(GO) test -run '^$$' -bench 'Scan|ReadTgz|ExtractTgz' -benchtime 3x ./sbom
	$(GO) test -tags $(TAGS) -run '^$$' -bench 'Pack|BuildTimes' -benchtime 1x -timeout 180m ./builder/guestfs
	$(GO) test -tags $(TAGS) -run '^$$' -bench CompareFirstBoot -benchtime 1x -timeout 120m ./smoke

demo: build base-image
	$(BIN) build examples/demo.hcl -var-file $(BASE_VARS)

clean:
	rm -rf bin artifacts
