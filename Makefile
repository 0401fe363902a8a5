# ralph — `make check` is the one test command (CI runs exactly this).
GO        ?= go
export RALPH_AGENTS_DIR ?= $(HOME)/.cache/ralph/agents
export GOFLAGS ?= -buildvcs=false

.PHONY: check deps agents vet test bench fuzz build demo

check: deps agents vet test

deps:
	$(GO) mod download

# Pinned agent CLIs from the npm registry, cached outside the checkout.
agents:
	bash scripts/install-agents.sh

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

# Unit, end-to-end (testscript, real git) and real-CLI tests. The real-CLI
# tests fail instead of skipping when an agent CLI is missing.
test:
	RALPH_REQUIRE_AGENTS=1 $(GO) test -count=1 -timeout 25m ./...

build:
	$(GO) build -o bin/ralph ./cmd/ralph

demo:
	$(GO) run ./cmd/ralph demo

# Benchmarks print tables of ratios against baselines measured in the same run.
bench:
	$(GO) run ./bench

fuzz:
	$(GO) test -run x -fuzz FuzzParse -fuzztime 30s ./internal/prd/
