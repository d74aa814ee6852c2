#!/usr/bin/env bash
# empty-project-python.sh: the Python client as a new project adds it, by
# clients/python/README.md: a fresh virtualenv in an empty directory,
# `pip install <path>` of the client, then the README's quickstart
# (clients/python/examples/quickstart.py, which the README shows) run
# against a live dispenser (scripts/with-dispenser.sh). Fails when the
# install fails, the example does not end within 60 s or prints no ID.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
project="$(mktemp -d "${TMPDIR:-/tmp}/uid-empty-python.XXXXXX")"
trap 'rm -rf "$project"' EXIT
cd "$project"
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check "$root/clients/python"
cp "$root/clients/python/examples/quickstart.py" main.py
"$root/scripts/with-dispenser.sh" timeout 60 .venv/bin/python main.py | tee out.txt
# Three IDs by next, one per line, then the batch and the parse.
ids="$(grep -cE '^[1-9][0-9]{0,18}$' out.txt || true)"
[ "$ids" -ge 3 ] || { echo "empty-project-python: the example printed $ids IDs, want 3" >&2; exit 1; }
grep -q '^batch of 1000: ' out.txt || { echo "empty-project-python: no batch line" >&2; exit 1; }
echo "empty-project-python: ok (pip install of the path, the README's example ended and printed $ids IDs and a batch)"
