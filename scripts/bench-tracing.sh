#!/usr/bin/env bash
# Tracing as a deployment runs it (issue 35 §4; part of make bench-e2e):
# separate processes on one nats-server v2.15 (built from go.mod's
# module):
#   - off:     the dispenser binary with no exporter (subjects uid.*);
#   - default: the same binary exporting OTLP/HTTP with the default
#              sampler (1 % of the requests without trace context),
#              subjects traced.default.*;
#   - always:  OTEL_TRACES_SAMPLER=always_on, every request recorded,
#              subjects traced.always.*;
#   - bench/otlpsink, the receiver: counts the spans by name, discards;
# and the nats CLI's `nats bench service request --clients 8` on each
# instance's .next subject, the three one after the other in every round,
# the order reversed every other round. Each traced run's req/s is
# divided by the untraced run's of the same round; the median of the
# rounds' ratios is the figure. At the end the dispensers are stopped
# (SIGTERM flushes their spans) and every request of always_on must have
# arrived at the receiver as a span: the script fails otherwise.
#
# Each run also reports the CPU the instance it loaded, the nats-server
# and the nats CLI spent per request (utime+stime from /proc and bash's
# time, in µs), and the receiver's a span for the round; at the end, the
# instances' CPU a request over all runs.
#
# Many short rounds rather than a few long ones: on this shared machine a
# run's rate moves by a quarter from one second to the next (the load of
# others), so a median needs many pairs, each of runs seconds apart.
#
# Usage: scripts/bench-tracing.sh [ROUNDS]   (default 41, about 2 minutes)
#   BENCH_TRACING_MSGS   requests per run (default 10000)
#   BENCH_TRACING_PERF   a directory: perf record each instance there,
#                        MODE.perf (call graphs; perf report -i DIR/always.perf);
#                        the figures are then perf's too
#   DISPENSER_BIN        the dispenser binary (default: built from ./cmd/dispenser)
#   NATS_CLI             the nats CLI v0.5.0 (default: nats on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${1:-41}
MSGS=${BENCH_TRACING_MSGS:-10000}
WARMUP=20000
PORT=${BENCH_PORT:-4556}
URL=nats://127.0.0.1:$PORT
NATS=${NATS_CLI:-nats}
TICK=$(getconf CLK_TCK)
. scripts/bench-lib.sh
# Only what this script sets reaches the dispensers.
for v in $(env | sed -n 's/^\(OTEL_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

go -C bench build -o "$work/otlpsink" ./otlpsink
bench_dispenser_bin
bench_nats_server "$PORT"
"$work/otlpsink" -addr 127.0.0.1:0 -addr-file "$work/sink.addr" >"$work/sink.log" 2>&1 &
pids+=($!)
sink_pid=$!
for _ in $(seq 1 50); do [ -s "$work/sink.addr" ] && break; sleep 0.1; done
sink=http://$(cat "$work/sink.addr")

declare -A prefix=([off]=uid [default]=traced.default [always]=traced.always)
declare -A pid
start() { # mode, then OTEL_* assignments
	local mode=$1
	shift
	# DISPENSER_STORE_LOSS_WINDOW=0: the store is temporary and dies with this
	# script (nothing later can repeat IDs against a store that forgot); with
	# the default window each dispenser would wait 2 minutes before serving.
	env DISPENSER_STORE_LOSS_WINDOW="${DISPENSER_STORE_LOSS_WINDOW:-0}" DISPENSER_NATS_URL="$URL" DISPENSER_LOG_LEVEL=warn DISPENSER_SUBJECT_PREFIX="${prefix[$mode]}" \
		DISPENSER_WORKER_KV_BUCKET="bench_tracing_$mode" "$@" "$DISPENSER_BIN" >"$work/$mode.log" 2>&1 &
	pid[$mode]=$!
	pids+=($!)
}
otlp=(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="$sink/v1/traces" OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)
start off
start default "${otlp[@]}"
start always "${otlp[@]}" OTEL_TRACES_SAMPLER=always_on
for mode in off default always; do
	for _ in $(seq 1 100); do
		"$NATS" -s "$URL" req "${prefix[$mode]}.next" '' >/dev/null 2>&1 && break
		sleep 0.2
	done
done
perf_pids=()
if [ -n "${BENCH_TRACING_PERF:-}" ]; then
	mkdir -p "$BENCH_TRACING_PERF"
	for mode in off default always; do
		perf record -F 499 -g -p "${pid[$mode]}" -o "$BENCH_TRACING_PERF/$mode.perf" >"$work/perf-$mode.log" 2>&1 &
		perf_pids+=($!)
	done
fi

declare -A total_ticks=([off]=0 [default]=0 [always]=0) server_ticks=([off]=0 [default]=0 [always]=0) cli_seconds=([off]=0 [default]=0 [always]=0)
cpu() { # a process's CPU time so far, in clock ticks
	awk '{print $14 + $15}' "/proc/$1/stat"
}
run() { # mode msgs → req/s (the nats CLI's aggregated figure); its CPU time in $work/time
	local TIMEFORMAT='%U %S'
	{ time "$NATS" -s "$URL" bench service request "${prefix[$1]}.next" --clients 8 --msgs "$2" --size 16B --no-progress >"$work/out" 2>&1; } 2>"$work/time"
	sed -n 's/.*aggregated stats: \([0-9,]*\) msgs\/sec.*/\1/p' "$work/out" | tr -d ,
}
per_req() { # clock ticks → µs a request
	echo "$1 $TICK $MSGS" | awk '{printf "%.1f", $1 / $2 * 1e6 / $3}'
}
for mode in off default always; do # warm-up, not reported
	run "$mode" "$WARMUP" >/dev/null
done
# The warm-up, the readiness request above and the rounds.
sent_always=$((WARMUP + 1 + ROUNDS * MSGS))

echo "tracing as deployed: $ROUNDS rounds of $MSGS requests, 8 clients, $(nproc) cores, $("$NATS" --version)"
echo "load at the start: $(uptime)"
for round in $(seq 1 "$ROUNDS"); do
	order="off default always"
	[ $((round % 2)) = 0 ] && order="always default off"
	sink_before=$(cpu "$sink_pid")
	for mode in $order; do
		before=$(cpu "${pid[$mode]}") server_before=$(cpu "$server_pid")
		rate=$(run "$mode" "$MSGS")
		used=$(($(cpu "${pid[$mode]}") - before)) server_used=$(($(cpu "$server_pid") - server_before))
		total_ticks[$mode]=$((total_ticks[$mode] + used)) server_ticks[$mode]=$((server_ticks[$mode] + server_used))
		cli_seconds[$mode]=$(awk -v t="${cli_seconds[$mode]}" '{print t + $1 + $2}' "$work/time")
		printf 'round=%s mode=%-7s req/s=%s cpu-us/req=%s nats-server=%s nats-cli=%s\n' "$round" "$mode" "$rate" \
			"$(per_req "$used")" "$(per_req "$server_used")" "$(awk -v m="$MSGS" '{printf "%.1f", ($1 + $2) * 1e6 / m}' "$work/time")" | tee -a "$work/results"
	done
	printf 'round=%s receiver cpu-us/span=%s load=%s\n' "$round" "$(per_req $(($(cpu "$sink_pid") - sink_before)))" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$work/results"
done
echo "load at the end: $(uptime)"

# The median of the rounds' own ratios to the untraced run.
echo
for mode in default always; do
	awk -v m="$mode" '
		/mode=/ { split($1, rd, "="); split($2, md, "="); split($3, q, "="); rate[rd[2], md[2]] = q[2]; rounds[rd[2]] = 1 }
		END {
			n = 0
			for (r in rounds) if (rate[r, "off"] > 0) ratio[++n] = rate[r, m] / rate[r, "off"]
			asort(ratio)
			med = (n % 2) ? ratio[(n + 1) / 2] : (ratio[n / 2] + ratio[n / 2 + 1]) / 2
			printf "median %-7s %.3f x untraced (rounds %.2f-%.2f, n=%d)\n", m, med, ratio[1], ratio[n], n
		}' "$work/results"
done | tee "$work/medians"
# CPU a request over all the runs (a run's own is a few clock ticks):
# the instance loaded, and with the nats-server and the nats CLI.
for mode in off default always; do
	echo "${total_ticks[$mode]} ${server_ticks[$mode]} ${cli_seconds[$mode]} $TICK $((ROUNDS * MSGS))" |
		awk -v m="$mode" '{d = $1 / $4 * 1e6 / $5; printf "cpu-us/req %-7s %.2f (all runs; with the nats-server and the nats CLI %.1f)\n", m, d, d + ($2 / $4 + $3) * 1e6 / $5}'
done

# Stop the dispensers (SIGTERM flushes the batch processor), then count.
for mode in off default always; do kill -TERM "${pid[$mode]}"; done
for mode in off default always; do wait "${pid[$mode]}" || echo "dispenser $mode exited with $?"; done
for p in "${perf_pids[@]}"; do wait "$p" || true; done
curl -fsS "$sink/stats" >"$work/stats"
echo
sed 's/^/receiver: /' "$work/stats"
got=$(awk -v n="process ${prefix[always]}.next" '$1 == "span" { name = $2; for (i = 3; i < NF; i++) name = name " " $i; if (name == n) print $NF }' "$work/stats")
got_default=$(awk -v n="process ${prefix[default]}.next" '$1 == "span" { name = $2; for (i = 3; i < NF; i++) name = name " " $i; if (name == n) print $NF }' "$work/stats")
echo "spans of always_on's uid.next requests: ${got:-0} of $sent_always sent; the default sampler's: ${got_default:-0} (of as many)"
if [ "${got:-0}" != "$sent_always" ]; then
	echo "bench-tracing: FAILED: $sent_always requests to always_on, ${got:-0} spans received; its log:" >&2
	tail -20 "$work/always.log" >&2
	exit 1
fi
