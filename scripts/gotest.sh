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
digest() {
	echo "== go test failed (exit $rc): how each failure began"
	grep -E '^(--- FAIL|FAIL|panic: |fatal error: |runtime: |WARNING: DATA RACE|ThreadSanitizer|SIG[A-Z]+: )' "$log" | head -40
	# A failed test's last messages (file_test.go:line: ...): its t.Fatal comes
	# last, after any t.Log output (the fault harness logs a whole run
	# before its verdict); lines a server wrote to the test's log after it
	# (clean-up) are not messages and are skipped.
	awk '/^ *--- FAIL: /{ if (n) flush(); name=$0; n=0; next }
	     /^ +[^ ]+_test\.go:[0-9]+: / && name != "" { last[n % 4] = $0; n++; next }
	     /^ +/ && name != "" { next }
	     { if (name != "") flush() }
	     function flush(  i, k) { print name; k = n < 4 ? n : 4; for (i = n - k; i < n; i++) print substr(last[i % 4], 1, 600); name=""; n=0 }
	     END { if (name != "") flush() }' "$log" | head -60
	grep -n -A 12 -E '^(panic: |fatal error: |runtime: |WARNING: DATA RACE|ThreadSanitizer)' "$log" | head -80
}
if [ "$rc" -ne 0 ]; then
	digest
	# make test prints every suite's digest again at its very end, after
	# the spin models' output: a CI log cut to its tail keeps them.
	if [ -n "${UID_FAILURE_DIGEST:-}" ]; then digest >>"$UID_FAILURE_DIGEST"; fi
fi
exit "$rc"
