# Stead — run `make help` to see the targets.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
PKGS      ?= ./...
# Packages run in parallel (-p) and tests inside them with t.Parallel; the race
# detector is on, since the invariants worth testing are about concurrency.
TESTFLAGS ?= -race -p 2 -timeout 15m
GOLANGCI_VERSION := v2.15.0
BIN       := $(CURDIR)/bin

# The AWS shape: three Lambda functions (functions/<fn>), custom runtime
# provided.al2023 on arm64, each a binary named bootstrap.
FUNCTIONS    := api runner sweeper
LAMBDA_BUILD := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags '-s -w'
# The Lambda Runtime Interface Emulator the end-to-end test runs the
# functions under (cached in bin/, which git ignores).
RIE_VERSION  := v0.0.0-20261030222936-bef5c4ba774d
RIE          := $(BIN)/aws-lambda-rie
CFN_LINT_VERSION := 1.51.0
# mailpit, a real SMTP server with an HTTP API that reads what it received:
# the email tests (Go and browser) start it on loopback; they skip without
# it, and fail with CI=true. infra/mailpit.Version names the same version.
MAILPIT_VERSION := v1.33.1
MAILPIT         := $(BIN)/mailpit

.PHONY: help
help: ## show this help
	@if [ -t 1 ]; then on=$$'\033[36m' off=$$'\033[0m'; else on= off=; fi; \
	grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -v on="$$on" -v off="$$off" 'BEGIN{FS=":.*## "} \
		{name[NR]=$$1; text[NR]=$$2; if (length($$1) > w) w = length($$1)} \
		END{for (i = 1; i <= NR; i++) printf "  %s%-" w "s%s  %s\n", on, name[i], off, text[i]}'

# DEV_FLAGS go to stead dev: make dev DEV_FLAGS="--addr 127.0.0.1:9000".
DEV_FLAGS ?=

.PHONY: dev
dev: ## build bin/stead and run Stead locally with the starter example (API, workers, sweeper on 127.0.0.1:8720; DEV_FLAGS="--addr …" for others)
	$(GO) build -o $(BIN)/stead ./cli/stead
	exec $(BIN)/stead dev --example $(DEV_FLAGS)

.PHONY: test
test: lint lint-template $(RIE) $(MAILPIT) webhook-oracle mcp-everything mcp-client npm-registry typescript ts-client test-browser ## run every test (what CI runs): make lint, cfn-lint, the browser tests, then go test (the Lambda end-to-end test included)
	$(GO) test $(TESTFLAGS) $(PKGS)

$(MAILPIT):
	GOBIN=$(BIN) $(GO) install github.com/axllent/mailpit@$(MAILPIT_VERSION)

.PHONY: mailpit
mailpit: $(MAILPIT) ## build the email tests' SMTP server (github.com/axllent/mailpit, pinned) into bin/ (once)

# The Standard Webhooks reference library (npm standardwebhooks, pinned in
# notify/oracle/package-lock.json) checks every delivery the webhook tests
# make; they skip without it, and fail with CI=true.
.PHONY: webhook-oracle
webhook-oracle: ## install the webhook tests' signature oracle (npm standardwebhooks) into notify/oracle
	cd notify/oracle && npm ci --no-audit --no-fund --loglevel=error

# The official MCP TypeScript SDK's client (npm @modelcontextprotocol/sdk,
# pinned in api/mcpclient/package-lock.json) drives POST /mcp in the
# end-to-end tests of stead dev and of the API function; they skip without
# it, and fail with CI=true.
.PHONY: mcp-client
mcp-client: ## install the MCP end-to-end tests' client (npm @modelcontextprotocol/sdk) into api/mcpclient
	cd api/mcpclient && npm ci --no-audit --no-fund --loglevel=error

# verdaccio, a local npm registry (npm, pinned in npm/registry/package-lock.json,
# with node-fetch overridden to 2.7.0, the only way it installs here): the npx
# test publishes the getstead packages to it (npm TestNPXGetstead); it skips
# without it, and fails with CI=true.
.PHONY: npm-registry
npm-registry: ## install the npx test's local registry (npm verdaccio) into npm/registry
	cd npm/registry && npm ci --no-audit --no-fund --loglevel=error

# The TypeScript compiler (npm typescript, pinned in
# cli/testdata/typescript/package-lock.json) checks that the project `stead
# init` writes type-checks (cli TestInitScaffold); without it the check is
# skipped, and fails with CI=true.
.PHONY: typescript
typescript: ## install the TypeScript compiler the stead init test checks the scaffold with into cli/testdata/typescript
	cd cli/testdata/typescript && npm ci --no-audit --no-fund --loglevel=error

# The HTTP API's JavaScript clients, one npm workspace (clients/package.json,
# one clients/package-lock.json, the dependencies in clients/node_modules):
# @getstead/client (clients/typescript: openapi-fetch; openapi-typescript
# and tsc to build it) and @getstead/react (clients/react, on the client:
# React; esbuild to bundle its browser test's app). cli TestTypeScriptClient
# compiles the client and drives a gated run with it, and make test-browser
# renders the React hook; they skip without it, and fail with CI=true.
.PHONY: ts-client
ts-client: ## install the JavaScript clients' workspace (clients/: @getstead/client, @getstead/react)
	cd clients && npm ci --no-audit --no-fund --loglevel=error

# The npm packages: `npx getstead` runs the prebuilt stead of its platform
# (package npm); the version is the VERSION file's.
.PHONY: npm
npm: ts-client ## build the npm packages as tarballs in dist/npm: getstead (the launcher and one per platform), @getstead/client and @getstead/react
	$(GO) run ./npm/build -out dist/npm
	cd clients && npm run build -w @getstead/client -w @getstead/react && \
		npm pack -w @getstead/client -w @getstead/react --pack-destination ../dist/npm

# The MCP reference test server (npm @modelcontextprotocol/server-everything,
# pinned in runtime/mcptool/testdata/tooling/package-lock.json) serves the
# MCP-backed tool tests (runtime/mcptool/mcptooltest starts it); they skip
# without it, and fail with CI=true.
.PHONY: mcp-everything
mcp-everything: ## install the MCP-backed tool tests' server (npm @modelcontextprotocol/server-everything) into runtime/mcptool/testdata/tooling
	cd runtime/mcptool/testdata/tooling && npm ci --no-audit --no-fund --loglevel=error

.PHONY: bench
bench: ## run the Go benchmarks (speed targets are checked here, never by timed tests)
	$(GO) test -run '^$$' -bench . -benchmem -count 1 $(PKGS)

# Redocly's OpenAPI linter (npm @redocly/cli, pinned in
# api/openapilint/package-lock.json) lints api/openapi.json in make lint,
# which installs it first, so a clean CI machine lints too.
.PHONY: redocly
redocly: ## install the OpenAPI linter (npm @redocly/cli) that make lint runs on api/openapi.json into api/openapilint
	cd api/openapilint && npm ci --no-audit --no-fund --loglevel=error

.PHONY: lint
lint: redocly ## gofmt check, go vet, golangci-lint (its depguard rules check the import layering) and redocly on the OpenAPI document
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@test -x $(BIN)/golangci-lint || GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	$(BIN)/golangci-lint run $(PKGS)
	api/openapilint/node_modules/.bin/redocly lint api/openapi.json --config api/openapilint/redocly.yaml --format=summary

.PHONY: clean
clean: ## remove build output
	rm -rf $(BIN) dist .aws-sam

.PHONY: build
build: ## build each Lambda function's bootstrap (linux/arm64) and zip it: dist/<fn>.zip
	@command -v zip >/dev/null || { echo "make build needs zip (apt-get install zip)"; exit 1; }
	@for fn in $(FUNCTIONS); do \
		mkdir -p dist/$$fn && \
		$(LAMBDA_BUILD) -o dist/$$fn/bootstrap ./functions/$$fn && \
		rm -f dist/$$fn.zip && (cd dist/$$fn && zip -q -X ../$$fn.zip bootstrap) && \
		echo "dist/$$fn.zip"; \
	done

# `sam build` calls build-<LogicalId> for each function whose Metadata says
# BuildMethod: makefile, with ARTIFACTS_DIR set.
.PHONY: build-ApiFunction build-RunnerFunction build-SweeperFunction
build-ApiFunction: ## (sam build) the api function's bootstrap into ARTIFACTS_DIR
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/api
build-RunnerFunction: ## (sam build) the runner function's bootstrap into ARTIFACTS_DIR
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/runner
build-SweeperFunction: ## (sam build) the sweeper function's bootstrap into ARTIFACTS_DIR
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/sweeper

.PHONY: deploy
deploy: ## build with SAM and deploy the stack to AWS (sam build + sam deploy --guided)
	@command -v sam >/dev/null || { \
		echo "make deploy needs the AWS SAM CLI (sam), which is not installed on this machine."; \
		echo "Install it (pip install aws-sam-cli, or AWS's installer), configure AWS credentials, and run make deploy again."; \
		exit 1; }
	@if command -v cfn-lint >/dev/null; then cfn-lint template.yaml; fi
	sam build --build-in-source
	sam deploy --guided

.PHONY: lint-template
lint-template: ## check template.yaml with cfn-lint (runs the SAM transform)
	@command -v cfn-lint >/dev/null || { echo "cfn-lint is not installed: pip install cfn-lint==$(CFN_LINT_VERSION)"; exit 1; }
	cfn-lint template.yaml

$(RIE):
	GOBIN=$(BIN) $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

.PHONY: rie
rie: $(RIE) ## build the Lambda Runtime Interface Emulator into bin/ (once)

.PHONY: e2e-lambda
e2e-lambda: $(RIE) ## run the functions' real bootstraps under the Lambda emulator against moto_server (DynamoDB, S3)
	$(GO) test -count=1 -v -run 'TestLambdaEndToEnd|TestRIE|TestQueue' ./functions/e2e/ ./infra/rie/

# The real-browser tests: the console's (console/e2e) and @getstead/react's
# useRun (clients/react/test, with console/e2e's harness): Debian's headless
# Chromium driven by playwright-core, pinned in console/e2e/package-lock.json.
E2E_DIR  := console/e2e
CHROMIUM := /usr/bin/chromium

.PHONY: test-browser
test-browser: $(MAILPIT) ts-client ## run the browser tests (the console's, and @getstead/react's useRun): headless Chromium against a real stead dev (screenshots: console/e2e/out/)
	@test -x $(CHROMIUM) || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
		else echo "$(CHROMIUM) is missing: sudo apt-get update && sudo apt-get install -y chromium (the tests skip without it, and fail with CI=true)"; fi; }
	cd $(E2E_DIR) && npm ci --no-audit --no-fund --loglevel=error
	$(GO) build -o $(BIN)/stead ./cli/stead
	cd $(E2E_DIR) && STEAD_BIN=$(BIN)/stead STEAD_MAILPIT=$(MAILPIT) node --test --test-reporter=spec console.test.js ../../clients/react/test/useRun.test.js

# Fuzzing: each target (package:FuzzName) runs for FUZZTIME, one after
# another. `make test` runs their committed seed corpora (testdata/fuzz/) as
# ordinary tests.
FUZZTIME ?= 30s
FUZZ_TARGETS := \
	./strictjson:FuzzCheck \
	./api:FuzzReadBody \
	./runtime/agent:FuzzParse \
	./runtime/agent:FuzzExpr \
	./runtime/sandbox:FuzzReadFrame \
	./runtime/jsvm:FuzzDecodeInput

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 30s), one after another
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

# The bounded soak (cli/soak_test.go): 16 clients against a real stead dev on
# loopback for SOAK, a third of the runs gated and approved, hostile handlers
# mixed in; it reports runs, errors, resident memory, workers and open
# descriptors at the start and the end, and fails on errors or growth.
SOAK         ?= 10m
SOAK_TIMEOUT ?= 1h

.PHONY: soak
soak: ## run the bounded soak against a real stead dev for SOAK (default 10m; SOAK=2m make soak); not part of make test
	STEAD_SOAK=$(SOAK) $(GO) test -count=1 -v -run '^TestSoak$$' -timeout $(SOAK_TIMEOUT) ./cli/
