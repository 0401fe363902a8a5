# ralph — `make check` is the one test command (CI runs exactly this).
GO        ?= go
export RALPH_AGENTS_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ralph/agents
export GOFLAGS ?= -buildvcs=false
# Every build and test here has the coordinator's embedded NATS server
# (docs/many-machines.md); a plain `go run`/`go install` leaves it out.
GOFLAGS += -tags=natsserver
# A race-enabled binary sleeps a second as it exits (to catch races at
# exit); the testscripts start the race-enabled ralph hundreds of times
# (cmd/ralph passes GORACE on to them).
export GORACE ?= atexit_sleep_ms=0

.PHONY: check deps agents vet test torture torture-short stress bench fuzz build demo release release-check docker-check

check: deps agents vet test torture-short release-check docker-check

deps:
	$(GO) mod download
	bash scripts/install-tools.sh

# Pinned agent CLIs from the npm registry, cached outside the checkout.
agents:
	bash scripts/install-agents.sh

vet:
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) vet -tags= ./internal/cluster ./internal/cli
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

# Packages that run the real agent CLIs. Their time is the CLIs' (the race
# detector adds seconds), so they run after the others, on a machine the
# testscripts no longer load.
REAL_CLI_PKGS = internal/e2e internal/agent
UNIT_PKGS = $$($(GO) list ./... | grep -v -x $(foreach p,$(REAL_CLI_PKGS),-e '.*/$(p)'))

# go test -json through scripts/testprogress: go test's own lines, plus a
# line at least every minute while go test prints nothing (it reports
# packages in order, so a long race-instrumented compile or one slow
# package would keep the terminal silent): what compiles, what runs.
GOTEST = $(GO) run ./scripts/testprogress $(GO) test -json

# Unit, end-to-end (testscript, real git) and real-CLI tests, all under the
# race detector (the testscripts' ralph is the race-enabled test binary).
# The real-CLI tests fail instead of skipping when an agent CLI is missing.
test:
	RALPH_REQUIRE_AGENTS=1 $(GOTEST) -count=1 -race -timeout 25m $(UNIT_PKGS)
	RALPH_REQUIRE_AGENTS=1 $(GOTEST) -count=1 -race -timeout 25m $(addprefix ./,$(REAL_CLI_PKGS))
	$(GO) test -count=1 -tags= -run 'WithoutEmbeddedServer' ./internal/cli

# The kill -9 campaign (go run ./torture -h): ralph killed at random
# moments, inside agents' git commits and gates and ralph's own worktree
# adds, squash merges and commits, in repositories of 5,000 files, then
# rerun to completion; every count of lost, duplicated or leftover things
# must be zero.
TRIALS ?= 100
torture:
	$(GO) run ./torture -trials $(TRIALS)

torture-short:
	$(GO) run ./torture -trials 5

# The unit packages 20 times over: a test that fails once in many runs
# shows up here.
stress:
	$(GOTEST) -count=20 -race -timeout 40m $(UNIT_PKGS)

build:
	$(GO) build -o bin/ralph ./cmd/ralph

# Release binaries: static (no cgo), stripped, the version stamped into
# `ralph --version` (a tag when there is one, else the commit), for linux
# and darwin on amd64 and arm64, with their SHA-256 sums.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
RELEASE_PLATFORMS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_LDFLAGS = -s -w -X github.com/ralph-loop/ralph/internal/cli.version=$(VERSION)
release:
	rm -rf dist && mkdir -p dist
	set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*} arch=$${p#*/}; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(RELEASE_LDFLAGS)' \
			-o dist/ralph-$(VERSION)-$$os-$$arch ./cmd/ralph; \
	done
	cd dist && sha256sum ralph-* > SHA256SUMS

# The release build, checked: sums, each binary's format and build
# settings, and the linux/amd64 binary's --version (scripts/release-check.sh).
release-check: release
	GO=$(GO) bash scripts/release-check.sh dist $(VERSION)

# The container image, built only where docker or podman works.
docker-check:
	bash scripts/docker-check.sh $(VERSION)

demo:
	$(GO) run ./cmd/ralph demo

# Benchmarks print tables of ratios against baselines measured in the same run.
bench:
	$(GO) run ./bench

fuzz:
	$(GO) test -run x -fuzz FuzzParse -fuzztime 30s ./internal/prd/
	$(GO) test -run x -fuzz FuzzCommitMessage -fuzztime 30s ./internal/source/
