# Sourced from the repository's root by the benchmark scripts that run
# processes of their own (bench-service.sh, bench-tracing.sh,
# bench-blocks-binaries.sh): what each of them sets up first.
#
#   - $work: a temporary directory, removed at exit once every process
#     whose PID is in the array pids is killed;
#   - bench_nats_server PORT: a nats-server v2.15 built from go.mod's
#     module, started on 127.0.0.1:PORT with JetStream in $work/js (its log
#     $work/server.log, its PID server_pid); returns once it accepts
#     connections;
#   - bench_dispenser_bin: DISPENSER_BIN, or else the dispenser built from
#     ./cmd/dispenser into $work.

work=$(mktemp -d)
pids=()
bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap bench_cleanup EXIT

bench_nats_server() {
	local port=$1
	go build -o "$work/nats-server" github.com/nats-io/nats-server/v2
	"$work/nats-server" -a 127.0.0.1 -p "$port" -js -sd "$work/js" >"$work/server.log" 2>&1 &
	server_pid=$!
	pids+=("$server_pid")
	# A loaded machine may take a while: up to 30 s.
	for _ in $(seq 1 300); do
		(echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "nats-server on 127.0.0.1:$port did not accept connections within 30 s:" >&2
	cat "$work/server.log" >&2
	return 1
}

bench_dispenser_bin() {
	DISPENSER_BIN=${DISPENSER_BIN:-}
	if [ -z "$DISPENSER_BIN" ]; then
		go build -o "$work/dispenser" ./cmd/dispenser
		DISPENSER_BIN=$work/dispenser
	fi
}
