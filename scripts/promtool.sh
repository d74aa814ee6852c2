#!/usr/bin/env bash
# Runs promtool, building it from the Go module proxy when the cache holds
# no promtool of the wanted version (`go install
# github.com/prometheus/prometheus/cmd/promtool@VERSION`: about 6 minutes
# on 2 cores, once) into a directory outside the repository, so later runs
# start at once. Arguments go to promtool:
#   scripts/promtool.sh check rules compose/prometheus/alerts.yml
set -euo pipefail
GO=${GO:-go}
version=${PROMTOOL_VERSION:-v0.316.0}
bin=${XDG_CACHE_HOME:-$HOME/.cache}/uid-dispenser-tools/bin
# go install records the module version in the binary: a version bump
# builds afresh instead of running a stale promtool.
built() { [ -x "$bin/promtool" ] && "$GO" version -m "$bin/promtool" 2>/dev/null | grep -qE "^\s+mod\s+github.com/prometheus/prometheus\s+$version(\s|$)"; }
if ! built; then
	echo "building promtool $version into $bin (once; about 6 minutes on 2 cores)" >&2
	mkdir -p "$bin"
	GOBIN=$bin GOFLAGS=-mod=mod "$GO" install "github.com/prometheus/prometheus/cmd/promtool@$version"
fi
exec "$bin/promtool" "$@"
