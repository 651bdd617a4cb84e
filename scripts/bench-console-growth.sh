#!/usr/bin/env bash
# The console's queries at 1M and 10M operations, and the growth between
# them (docs/benchmarks.md, issue 3). Runs the benchmark of
# `make bench-console` three times in a row, 1M, 10M, 1M again, so the 10M
# run is bracketed by two 1M runs on the same machine state, and prints
# p50 and p95 of each query per run and the growth 10M ÷ 1M (against the
# mean of the two 1M runs). The three runs use one test binary, built
# first, with the flags of `make bench-console` and -test.v.
#
# Usage: scripts/bench-console-growth.sh [BIG_ROWS] [SMALL_ROWS]
#   (defaults 10000000 and 1000000). BENCHTIME changes -test.benchtime
#   (default 40x); OPSDESK_BENCH_EXPLAIN=1 logs the plans too. Raw outputs
#   and the load average before each run are kept in $OUT (default a new
#   directory under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

big=${1:-10000000}
small=${2:-1000000}
out=${OUT:-$(mktemp -d /tmp/opsdesk-bench-console.XXXXXX)}
mkdir -p "$out"

# One test binary for the three runs, so they measure the same code.
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- internal/storeview internal/db || echo ' (internal/storeview or internal/db modified)')" | tee "$out/summary.txt"
go test -c -o "$out/storeview.test" ./internal/storeview

run() {
	local name=$1 rows=$2
	echo "== $name: $rows operations, $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/summary.txt"
	(cd internal/storeview && OPSDESK_BENCH_ROWS=$rows "$out/storeview.test" -test.run '^$' -test.bench ConsoleQueries \
		-test.benchtime "${BENCHTIME:-40x}" -test.timeout 90m -test.v) >"$out/$name.txt" 2>&1 ||
		{ cat "$out/$name.txt"; exit 1; }
	grep -E 'seeded|ConsoleQueries/' "$out/$name.txt" | sed 's/^ *//' | tee -a "$out/summary.txt"
}

run small-before "$small"
run big "$big"
run small-after "$small"

# query p50 p95 from each run, then the growth.
extract() {
	awk '/^BenchmarkConsoleQueries\/.*p95-ms/ {
		q = $1; sub(/^BenchmarkConsoleQueries\//, "", q); sub(/-[0-9]+$/, "", q)
		for (i = 1; i <= NF; i++) { if ($i == "p50-ms") p50 = $(i-1); if ($i == "p95-ms") p95 = $(i-1) }
		print q, p50, p95 }' "$1"
}
join <(extract "$out/small-before.txt" | sort) <(extract "$out/small-after.txt" | sort) |
	join - <(extract "$out/big.txt" | sort) |
	awk -v big="$big" -v small="$small" 'BEGIN {
		printf "\n%-34s %21s %21s %21s %17s\n", "query", "1M before p50/p95", "1M after p50/p95", "10M p50/p95", "growth p50/p95"
	} {
		s50 = ($2 + $4) / 2; s95 = ($3 + $5) / 2
		printf "%-34s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %8.1fx %7.1fx\n", $1, $2, $3, $4, $5, $6, $7, $6 / s50, $7 / s95
	}' | tee -a "$out/summary.txt"
echo "raw outputs in $out"
