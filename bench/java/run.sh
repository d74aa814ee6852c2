#!/usr/bin/env bash
# bench/java/run.sh [ROUNDS]: the Java take benchmarks (JMH), ROUNDS
# alternated rounds (default 3) of 1 and 8 threads, each round one JMH run
# per benchmark (2 warm-up and 5 measured iterations of 2 s, one fork: 10 s
# measured, so the prefetcher refills during it), the order flipped in
# every other round. Prints the median
# ops/s of each benchmark and thread count, and its ratio to AtomicLong's
# in the same configuration. make bench-peers runs it.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
rounds="${1:-3}"
(cd "$root/clients/java" && mvn -B -q install -DskipTests)
cd "$root/bench/java"
mvn -B -q package
out="$(mktemp -d "${TMPDIR:-/tmp}/uid-jmh.XXXXXX")"
# One JMH run per benchmark, in an order flipped every round, so that a
# change of the machine's load during a round does not favour one side.
benchmarks=(TakeBenchmark.atomicLong TakeBenchmark.prefetcher TakeBenchmark.cosidSegmentChain TakeBenchmark.cosidSnowflake DispenserBenchmark.prefetcherFromDispenser)
for r in $(seq 1 "$rounds"); do
	order=("${benchmarks[@]}")
	if [ $((r % 2)) -eq 0 ]; then
		order=()
		for ((i = ${#benchmarks[@]} - 1; i >= 0; i--)); do order+=("${benchmarks[$i]}"); done
	fi
	for t in 1 8; do
		for b in "${order[@]}"; do
			java -jar target/benchmarks.jar "$b\$" -f 1 -wi 2 -w 2s -i 5 -r 2s -t "$t" -rf csv -rff "$out/r$r-t$t-$b.csv" >"$out/r$r-t$t-$b.log" 2>&1
		done
		echo "round $r, $t thread(s): done ($(cut -d' ' -f1-3 /proc/loadavg) load)" >&2
	done
done
python3 - "$out" <<'PY'
import csv, glob, os, statistics, sys
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.csv")):
    for row in csv.DictReader(open(f)):
        key = (row["Benchmark"].rsplit(".", 1)[1], int(row["Threads"]))
        rows.setdefault(key, []).append(float(row["Score"]) * 1e6)  # ops/us -> ops/s
print(f"{'benchmark':<26} {'threads':>7} {'median ops/s':>14} {'ns per ID':>10} {'x AtomicLong':>13}  rounds")
for (name, t) in sorted(rows, key=lambda k: (k[1], k[0])):
    m = statistics.median(rows[(name, t)])
    base = statistics.median(rows.get(("atomicLong", t), [m]))
    # ns per ID over all threads: the wall time one ID costs the process.
    print(f"{name:<26} {t:>7} {m:>14,.0f} {1e9 / m:>10.2f} {base / m:>13.2f}  {', '.join(f'{v / 1e6:.1f}M' for v in rows[(name, t)])}")
PY
