#!/usr/bin/env bash
# make bench-e2e (part of make bench): the end-to-end benchmarks side by
# side in one run, then the generated section of BENCHMARKS.md and
# docs/benchmarks.svg (tools/internal/benchreport, built in the tools
# module and run from the repository root).
#
# Each of REPS rounds runs every Go scenario once (go test -bench -count 1
# over ./natsio/: batch sizes, prefetcher, JetStream blocks, queue group)
# and then scripts/bench-service.sh once (the nats CLI against uid.next and
# an echo service, alternated), so slow drifts of a shared machine's load
# hit all scenarios alike. Raw output: bench-e2e-go.txt, bench-e2e-cli.txt.
#
# Needs the nats CLI v0.5.0 (installed with go install when missing).
# Usage: scripts/bench-report.sh [REPS]   (default 5)
# BENCHTIME sets go test's -benchtime (default 1s); BENCH_MD and BENCH_SVG
# write the report elsewhere (trial runs); BENCH_MSGS1/BENCH_MSGS8 go to
# bench-service.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${1:-5}
GO_BENCH='^Benchmark(BatchBinary|Prefetcher|Blocks|QueueGroup)$/^(ids=(1|64|1024|16384)|batch=8192|consumers=(1|4)|dispensers=(1|2|3))$'
NATS_CLI=${NATS_CLI:-$(command -v nats || true)}
if [ -z "$NATS_CLI" ]; then
	NATS_CLI=$(go env GOPATH)/bin/nats
	[ -x "$NATS_CLI" ] || go install github.com/nats-io/natscli/nats@v0.5.0
fi
export NATS_CLI

# benchreport lives in the tools module: built once, run from here so that
# the paths it is given stay relative to the repository root.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go -C tools build -o "$tmp/benchreport" ./internal/benchreport
benchreport() { "$tmp/benchreport" "$@"; }

{
	echo "run: $(date -u +%Y-%m-%dT%H:%MZ), $REPS rounds"
	echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), shared with other jobs: load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
	echo "software: $(go version | awk '{print $3}'), nats-server $(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2), nats.go $(go list -m -f '{{.Version}}' github.com/nats-io/nats.go), natscli $("$NATS_CLI" --version 2>&1)"
} >bench-e2e-env.txt

: >bench-e2e-go.txt
: >bench-e2e-cli.txt
for rep in $(seq 1 "$REPS"); do
	echo "== round $rep of $REPS"
	go test -run '^$' -bench "$GO_BENCH" -benchtime "${BENCHTIME:-1s}" -count 1 -timeout 30m ./natsio/ | tee -a bench-e2e-go.txt
	scripts/bench-service.sh 1 | tee -a bench-e2e-cli.txt
done
sed -i "s/at the start\$/at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end/" bench-e2e-env.txt

# Sustained: 4 clients × uid.batch 4096 against a bare counter responder
# and default dispensers, for SUSTAINED_BENCHTIME each (default 60s), with
# the per-second series drawn in docs/sustained.svg.
UID_BENCH_SERIES="$PWD/bench-sustained-series.txt" go test -run '^$' -bench Sustained -benchtime "${SUSTAINED_BENCHTIME:-60s}" -count 1 -timeout 60m ./dispenser/ | tee bench-sustained.txt
benchreport -series bench-sustained-series.txt -series-svg docs/sustained.svg

benchreport -go bench-e2e-go.txt -cli bench-e2e-cli.txt -env bench-e2e-env.txt \
	-md "${BENCH_MD:-BENCHMARKS.md}" -svg "${BENCH_SVG:-docs/benchmarks.svg}" \
	-msgs1 "${BENCH_MSGS1:-50000}" -msgs8 "${BENCH_MSGS8:-100000}"
