# snowflaked — see README.md. Targets: build test test-unit bench perf-page chaos scale run lint docker clean.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# Static, reproducible binaries.
GOBUILD := CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)"

.PHONY: all build deps test test-unit bench perf-page chaos scale run lint docker clean

all: build

## build: bin/snowflaked, bin/snowflakectl and bin/snowflaked-chaos (-tags chaos: fault injection, never for production)
build:
	@mkdir -p bin
	$(GOBUILD) -o bin/snowflaked ./cmd/snowflaked
	$(GOBUILD) -o bin/snowflakectl ./cmd/snowflakectl
	$(GOBUILD) -tags chaos -o bin/snowflaked-chaos ./cmd/snowflaked

## deps: install ZooKeeper, chrony, faketime, wrk (and gcc for -race) when missing and root
deps:
	@scripts/install-deps.sh

## test: everything: vet, the OpenAPI lint, unit tests and integration tests (real processes, ZooKeeper, chrony), with -race; the Java, Python and TypeScript clients' tests and the conformance suite of all four clients
test: deps
	$(GO) vet ./...
	$(GO) vet -tags chaos ./...
	tests/openapi/lint/run.sh
	cd client && $(GO) vet ./...
	# The client is a module of its own (./client): its tests run there.
	cd client && $(GO) test -race -count=1 -timeout 10m ./...
	# The clients of other languages (clients/): each builds and runs its own tests against fake nodes;
	# tests/conformance (in the go test below) drives them and the Go client against real nodes.
	$(MAKE) -C clients/java test
	$(MAKE) -C clients/python test
	$(MAKE) -C clients/typescript test
	$(GO) test -race -timeout 30m ./...
	$(GO) test -race -tags chaos -timeout 10m ./node/
	# The simulations of the shipped code (node/*sim_test.go), many seeds, without -race (virtual time; SIM_SEED=N replays one).
	SIM_SEEDS=1000 $(GO) test -count=1 -run 'TestSimulation_Segments' ./node/
	SIM_SEEDS=200 $(GO) test -count=1 -run 'TestSimulation_Snowflake$$' ./node/
	SIM_SEEDS=25 $(GO) test -count=1 -run 'TestSimulation_SnowflakeBorrow$$' ./node/
	SIM_SEEDS=40 $(GO) test -count=1 -run 'TestSimulation_SnowflakePaths$$' ./node/
	SIM_SEEDS=8 $(GO) test -count=1 -run 'TestSimulation_SnowflakeRules$$' ./node/
	$(GO) test -count=1 -timeout 10m -run 'TestSimulation_Scale$$' ./node/
	# The mutation table (docs/testing.md): each safety rule broken in turn (-tags mutation), caught by a simulation above.
	$(GO) test -count=1 -tags mutation -run 'TestMutation|TestSetAndRestore' ./internal/mutation/ ./fencing/ ./node/ ./segment/ ./coordinator/
	# Allocation tests skip themselves under -race (sync.Pool drops items there): run them without it.
	$(GO) test -count=1 -run 'Alloc' ./server/ ./internal/metrics/ ./node/
	# -count=1: a new random schedule every run, and the summary below is this run's (never a cached result).
	CHAOS_SUMMARY=$(CURDIR)/bin/chaos-summary-short.txt $(GO) test -count=1 -race -tags chaos -run Chaos -timeout 10m ./tests/chaos/
	@cat bin/chaos-summary-short.txt

## test-unit: unit tests only (no TestIntegration_*)
test-unit:
	cd client && $(GO) test -race ./...
	$(GO) test -race -skip Integration ./...

## bench: benchmarks (scripts/bench.sh, its output saved in bin/bench-output.txt), then docs/performance.md with its HTTP rows (perf-page)
bench: build
	bash -o pipefail -c 'scripts/bench.sh | tee bin/bench-output.txt'
	$(MAKE) perf-page PERF_HTTP=bin/bench-output.txt

## perf-page: docs/performance.md, the generator against bwmarrin/snowflake and sonyflake in alternating rounds (scripts/perfpage.sh; PERF_ROUNDS, PERF_BENCHTIME, PERF_CPUS; PERF_HTTP=FILE: the HTTP rows from a saved scripts/bench.sh output)
perf-page:
	PERF_HTTP=$(PERF_HTTP) scripts/perfpage.sh

## chaos: long simulations (20000 segment seeds, 3000 snowflake seeds, 1000 borrow seeds, 1000 paths seeds), then fault-injection tests against real processes and ZooKeeper, long variant (a few minutes; CHAOS_SEED=N replays a schedule); summary in bin/chaos-summary.txt
chaos: deps
	SIM_SEEDS=20000 $(GO) test -count=1 -timeout 30m -run 'TestSimulation_Segments$$' ./node/
	SIM_SEEDS=3000 $(GO) test -count=1 -timeout 30m -run 'TestSimulation_Snowflake$$' ./node/
	SIM_SEEDS=1000 $(GO) test -count=1 -timeout 30m -run 'TestSimulation_SnowflakeBorrow$$' ./node/
	SIM_SEEDS=1000 $(GO) test -count=1 -timeout 30m -run 'TestSimulation_SnowflakePaths$$' ./node/
	CHAOS_LONG=1 CHAOS_SUMMARY=$(CURDIR)/bin/chaos-summary.txt $(GO) test -count=1 -tags chaos -race -run Chaos -timeout 30m ./tests/...
	@cat bin/chaos-summary.txt

## scale: real processes against a real ZooKeeper, cost per node for N in SCALE_NODES (default "32 64 96"): ZooKeeper requests/s, peer /time/s, CPU, RSS, start and recycle times (SCALE_WINDOW, SCALE_RECYCLE; scripts/scale.sh); table in bin/scale-report.md, raw in bin/scale-report.json; not in make test
scale: build
	scripts/scale.sh

## run: local ZooKeeper + a 3-node cluster on 127.0.0.1:8081-8083 (RUN_BASE_PORT), sample IDs, snowflakectl status; RUN_TLS=1: HTTPS with mutual TLS, ZooKeeper over TLS (docs/security.md); RUN_NODE_FLAGS="...": extra node flags
run: build
	scripts/run.sh

## lint: gofmt clean, go vet (both builds), go.mod/go.sum tidy, staticcheck (pinned, scripts/staticcheck.sh), cyclomatic complexity at most 25 (scripts/complexity.sh); both modules
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags chaos ./...
	$(GO) mod tidy -diff
	cd client && $(GO) vet ./... && $(GO) mod tidy -diff
	scripts/staticcheck.sh
	scripts/complexity.sh

## docker: the image snowflaked:$(VERSION) (docker/Dockerfile), its binaries and labels stamped with $(VERSION)
docker:
	docker build -f docker/Dockerfile --build-arg VERSION=$(VERSION) -t snowflaked:$(VERSION) .

clean:
	rm -rf bin .run .run-*
	$(MAKE) -C clients/java clean
	$(MAKE) -C clients/python clean
	$(MAKE) -C clients/typescript clean
