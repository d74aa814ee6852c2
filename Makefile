# The one command that proves the project: `make test`. .ci/run calls it.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK = $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
PKGS := ./...

.PHONY: test lint unit verify run docs bench bench-core bench-e2e bench-peers services soak soak-short soak-regions faults ops-check rules dashboards

# verify (spin: one core for under two minutes) runs beside lint and the Go
# tests, at a lower priority, its output printed when it ends: that keeps
# make test near 6 minutes on two cores. The operators' Go packages run
# with the other tools packages in unit; rules adds promtool's checks.
# -k and unit's own bookkeeping run every suite when one fails: a failure
# in lint or in the product's packages must not hide the tools', the
# Helm chart's, the soak's or promtool's; make test fails at the end.
# Each failed go test suite's digest (scripts/gotest.sh) is printed again
# last, so that a log cut to its tail still says what failed.
test:
	@v=$$(mktemp); d=$$(mktemp); (nice -n 10 $(MAKE) --no-print-directory verify >$$v 2>&1; echo "verify exit $$?" >>$$v) & \
	UID_FAILURE_DIGEST=$$d $(MAKE) --no-print-directory -k lint unit rules; rc=$$?; wait; cat $$v; \
	tail -1 $$v | grep -qx 'verify exit 0' || rc=1; \
	if [ -s $$d ]; then echo "== make test: the failures again"; cat $$d; fi; rm -f $$v $$d; exit $$rc

# tools/ is a module of its own (the soak, the benchmark report, the
# compose check: tools that may link what the product must not); lint and
# unit cover it after the product's packages. bench/ is another module,
# run only by make bench-core.
lint:
	@echo "== gofmt"; out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@echo "== go vet"; $(GO) vet $(PKGS) && cd tools && $(GO) vet ./...
	@echo "== staticcheck"; $(STATICCHECK) $(PKGS) && cd tools && $(STATICCHECK) ./...

# -race everywhere (but the fault harness's CI-minute run: its test only
# drives processes); fuzz targets run their seed corpora as ordinary tests.
# Every package of the tools module runs, whatever is added to it (the
# Helm chart's without -race, see ops-check); but the
# CI-minute soak (tools/cmd/soak: NATS nodes, mariadbd and dispensers as
# processes) runs after the rest, not beside it: on two cores it starved
# the timing checks of the packages running with it (an empty ring met
# before padding ran, small-request latency under saturation).
# scripts/gotest.sh is go test that, on a failure, ends with how each
# failure began (a crash's message, not only its goroutine dump's end).
GOTEST = GO=$(GO) bash $(CURDIR)/scripts/gotest.sh
unit:
	rc=0; \
	$(GOTEST) -race -count=1 -timeout 15m $(PKGS) || rc=1; \
	(cd tools && $(GOTEST) -race -count=1 -timeout 15m $$($(GO) list ./... | grep -v -e '/cmd/soak$$' -e '/cmd/faults$$' -e '/tools/helmchart')) || rc=1; \
	(cd tools && $(GOTEST) -count=1 -timeout 5m ./helmchart/...) || rc=1; \
	(cd tools && $(GOTEST) -race -count=1 -timeout 15m ./cmd/soak/) || rc=1; \
	(cd tools && $(GOTEST) -count=1 -timeout 10m ./cmd/faults/) || rc=1; \
	exit $$rc

# The protocols model-checked with spin (verify/, docs/verification.md):
# every model passes, every mutation is caught.
verify:
	bash scripts/verify.sh

run:
	$(GO) run ./cmd/dispenser

# The operators' tooling, in the tools module (its Helm, Kubernetes,
# Prometheus and Grafana dependencies stay out of the main go.mod): the
# dashboard's queries and the alert rules checked against a live
# dispenser's /metrics, the Helm chart rendered and decoded into the
# Kubernetes types, then promtool's check and unit tests of the rules.
# promtool is built once into the user cache by scripts/promtool.sh (about
# 6 minutes on 2 cores the first time); the first compile of the tools
# tests takes minutes too (Helm and k8s.io), later ones come from the
# build cache.
# The chart's test runs without -race: it is Helm's single-goroutine
# rendering, and Helm and k8s.io built with the race detector would double
# the first compile; the others run a dispenser in the test process.
OPS_RACE_PKGS := ./dashboards/... ./alerts/... ./internal/promcheck/...
# lint covers these packages with the rest of the tools module.
ops-check: rules
	cd tools && $(GO) test -race -count=1 -timeout 10m $(OPS_RACE_PKGS)
	cd tools && $(GO) test -count=1 -timeout 5m ./helmchart/...

# promtool's check and unit tests of the alert rules.
rules:
	bash scripts/promtool.sh check rules compose/prometheus/alerts.yml
	bash scripts/promtool.sh test rules compose/prometheus/alerts_test.yml

# Regenerates compose/grafana/uid-dispenser.json from tools/dashboards.
dashboards:
	cd tools && $(GO) run ./dashboards/gen -o ../compose/grafana/uid-dispenser.json

# Regenerates docs/configuration.md from the dispenser's configuration.
docs:
	$(GO) run ./internal/docgen

# Core benchmarks side by side with the peers (bench/ is its own module).
bench-core:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./uidcore/ | tee bench-uidcore.txt
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count 6 . | tee ../bench-peers.txt

# The peers side by side, each beside its language's atomic counter: Go
# (bwmarrin/snowflake, sonyflake; bench/) and Java (JMH: our Prefetcher,
# CosId's SegmentChainId and SnowflakeId; bench/java, ROUNDS alternated
# rounds of 1 and 8 threads, about 3 minutes a round).
ROUNDS ?= 3
bench-peers:
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count 6 . | tee ../bench-peers.txt
	bash bench/java/run.sh $(ROUNDS) | tee bench-peers-java.txt

# End-to-end benchmarks side by side in one run (REPS rounds of the
# request-reply scenarios, then the sustained loads and the JetStream
# blocks for BENCH_DURATION each, 10s by default; BENCH_DURATION=60s for
# the issue's figures): the generated section of BENCHMARKS.md,
# docs/benchmarks.svg, docs/sustained.svg and docs/sustained-seq.svg.
REPS ?= 3
bench-e2e:
	bash scripts/bench-report.sh $(REPS)

bench: bench-core bench-e2e

# Starts MariaDB and nats-server when they are not running (CI and fresh machines).
services:
	bash scripts/services.sh

# Fault-injection soak (tools/internal/soak, docs/soak.md): 3-node NATS
# cluster, a mariadbd of its own behind a cuttable proxy, two fleets of
# dispenser processes, ID and sequence clients; exits 1 on any violation.
# Without mariadbd installed it uses MariaDB on 127.0.0.1:3306
# (UID_TEST_MYSQL_DSN for another server). `make soak` is the long run: an
# hour, its chart and summary table written to docs/ (SOAK_DURATION=10m
# SOAK_FLAGS= for a shorter one that writes nothing there). The soak is
# built in the tools module and run from here, so paths in SOAK_FLAGS are
# relative to the repository root.
SOAK_DURATION ?= 62m
SOAK_FLAGS ?= -chart docs/soak-long.svg -summary-md docs/soak-long.md
RUN_SOAK = bin=$$(mktemp -d) && trap 'rm -rf "$$bin"' EXIT && $(GO) -C tools build -o "$$bin/soak" ./cmd/soak && "$$bin/soak"
soak:
	$(RUN_SOAK) -duration $(SOAK_DURATION) $(SOAK_FLAGS)

# The one-minute version CI runs (as a test of tools/cmd/soak).
soak-short:
	$(RUN_SOAK) -duration 60s

# The fault harness (tools/internal/faults, docs/faults.md), as root: a
# NATS cluster, dispensers and clients in network namespaces of their
# own; partitions, link loss, pauses, kills, power loss and clock steps on
# a seeded schedule; an independent checker. FAULTS_SUMMARY=out.json
# writes the JSON summary; FAULTS_FLAGS for more (-seed N, -sync-always,
# -nodes 5, -kinds power-loss,clock-step). Exits 1 when the check fails.
# The CI-minute version runs in make test (tools/cmd/faults).
FAULTS_DURATION ?= 30m
FAULTS_SUMMARY ?=
FAULTS_FLAGS ?=
faults:
	bin=$$(mktemp -d) && trap 'rm -rf "$$bin"' EXIT && $(GO) -C tools build -o "$$bin/faults" ./cmd/faults && \
	"$$bin/faults" -duration $(FAULTS_DURATION) $(if $(FAULTS_SUMMARY),-summary $(FAULTS_SUMMARY)) $(FAULTS_FLAGS)

# The regions mode (docs/soak.md, Across regions): two regions, each a
# 3-node NATS cluster, joined by gateways through cuttable proxies that
# delay 30 ms each way; both fleets in each region; a region's
# dispensers killed, the gateways cut, a node of each cluster and a
# region's KV leader killed. 10 minutes unless SOAK_DURATION is given on
# the command line (or in the environment); SOAK_REGIONS_FLAGS for more,
# e.g. "-chart docs/soak-regions.svg -summary-md docs/soak-regions.md".
SOAK_REGIONS_FLAGS ?=
soak-regions:
	$(RUN_SOAK) -regions 2 -duration $(if $(filter command line environment,$(origin SOAK_DURATION)),$(SOAK_DURATION),10m) $(SOAK_REGIONS_FLAGS)
