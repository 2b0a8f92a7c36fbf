# Berth's build. `make run` starts the daemon with embedded defaults;
# `make test` is what CI runs (.ci/run).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build
.DELETE_ON_ERROR:

# The Go toolchain lives in /usr/local/go on every Berth machine; tools/ holds
# the tools `make runsc` builds, so tests and `make run` find them first.
export PATH := $(CURDIR)/tools:/usr/local/go/bin:$(PATH)

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
BIN     := bin/berth
# Arguments for `make run`; override them all with ARGS="...".
ARGS    ?= --data ./.berth

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 20s

# gVisor's runsc, pinned (docs/gvisor.md). gVisor tags no Go module versions,
# so this is the pseudo-version of a commit on its `go` branch.
RUNSC_VERSION := v0.0.0-20260905035102-160fafc42237

.PHONY: deps build runsc run test bench toolbox lint fuzz openapi screenshots clean postgres postgres-stop

## deps: install the system packages Berth needs (only what is missing).
deps:
	scripts/install-deps.sh

## postgres: start a local Postgres for trying cluster mode (./.berth-postgres,
## 127.0.0.1:5433) and print the DSN for --database; postgres-stop stops it.
# Idempotent: a second run prints the DSN again (docs/postgres.md).
postgres: deps
	scripts/postgres.sh start

postgres-stop:
	scripts/postgres.sh stop

## build: the static berth binary, in bin/.
build:
	CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/berth

## runsc: build the pinned runsc into tools/, unless runsc is already on PATH.
# A tools/runsc built from another version (RUNSC_VERSION changed) is rebuilt.
runsc:
	@if [[ -x tools/runsc ]] && ! go version -m tools/runsc | grep -qF '$(RUNSC_VERSION)'; then rm -f tools/runsc; fi
	@command -v runsc >/dev/null || $(MAKE) --no-print-directory tools/runsc
	@echo "runsc: $$(command -v runsc) (berth serve finds tools/runsc beside bin/berth, or give --runsc)"

# About two minutes. CGO_ENABLED=0 is required: a cgo build fails every start.
tools/runsc:
	GOBIN=$(CURDIR)/tools CGO_ENABLED=0 go install gvisor.dev/gvisor/runsc@$(RUNSC_VERSION)

## run: build and start `berth serve` (data in ./.berth).
run: deps build runsc
	./$(BIN) serve $(ARGS)

# Tests and benchmarks drive the binary just built, through BERTH_BIN.
test bench: export BERTH_BIN := $(CURDIR)/$(BIN)

# timed NAME: prefix for a recipe line that prints how long it took.
timed = start=$$SECONDS; trap 'echo "make test: pass \"$(1)\" took $$((SECONDS - start))s"' EXIT;

# testtimes: what go test -json reports, printed as go test prints it, then
# each package's slowest tests (internal/testtimes). It fails when go test
# would.
TESTTIMES := bin/testtimes

## test: vet, then every test with the race detector.
# Each pass prints how long it took and its slowest tests. Tests whose
# subject does not depend on the sandbox runtime run only in the first pass
# (testenv.OnePass, docs/ARCHITECTURE.md's Testing).
test: deps build runsc
	go vet ./...
	go build -o $(TESTTIMES) ./internal/testtimes
	$(call timed,all packages) go test -json -race -count=1 -timeout 30m ./... | $(TESTTIMES)
	# The end-to-end suites again, on every isolated runtime.
	$(call timed,container) BERTH_TEST_RUNTIME=container go test -json -race -count=1 -timeout 30m ./internal/daemon/ ./cmd/berth/ | $(TESTTIMES)
	$(call timed,gvisor) BERTH_TEST_RUNTIME=gvisor go test -json -race -count=1 -timeout 30m ./internal/daemon/ ./cmd/berth/ | $(TESTTIMES)

## bench: the benchmarks in internal/bench.
bench: build
	go test -run '^$$' -bench . -benchtime 200x -count 1 ./internal/bench/...

## toolbox: install the toolbox's Debian packages and build the "toolbox"
## template against the daemon of ./.berth (start it with make run first).
toolbox: build
	BERTH=$(BIN) templates/toolbox/build.sh

## lint: vet, gofmt, staticcheck and a tidy go.mod.
lint:
	go vet ./...
	@unformatted=$$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 -r gofmt -l); \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt would change these files (run gofmt -w):"; echo "$$unformatted"; exit 1; \
	fi
	go run $(STATICCHECK) ./...
	go mod tidy -diff

## openapi: regenerate docs/openapi.json from the route table and apitype's
## comments (review the diff).
openapi:
	go test ./internal/openapi -count=1 -run '^TestAPITypeDocs$$' -update-docs
	go test ./internal/openapi -count=1 -run '^TestOpenAPIGolden$$' -update

## fuzz: each fuzz target for $(FUZZTIME).
fuzz:
	go test -run '^$$' -fuzz '^FuzzCleanPath$$' -fuzztime $(FUZZTIME) ./internal/agent
	go test -run '^$$' -fuzz '^FuzzDecodeJSON$$' -fuzztime $(FUZZTIME) ./internal/wire
	go test -run '^$$' -fuzz '^FuzzUnpack$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0 ./internal/image
	go test -run '^$$' -fuzz '^FuzzPDF$$' -fuzztime $(FUZZTIME) ./internal/docfmt
	go test -run '^$$' -fuzz '^FuzzPPTX$$' -fuzztime $(FUZZTIME) ./internal/docfmt
	go test -run '^$$' -fuzz '^FuzzPNG$$' -fuzztime $(FUZZTIME) ./internal/docfmt
	go test -run '^$$' -fuzz '^FuzzNotes$$' -fuzztime $(FUZZTIME) ./internal/pptx
	go test -run '^$$' -fuzz '^FuzzRedactURL$$' -fuzztime $(FUZZTIME) ./internal/browser
	go test -run '^$$' -fuzz '^FuzzTargetValid$$' -fuzztime $(FUZZTIME) ./internal/browser
	go test -run '^$$' -fuzz '^FuzzReadXLSX$$' -fuzztime $(FUZZTIME) ./internal/dashboard

## screenshots: PNGs of the dashboard's main pages (1280x800) into
## docs/screenshots/, shot by Chromium from a real daemon (docs/dashboard.md).
screenshots: build
	BERTH_BIN=$(CURDIR)/$(BIN) go test -count=1 -run '^TestScreenshots$$' ./internal/dashboard -screenshots=$(CURDIR)/docs/screenshots

## clean: remove build output (never the data directory ./.berth).
clean:
	rm -rf bin
