#!/usr/bin/env bash
# empty-project-typescript.sh: the TypeScript client as a new project adds
# it, by clients/typescript/README.md: `npm ci && npm pack` in the
# client's folder (nats.js, TypeScript, the build by npm's prepare, the
# package as a registry would serve it), then in an empty Node project
# `npm install <path of the .tgz>` with TypeScript 5 and @types/node 20,
# the README's quickstart (clients/typescript/examples/
# quickstart.ts, which the README shows) compiled with tsc (strict,
# ES2022, NodeNext, skipLibCheck off) and run against a live dispenser
# (scripts/with-dispenser.sh). Fails when a step fails, the example does
# not end within 60 s or prints no ID.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
client="$root/clients/typescript"
project="$(mktemp -d "${TMPDIR:-/tmp}/uid-empty-typescript.XXXXXX")"
trap 'rm -rf "$project"' EXIT
# .ci/run's TypeScript block has just run `npm ci` there: its
# node_modules is what the README's `npm ci` gives; alone, run it.
[ -d "$client/node_modules" ] || (cd "$client" && npm ci --no-audit --no-fund --loglevel=error >&2)
tgz="$(cd "$client" && npm pack --pack-destination "$project" --loglevel=error | tail -1)"
cd "$project"
npm init -y >/dev/null
npm pkg set type=module
npm install --no-audit --no-fund --loglevel=error "$project/$tgz"
npm install --no-audit --no-fund --loglevel=error --save-dev typescript@5 @types/node@20
[ ! -L node_modules/@uid-dispenser/client ] || { echo "empty-project-typescript: the client is a link, not an install" >&2; exit 1; }
# The versions a fresh install took, for the log.
npm ls --all 2>/dev/null | grep -E '@nats-io/|typescript@|@types/node@' | sed 's/^[^@]*/  /'
cat >tsconfig.json <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022",
    "lib": ["ES2022"],
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "types": ["node"],
    "strict": true,
    "skipLibCheck": false,
    "outDir": "out"
  },
  "include": ["main.ts"]
}
JSON
cp "$client/examples/quickstart.ts" main.ts
npx tsc -p .
"$root/scripts/with-dispenser.sh" timeout 60 node out/main.js | tee out.txt
ids="$(grep -cE '^[1-9][0-9]{0,18}$' out.txt || true)"
[ "$ids" -ge 3 ] || { echo "empty-project-typescript: the example printed $ids IDs, want 3" >&2; exit 1; }
grep -q '^batch of 1000: ' out.txt || { echo "empty-project-typescript: no batch line" >&2; exit 1; }
echo "empty-project-typescript: ok (npm install of the path, tsc without skipLibCheck, the README's example ended and printed $ids IDs and a batch)"
