#!/usr/bin/env bash
# Runs `go test "$@"` as make unit does, and when it fails prints, last,
# what each failure began with: the FAIL lines, and the first lines of
# any crash (a panic, a fatal error, a race report). A test binary that
# crashes dumps every goroutine, and a CI log cut to its tail would keep
# only the dump's end, without the message that says what crashed.
set -uo pipefail
GO=${GO:-go}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$GO" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo "== go test failed (exit $rc): how each failure began"
	grep -E '^(--- FAIL|FAIL|panic: |fatal error: |runtime: |WARNING: DATA RACE|ThreadSanitizer|SIG[A-Z]+: )' "$log" | head -40
	grep -n -A 12 -E '^(panic: |fatal error: |runtime: |WARNING: DATA RACE|ThreadSanitizer)' "$log" | head -80
fi
exit "$rc"
