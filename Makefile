# Stead — run `make help` to see the targets.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
PKGS      ?= ./...
# Packages run in parallel (-p) and tests inside them with t.Parallel.
TESTFLAGS ?= -p 2 -timeout 15m
GOLANGCI_VERSION := v2.15.0
BIN       := $(CURDIR)/bin

.PHONY: help
help: ## show this help
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

.PHONY: dev
dev: ## run Stead locally with the starter example (API, workers, sweeper on 127.0.0.1:8720)
	$(GO) run ./cli/stead dev --example

.PHONY: test
test: ## run every test (what CI runs)
	$(GO) test $(TESTFLAGS) $(PKGS)

.PHONY: bench
bench: ## run the Go benchmarks (speed targets are checked here, never by timed tests)
	$(GO) test -run '^$$' -bench . -benchmem -count 1 $(PKGS)

.PHONY: lint
lint: ## gofmt check, go vet and golangci-lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@test -x $(BIN)/golangci-lint || GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	$(BIN)/golangci-lint run $(PKGS)

.PHONY: clean
clean: ## remove build output
	rm -rf $(BIN) dist
