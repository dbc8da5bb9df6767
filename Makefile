# imagectl: build, test and benchmark.
#
#   make build   the imagectl binary in bin/
#   make unit    the fast tests, for the edit loop
#   make test    everything CI runs (installs what it needs first)
#   make bench   benchmarks
#   make demo    the main job on the shipped recipes

SHELL := /bin/bash
GO ?= go
export PATH := /usr/local/go/bin:$(PATH)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/gpuaas/imagectl/builder.Version=$(VERSION)
FUZZTIME ?= 20s
BIN := bin/imagectl

.PHONY: all build deps unit test lint fuzz bench demo clean

all: build

# Debian packages the tests use; installed only when missing (root, apt).
APT_PACKAGES := shellcheck

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	$(GO) mod download

build: deps
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/imagectl

unit:
	$(GO) test -short ./...

lint: build
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^third_party/')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(BIN) fmt --check recipes layers examples testdata/recipes/valid testdata/recipes/layers

fuzz:
	$(GO) test ./recipes -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME)

test: lint
	$(GO) test -count=1 ./...
	$(MAKE) --no-print-directory fuzz
	$(BIN) build recipes/h200.hcl --dry-run --version 0.0.0-ci >/dev/null
	$(BIN) build recipes/h200-slice-vm.hcl --dry-run --output json --version 0.0.0-ci >/dev/null

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

demo: build
	$(BIN) validate recipes/h200.hcl
	$(BIN) build recipes/h200.hcl --dry-run

clean:
	rm -rf bin artifacts
