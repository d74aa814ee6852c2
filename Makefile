# The one command that proves the project: `make test`. .ci/run calls it.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
PKGS := ./...

.PHONY: test lint unit verify run docs bench bench-core bench-e2e services soak soak-short

test: lint verify unit

lint:
	@echo "== gofmt"; out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@echo "== go vet"; $(GO) vet $(PKGS)
	@echo "== staticcheck"; $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

# -race everywhere; fuzz targets run their seed corpora as ordinary tests.
# The CI-minute soak (cmd/soak: NATS nodes, mariadbd and dispensers as
# processes) runs after the rest, not beside it: on two cores it starved
# the timing checks of the packages running with it (an empty ring met
# before padding ran, small-request latency under saturation).
unit:
	$(GO) test -race -count=1 -timeout 15m $$($(GO) list $(PKGS) | grep -v '/cmd/soak$$')
	$(GO) test -race -count=1 -timeout 15m ./cmd/soak/

# The protocols model-checked with spin (verify/, docs/verification.md):
# every model passes, every mutation is caught.
verify:
	bash scripts/verify.sh

run:
	$(GO) run ./cmd/dispenser

# Regenerates docs/configuration.md from the dispenser's configuration.
docs:
	$(GO) run ./internal/docgen

# Core benchmarks side by side with the peers (bench/ is its own module).
bench-core:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./uidcore/ | tee bench-uidcore.txt
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count 6 . | tee ../bench-peers.txt

# End-to-end benchmarks side by side in one run (REPS rounds of every
# scenario): the generated section of BENCHMARKS.md and docs/benchmarks.svg.
REPS ?= 5
bench-e2e:
	bash scripts/bench-report.sh $(REPS)

bench: bench-core bench-e2e

# Starts MariaDB and nats-server when they are not running (CI and fresh machines).
services:
	bash scripts/services.sh

# Fault-injection soak (internal/soak, docs/soak.md): 3-node NATS cluster, a
# mariadbd of its own behind a cuttable proxy, two fleets of dispenser
# processes, ID and sequence clients; exits 1 on any violation. Without
# mariadbd installed it uses MariaDB on 127.0.0.1:3306 (UID_TEST_MYSQL_DSN for
# another server). `make soak` is the long run: an hour, its chart and
# summary table written to docs/ (SOAK_DURATION=10m SOAK_FLAGS= for a
# shorter one that writes nothing there).
SOAK_DURATION ?= 62m
SOAK_FLAGS ?= -chart docs/soak-long.svg -summary-md docs/soak-long.md
soak:
	$(GO) run ./cmd/soak -duration $(SOAK_DURATION) $(SOAK_FLAGS)

# The one-minute version CI runs (as a test of cmd/soak).
soak-short:
	$(GO) run ./cmd/soak -duration 60s
