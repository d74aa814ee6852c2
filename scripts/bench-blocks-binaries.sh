#!/usr/bin/env bash
# Blocks through the binaries (issue 23, BENCHMARKS.md "JetStream blocks"):
# three dispensers with the default configuration and
# DISPENSER_BLOCKS_ENABLED=true on one nats-server of their own, fed to
# `client-demo -blocks -c 4 -batch 4096 -d $DURATION`. Prints client-demo's
# figures (IDs/s, errors, age of the IDs taken, the IDs the dispensers
# discarded, from their /metrics) and each dispenser's peak RSS.
#
# Worker IDs are leased in the server's KV bucket; with DISPENSER_MYSQL_DSN
# set (a database of its own, e.g. root@tcp(127.0.0.1:3306)/blocksbench)
# in MySQL. Runs a nats-server v2.15 built from go.mod's module on
# 127.0.0.1:$BENCH_PORT (default 4556), file storage in a temporary
# directory.
# Usage: scripts/bench-blocks-binaries.sh [DURATION]   (default 30s; DISPENSER_BIN=path runs that binary)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-30s}
PORT=${BENCH_PORT:-4556}
URL=nats://127.0.0.1:$PORT
. scripts/bench-lib.sh

bench_dispenser_bin
go build -o "$work/client-demo" ./cmd/client-demo
bench_nats_server "$PORT"

metrics=()
dispensers=()
for i in 1 2 3; do
	addr=127.0.0.1:$((PORT + 10 + i))
	# DISPENSER_STORE_LOSS_WINDOW=0: the store is temporary and dies with this
	# script (nothing later can repeat IDs against a store that forgot); with
	# the default window each dispenser would wait 2 minutes before serving.
	DISPENSER_STORE_LOSS_WINDOW=${DISPENSER_STORE_LOSS_WINDOW:-0} DISPENSER_NATS_URL=$URL DISPENSER_BLOCKS_ENABLED=true DISPENSER_METRICS_ADDR=$addr DISPENSER_LOG_LEVEL=warn \
		"$DISPENSER_BIN" >"$work/dispenser$i.log" 2>&1 &
	pids+=($!)
	dispensers+=($!)
	metrics+=("http://$addr/metrics")
done
# Ready: each serves /readyz once it publishes and serves.
for m in "${metrics[@]}"; do
	ready=${m%/metrics}/readyz
	for _ in $(seq 1 100); do
		curl -fs "$ready" >/dev/null 2>&1 && break
		sleep 0.2
	done
	curl -fs "$ready" >/dev/null || { echo "bench-blocks: dispenser at $ready not ready" >&2; cat "$work"/dispenser*.log >&2; exit 1; }
done

echo "nats-server $("$work/nats-server" --version | awk '{print $2}'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "store: $([ -n "${DISPENSER_MYSQL_DSN:-}" ] && echo MySQL || echo KV), 3 dispensers, default configuration, blocks on"
# The sources claim blocks with the dispensers' window (D6): with the
# client's default of 2 minutes a short run would use no block at all.
NATS_URL=$URL "$work/client-demo" -blocks -loss-window "${DISPENSER_STORE_LOSS_WINDOW:-0}" -c 4 -batch 4096 -d "$DURATION" -metrics "$(IFS=,; echo "${metrics[*]}")" 2>/dev/null ||
	status=$?
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
for i in "${!dispensers[@]}"; do
	p=${dispensers[$i]}
	echo "dispenser $((i + 1)) peak RSS $(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' /proc/"$p"/status), now $(awk '/VmRSS/ {printf "%.0f MiB", $2/1024}' /proc/"$p"/status)"
done
if grep -h "level=ERROR" "$work"/dispenser*.log; then
	status=1
fi
exit "${status:-0}"
