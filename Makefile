# The one command that proves the project: `make test`. .ci/run calls it.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
PKGS := ./...

.PHONY: test check lint unit run bench soak services

test: lint unit

lint:
	@echo "== gofmt"; out=$$(gofmt -l . | grep -v '^bench/' || true); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@echo "== go vet"; $(GO) vet $(PKGS)
	@echo "== staticcheck"; $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

# -race everywhere; fuzz targets run their seed corpora as ordinary tests.
unit:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

run:
	$(GO) run ./cmd/dispenser

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./uidcore/ | tee bench-uidcore.txt

# Starts MariaDB and nats-server when they are not running (CI and fresh machines).
services:
	bash scripts/services.sh
