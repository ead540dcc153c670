# leasekeeper — run `make` for the list of targets.
GO      ?= go
BIN     ?= bin/leasekeeper
# Empty ADDR and DB leave serve's own defaults and the environment (LEASEKEEPER_ADDR,
# LEASEKEEPER_DB) in charge: a flag passed here would silently win over them.
ADDR    ?=
DB      ?=
IMAGE   ?= leasekeeper
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# A count, not a duration: duration-based -fuzztime can fail with a spurious "context deadline
# exceeded" at its end on a busy machine (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 50000x

.DEFAULT_GOAL := help
.PHONY: help generate check-generated build install run test lint rules clients-check bench bench-http bench-backends fuzz faults mutants demo docker dockerfile-check clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

generate: ## regenerate api/ and client/internal/wire/ from openapi.yaml and web/*_templ.go from web/*.templ (pinned tools)
	$(GO) tool oapi-codegen -config api/config.yaml openapi.yaml
	$(GO) tool oapi-codegen -config client/internal/wire/config.yaml openapi.yaml
	$(GO) tool templ generate -path web

check-generated: generate ## fail when generated code drifts from its sources
	@git diff --exit-code -- api web client/internal/wire || { echo "generated code is out of date: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api web client/internal/wire)" || { git status --porcelain -- api web client/internal/wire; echo "untracked generated files: run make generate and commit"; exit 1; }

build: ## build the binary into bin/
	CGO_ENABLED=1 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/leasekeeper

install: ## install the binary with go install: into $GOBIN, else $(go env GOPATH)/bin
	CGO_ENABLED=1 $(GO) install -ldflags "-X main.version=$(VERSION)" ./cmd/leasekeeper

run: build ## build and serve (ADDR=host:port or env LEASEKEEPER_ADDR, default 127.0.0.1:8080; DB= or LEASEKEEPER_DB)
	$(BIN) serve $(if $(ADDR),--addr $(ADDR)) $(if $(DB),--db $(DB))

# go test -race -count=1 ./..., reported as it goes: a line per package as it ends, the packages
# still running every 30 s, failing tests' output, and every skipped test with its reason at the end.
test: ## run every test with the race detector (progress as it goes, skipped tests and why at the end)
	GO=$(GO) $(GO) run ./internal/testreport -- -race -count=1 ./...

lint: ## go vet, gofmt and staticcheck (generated code excluded)
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v -e '\.gen\.go$$' -e '_templ\.go$$')); test -z "$$out" || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	$(GO) tool staticcheck $$($(GO) list ./... | grep -v -e /api$$ -e /client/internal/wire$$)

rules: ## promtool check rules and promtool test rules on deploy/prometheus (needs promtool: apt-get install prometheus)
	promtool check rules deploy/prometheus/leasekeeper.rules.yml
	cd deploy/prometheus && promtool test rules leasekeeper.test.yml

clients-check: ## Go and TypeScript clients generated from the served spec, and the README tour through Prism (needs node, npm and the registries)
	bash scripts/clients-check.sh

faults: ## the long fault suite: kill -9, power loss, pauses, clocks (see FAULTS.md)
	LEASEKEEPER_FAULTS=long $(GO) test -count=1 -timeout 30m -v ./faults/

mutants: ## the mutation check: each mechanism in internal/mutants/mutants.txt switched off must fail its tests
	$(GO) run ./internal/mutants

bench: ## run the benchmarks
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

BENCH_ADDR  ?= 127.0.0.1:18090
BENCH_FLAGS ?= --baseline -c 64 -d 8s --mode cycle,renew,fenced,acquire,contend,contend-wait,watchers

bench-http: build ## start a server on a fresh database (auth on, admin key) and run leasekeeper bench against it
	@dir=$$(mktemp -d); trap 'kill $$pid 2>/dev/null; wait $$pid 2>/dev/null; rm -rf $$dir' EXIT; \
	$(BIN) serve --addr $(BENCH_ADDR) --db $$dir/bench.db --log-level warn & pid=$$!; \
	for i in $$(seq 50); do test -s $$dir/bench.db.admin-key && break; sleep 0.1; done; \
	LEASEKEEPER_API_KEY=$$(cat $$dir/bench.db.admin-key) $(BIN) bench --server http://$(BENCH_ADDR) $(BENCH_FLAGS)

bench-backends: build ## SQLite, PostgreSQL with one and three replicas, and pgbench on one throwaway PostgreSQL cluster, side by side (see BENCHMARKS.md)
	BIN=$(BIN) bash scripts/bench-backends.sh

fuzz: ## run each fuzz target FUZZTIME times (executions; default 50000x)
	@set -e; for f in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz'); do \
	  for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | cut -d' ' -f2); do \
	    echo "fuzz ./$$(dirname $$f) $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f); \
	  done; \
	done

demo: ## the paused-worker demonstration: a stale write refused and shown (needs jq)
	bash scripts/demo.sh

docker: ## build the container image, tagged leasekeeper:latest and with the version
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) -t $(IMAGE):latest .

dockerfile-check: build ## lint the Dockerfile with BuildKit's own linter (docker build --check's rules), check the image's promises and run its HEALTHCHECK with the built binary; no Docker needed
	$(GO) -C scripts/dockerfile-check vet ./...
	LEASEKEEPER_BINARY=$(abspath $(BIN)) $(GO) -C scripts/dockerfile-check test -count=1 ./...
	$(GO) -C scripts/dockerfile-check run . -context $(CURDIR) -binary $(abspath $(BIN))

clean: ## remove build output
	rm -rf bin
