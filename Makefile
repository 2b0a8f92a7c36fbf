# Berth's build. `make run` starts the daemon with embedded defaults;
# `make test` is what CI runs (.ci/run).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build
.DELETE_ON_ERROR:

# The Go toolchain lives in /usr/local/go on every Berth machine.
export PATH := /usr/local/go/bin:$(PATH)

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
BIN     := bin/berth
# Arguments for `make run`; override them all with ARGS="...".
ARGS    ?= --data ./.berth

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 20s

.PHONY: deps build run test bench lint fuzz clean

## deps: install the system packages Berth needs (only what is missing).
deps:
	scripts/install-deps.sh

## build: the static berth binary, in bin/.
build:
	CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/berth

## run: build and start `berth serve` (data in ./.berth).
run: deps build
	./$(BIN) serve $(ARGS)

# Tests and benchmarks drive the binary just built, through BERTH_BIN.
test bench: export BERTH_BIN := $(CURDIR)/$(BIN)

## test: vet, then every test with the race detector.
test: deps build
	go vet ./...
	go test -race -count=1 -timeout 20m ./...

## bench: the benchmarks in internal/bench.
bench: build
	go test -run '^$$' -bench . -benchtime 200x -count 1 ./internal/bench/...

## lint: vet, gofmt, staticcheck and a tidy go.mod.
lint:
	go vet ./...
	@unformatted=$$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 -r gofmt -l); \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt would change these files (run gofmt -w):"; echo "$$unformatted"; exit 1; \
	fi
	go run $(STATICCHECK) ./...
	go mod tidy -diff

## fuzz: each fuzz target for $(FUZZTIME).
fuzz:
	go test -run '^$$' -fuzz '^FuzzCleanPath$$' -fuzztime $(FUZZTIME) ./internal/agent
	go test -run '^$$' -fuzz '^FuzzDecodeJSON$$' -fuzztime $(FUZZTIME) ./internal/wire

## clean: remove build output (never the data directory ./.berth).
clean:
	rm -rf bin
