#!/usr/bin/env bash
# make bench-e2e (part of make bench): the end-to-end benchmarks side by
# side in one run, then the generated section of BENCHMARKS.md,
# docs/benchmarks.svg and docs/sustained.svg (tools/internal/benchreport,
# built in the tools module and run from the repository root).
#
# Each of REPS rounds runs, one after the other, so that slow drifts of a
# machine's load hit all scenarios alike:
#   - the natsio Go benchmarks (batch sizes, prefetcher, queue group);
#   - dispenser's BenchmarkNextVsEcho: uid.next beside a bare micro echo
#     service, 1 and 8 clients, by plain requests and by the Go client;
#   - dispenser's BenchmarkTracing: uid.next and uid.batch untraced, with
#     the default sampler, and always_on over OTLP/HTTP and OTLP/gRPC;
#   - scripts/bench-service.sh: the nats CLI against uid.next on the
#     dispenser binary and against `nats bench service serve`.
# Then scripts/bench-tracing.sh: tracing as a deployment runs it (the
# dispenser binaries untraced, with the default sampler and always_on,
# the nats CLI, an OTLP receiver process that counts the spans), its own
# alternated rounds.
# Then, once, for BENCH_DURATION each: dispenser's BenchmarkSustained (IDs)
# and BenchmarkSeqSustained (a named sequence on KV and on MySQL), beside
# the bare responder, and every benchmark named ^BenchmarkBlocks in
# ./natsio/ and ./dispenser/ (the JetStream blocks: whatever those
# benchmarks report goes into the report's blocks table as it is).
#
# Raw output: bench-e2e-go.txt (rounds), bench-e2e-cli.txt, bench-e2e-tracing.txt,
# bench-sustained.txt, bench-blocks.txt, bench-*-series.txt.
#
# Needs the nats CLI v0.5.0 (installed with go install when missing),
# MariaDB on 127.0.0.1:3306 (UID_TEST_MYSQL_DSN) for the MySQL scenarios.
# Usage: scripts/bench-report.sh [REPS]   (default 3)
#   BENCH_DURATION  -benchtime of each sustained scenario (default 10s; the
#                   issue's figures: BENCH_DURATION=60s)
#   BENCHTIME       -benchtime of the rounds' natsio benchmarks (default 1s)
#   DISPENSER_PASSES  passes of the echo and tracing benchmarks per round
#                   (default 5, so 15 pairs of runs in three rounds)
#   DISPENSER_BENCHTIME  -benchtime of each of those passes (default 1s).
#                   Their ratios are the median of many short side-by-side
#                   pairs: on this VM the machine slows by a quarter for
#                   tens of seconds at a time, which a few long rounds
#                   straddle (three rounds of 5 s put the default sampler
#                   anywhere from 0.95 to 1.01 × untraced).
#   BENCH_CLI_REPS  alternations of bench-service.sh per round (default 2)
#   BENCH_TRACING_ROUNDS  rounds of bench-tracing.sh (default 41;
#                   BENCH_TRACING_MSGS requests a run, default 10000)
#   BLOCKS_BENCH    the blocks benchmarks' regexp (default ^BenchmarkBlocks)
#   BENCH_MD, BENCH_SVG, BENCH_SERIES_SVG write the report elsewhere
#   BENCH_MSGS1/BENCH_MSGS8 go to bench-service.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${1:-3}
DURATION=${BENCH_DURATION:-10s}
BENCHTIME=${BENCHTIME:-1s}
DISPENSER_PASSES=${DISPENSER_PASSES:-5}
DISPENSER_BENCHTIME=${DISPENSER_BENCHTIME:-1s}
GO_BENCH='^Benchmark(BatchBinary|Prefetcher|QueueGroup)$/^(ids=(1|64|1024|16384)|batch=8192|dispensers=(1|2|3))$'
DISPENSER_BENCH='^Benchmark(NextVsEcho|Tracing)$'
BLOCKS_BENCH=${BLOCKS_BENCH:-^BenchmarkBlocks}
NATS_CLI=${NATS_CLI:-$(command -v nats || true)}
if [ -z "$NATS_CLI" ]; then
	NATS_CLI=$(go env GOPATH)/bin/nats
	[ -x "$NATS_CLI" ] || go install github.com/nats-io/natscli/nats@v0.5.0
fi
export NATS_CLI

# benchreport lives in the tools module: built once, run from here so that
# the paths it is given stay relative to the repository root. The test
# binaries are built once too, so that rounds do not rebuild them.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go -C tools build -o "$tmp/benchreport" ./internal/benchreport
benchreport() { "$tmp/benchreport" "$@"; }
go test -c -o "$tmp/natsio.test" ./natsio/
go test -c -o "$tmp/dispenser.test" ./dispenser/
# A test binary runs in its package's directory, as go test would run it.
gotest() { # package binary args...
	local pkg=$1 bin=$2
	shift 2
	(cd "$pkg" && "$bin" -test.run '^$' "$@")
}

load() { cut -d' ' -f1-3 /proc/loadavg; }
# A benchmark that fails is named in the report and makes the script
# fail at the end, after the report of what did run.
failures=()
failed() {
	failures+=("$1")
	echo "bench-report: $1 failed" >&2
	echo "FAILED in this run: $1 (its figures are missing or partial)" >>bench-e2e-env.txt
}
{
	echo "run: $(date -u +%Y-%m-%dT%H:%MZ), $REPS rounds, sustained scenarios $DURATION each"
	echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')): load average $(load) at the start"
	echo "software: $(go version | awk '{print $3}'), nats-server $(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2), nats.go $(go list -m -f '{{.Version}}' github.com/nats-io/nats.go), natscli $("$NATS_CLI" --version 2>&1)"
} >bench-e2e-env.txt

: >bench-e2e-go.txt
rm -f bench-sustained-series.txt bench-seq-series.txt
: >bench-e2e-cli.txt
for rep in $(seq 1 "$REPS"); do
	echo "== round $rep of $REPS (load average $(load))"
	gotest natsio "$tmp/natsio.test" -test.bench "$GO_BENCH" -test.benchtime "$BENCHTIME" -test.timeout 30m | tee -a bench-e2e-go.txt || failed "round $rep: natsio"
	# Every other pass runs the echo and tracing targets in reverse order (roundOrder).
	for pass in $(seq 1 "$DISPENSER_PASSES"); do
		UID_BENCH_ROUND=$(((rep - 1) * DISPENSER_PASSES + pass)) gotest dispenser "$tmp/dispenser.test" -test.bench "$DISPENSER_BENCH" -test.benchtime "$DISPENSER_BENCHTIME" -test.timeout 30m | tee -a bench-e2e-go.txt || failed "round $rep, pass $pass: dispenser"
	done
	scripts/bench-service.sh "${BENCH_CLI_REPS:-2}" | tee -a bench-e2e-cli.txt || failed "round $rep: bench-service.sh"
done
echo "rounds: load average $(load) at their end" >>bench-e2e-env.txt

# Tracing as deployed (issue 35 §4): the dispenser binaries, the nats CLI
# and an OTLP receiver, each a process of its own; BENCH_TRACING_ROUNDS
# alternated rounds (default 41) of BENCH_TRACING_MSGS requests.
scripts/bench-tracing.sh "${BENCH_TRACING_ROUNDS:-41}" | tee bench-e2e-tracing.txt || failed "bench-tracing.sh"
echo "tracing as deployed: load average $(load) at its end" >>bench-e2e-env.txt

# Sustained: 4 clients × batches of 4,096 binary against the bare counter
# responder and default dispensers, for BENCH_DURATION each, with the
# per-second series drawn in docs/sustained.svg and docs/sustained-seq.svg.
UID_BENCH_SERIES="$PWD/bench-sustained-series.txt" gotest dispenser "$tmp/dispenser.test" -test.bench '^BenchmarkSustained$' -test.benchtime "$DURATION" -test.timeout 60m | tee bench-sustained.txt || failed BenchmarkSustained
UID_BENCH_SERIES="$PWD/bench-seq-series.txt" gotest dispenser "$tmp/dispenser.test" -test.bench '^BenchmarkSeqSustained$' -test.benchtime "$DURATION" -test.timeout 60m | tee -a bench-sustained.txt || failed BenchmarkSeqSustained
echo "sustained: load average $(load) at their end" >>bench-e2e-env.txt

# The JetStream blocks: every ^BenchmarkBlocks benchmark of both packages.
: >bench-blocks.txt
gotest natsio "$tmp/natsio.test" -test.bench "$BLOCKS_BENCH" -test.benchtime "$DURATION" -test.timeout 60m | tee -a bench-blocks.txt || failed "natsio $BLOCKS_BENCH"
gotest dispenser "$tmp/dispenser.test" -test.bench "$BLOCKS_BENCH" -test.benchtime "$DURATION" -test.timeout 60m | tee -a bench-blocks.txt || failed "dispenser $BLOCKS_BENCH"
echo "blocks: load average $(load) at their end" >>bench-e2e-env.txt

[ -s bench-sustained-series.txt ] && benchreport -series bench-sustained-series.txt -series-svg "${BENCH_SERIES_SVG:-docs/sustained.svg}"
[ -s bench-seq-series.txt ] && benchreport -series bench-seq-series.txt -series-svg "$(dirname "${BENCH_SERIES_SVG:-docs/sustained.svg}")/sustained-seq.svg" \
	-series-title "Sustained: 4 clients × uid.seq.bench.batch 4096 (binary), default configuration"
benchreport -go bench-e2e-go.txt -cli bench-e2e-cli.txt -tracing bench-e2e-tracing.txt -sustained bench-sustained.txt -blocks bench-blocks.txt -env bench-e2e-env.txt \
	-md "${BENCH_MD:-BENCHMARKS.md}" -svg "${BENCH_SVG:-docs/benchmarks.svg}" \
	-msgs1 "${BENCH_MSGS1:-50000}" -msgs8 "${BENCH_MSGS8:-100000}"
if [ ${#failures[@]} -gt 0 ]; then
	echo "bench-report: failed: ${failures[*]}" >&2
	exit 1
fi
