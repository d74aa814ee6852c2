#!/usr/bin/env bash
# with-dispenser.sh COMMAND [ARG...]: runs COMMAND against a live
# dispenser: a nats-server with JetStream on a free loopback port (a
# temporary store) and the dispenser binary built from this repository
# on it, both stopped when COMMAND ends. COMMAND gets NATS_URL. Exits
# with COMMAND's status. The empty-project checks of the clients use it.
#
# nats-server: UID_TEST_NATS_SERVER, else on PATH, else ~/go/bin, else
# /usr/sbin. The dispenser: UID_DISPENSER_BIN, else go build ./cmd/dispenser.
# DISPENSER_* variables in the environment reach the dispenser.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/uid-with-dispenser.XXXXXX")"
nats_pid="" dispenser_pid=""
cleanup() {
	[ -z "$dispenser_pid" ] || { kill "$dispenser_pid" 2>/dev/null; wait "$dispenser_pid" 2>/dev/null || true; }
	[ -z "$nats_pid" ] || { kill "$nats_pid" 2>/dev/null; wait "$nats_pid" 2>/dev/null || true; }
	rm -rf "$work"
}
trap cleanup EXIT

nats_server="${UID_TEST_NATS_SERVER:-}"
for candidate in "$(command -v nats-server || true)" "$HOME/go/bin/nats-server" /usr/sbin/nats-server; do
	[ -n "$nats_server" ] && break
	[ -x "$candidate" ] && nats_server="$candidate"
done
[ -n "$nats_server" ] || { echo "with-dispenser: no nats-server binary" >&2; exit 1; }

dispenser="${UID_DISPENSER_BIN:-}"
if [ -z "$dispenser" ]; then
	dispenser="$work/dispenser"
	(cd "$root" && go build -o "$dispenser" ./cmd/dispenser)
fi

# JetStream syncs every write before acknowledging it where the server
# can (sync_interval exists from 2.10); a 2.9 server gets the store
# alone. Either way the dispenser runs with DISPENSER_STORE_LOSS_WINDOW=0
# (unless the environment sets it): the store is temporary and dies with
# this script, so no later instance can repeat IDs against a store that
# forgot, and with the default window (2m) the dispenser would wait that
# long before serving (docs/operations.md, "What the guarantees assume").
{
	echo "jetstream {"
	echo "  store_dir: \"$work/store\""
	case "$("$nats_server" --version 2>&1)" in
	*v2.9.* | *v2.[0-8].*) ;;
	*) echo "  sync_interval: always" ;;
	esac
	echo "}"
} >"$work/nats.conf"
# -p -1: the server picks a free port and writes it to the ports file.
"$nats_server" -c "$work/nats.conf" -a 127.0.0.1 -p -1 --ports_file_dir "$work" >"$work/nats.log" 2>&1 &
nats_pid=$!
url=""
for _ in $(seq 1 3000); do # at most 30 s
	ports="$(ls "$work"/*.ports 2>/dev/null | head -1 || true)"
	if [ -n "$ports" ]; then
		url="$(sed -n 's/.*"nats":\["\([^"]*\)".*/\1/p' "$ports")"
		[ -n "$url" ] && break
	fi
	kill -0 "$nats_pid" 2>/dev/null || { cat "$work/nats.log" >&2; exit 1; }
	sleep 0.01
done
[ -n "$url" ] || { echo "with-dispenser: nats-server wrote no ports file" >&2; cat "$work/nats.log" >&2; exit 1; }

# At level info the dispenser logs when it serves (msg=serving, or
# event=service.serving), which is when COMMAND may start.
DISPENSER_STORE_LOSS_WINDOW="${DISPENSER_STORE_LOSS_WINDOW:-0}" DISPENSER_NATS_URL="$url" DISPENSER_LOG_LEVEL=info "$dispenser" >"$work/dispenser.log" 2>&1 &
dispenser_pid=$!
ready=""
for _ in $(seq 1 6000); do # at most 60 s
	kill -0 "$dispenser_pid" 2>/dev/null || { echo "with-dispenser: the dispenser exited:" >&2; cat "$work/dispenser.log" >&2; exit 1; }
	if grep -q 'msg=serving\|"msg":"serving"\|event=service.serving' "$work/dispenser.log"; then ready=1; break; fi
	sleep 0.01
done
[ -n "$ready" ] || { echo "with-dispenser: the dispenser did not start serving:" >&2; cat "$work/dispenser.log" >&2; exit 1; }

set +e
NATS_URL="$url" "$@"
status=$?
set -e
if [ "$status" -ne 0 ]; then
	echo "with-dispenser: '$*' exited $status; the dispenser's log:" >&2
	tail -20 "$work/dispenser.log" >&2
fi
exit "$status"
