#!/usr/bin/env bash
# Side-by-side service benchmark for BENCHMARKS.md (## Service): the nats
# CLI's `nats bench service request` against uid.next on one dispenser and
# against `nats bench service serve` (a bare echo service), 1 and 8
# clients, alternating the two targets REPS times on the same nats-server
# (the order flips every time: uid.next first, then the echo first), and
# the dispenser's resident set (VmRSS of its process) after each of its
# runs, VmHWM (the peak) at the end.
#
# Needs the nats CLI v0.5.0 (go install github.com/nats-io/natscli/nats@v0.5.0).
# Runs a nats-server v2.15 built from go.mod's module on 127.0.0.1:$PORT.
# Usage: scripts/bench-service.sh [REPS]   (default 3; DISPENSER_BIN=path runs that binary)
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${1:-3}
PORT=${BENCH_PORT:-4555}
URL=nats://127.0.0.1:$PORT
MSGS1=${BENCH_MSGS1:-50000}
MSGS8=${BENCH_MSGS8:-100000}
NATS=${NATS_CLI:-nats}
. scripts/bench-lib.sh

bench_dispenser_bin
bench_nats_server "$PORT"

# Defaults except the log level: the production bounds on (the 2 s ahead
# bound, lanes claimed on demand, the worker ID leased in the KV bucket).
# DISPENSER_STORE_LOSS_WINDOW=0: the store is temporary and dies with this
# script (nothing later can repeat IDs against a store that forgot); with
# the default window each dispenser would wait 2 minutes before serving.
DISPENSER_STORE_LOSS_WINDOW=${DISPENSER_STORE_LOSS_WINDOW:-0} DISPENSER_NATS_URL=$URL DISPENSER_LOG_LEVEL=warn "$DISPENSER_BIN" >"$work/dispenser.log" 2>&1 &
pids+=($!)
dispenser=$!
"$NATS" -s "$URL" bench service serve bench.echo --no-progress >"$work/echo.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do
	"$NATS" -s "$URL" req uid.next '' >/dev/null 2>&1 && break
	sleep 0.2
done

run() { # clients msgs subject → "msgs/sec p50=… p99=…"
	local out rate lat
	out=$("$NATS" -s "$URL" bench service request "$3" --clients "$1" --msgs "$2" --size 16B --no-progress 2>&1)
	if [ "$1" = 1 ]; then
		echo "$out" | sed -n 's/.*requester stats: \([0-9,]*\) msgs\/sec.*P50: \([0-9.,]*[mu]*s\).*P99: \([0-9.,]*[mu]*s\).*/\1 p50=\2 p99=\3/p'
	else
		rate=$(echo "$out" | sed -n 's/.*aggregated stats: \([0-9,]*\) msgs\/sec.*/\1/p')
		lat=$(echo "$out" | sed -n 's/.*latencies per operation.*P50 \([0-9.,]*[mu]*s\).*P99 \([0-9.,]*[mu]*s\).*/p50=\1 p99=\2/p')
		echo "$rate $lat"
	fi
}

rss() { # field of the dispenser's /proc status, in kB
	awk -v f="$1:" '$1 == f {print $2 " kB"}' "/proc/$dispenser/status"
}

echo "nats-server $("$work/nats-server" --version | awk '{print $2}'), $("$NATS" --version), $(nproc) cores"
run 8 20000 uid.next >/dev/null # warm-up, not reported
run 8 20000 bench.echo >/dev/null
for clients in 1 8; do
	msgs=$MSGS1
	[ "$clients" = 8 ] && msgs=$MSGS8
	for rep in $(seq 1 "$REPS"); do
		order="uid.next bench.echo"
		[ $((rep % 2)) = 0 ] && order="bench.echo uid.next"
		for target in $order; do
			printf 'clients=%s rep=%s %-10s %s\n' "$clients" "$rep" "$target" "$(run "$clients" "$msgs" "$target")"
			if [ "$target" = uid.next ]; then
				echo "rss clients=$clients rep=$rep dispenser $(rss VmRSS)"
			fi
		done
	done
done | tee "$work/results"
# Median req/s per target and the dispenser's share of the echo's.
echo
for clients in 1 8; do
	for target in uid.next bench.echo; do
		grep "^clients=$clients .* $target " "$work/results" | awk '{gsub(",", "", $4); print $4}' | sort -n |
			awk -v c="$clients" -v t="$target" '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "median clients=%s %-10s %d req/s\n", c, t, m}'
	done
done | tee "$work/medians"
echo "rss peak dispenser $(rss VmHWM)" | tee -a "$work/results"
awk '/uid.next/ {n[$2]=$4} /bench.echo/ {e[$2]=$4} END {for (c in n) printf "%s: uid.next/echo = %.1f%%\n", c, 100*n[c]/e[c]}' "$work/medians" | sort
