#!/usr/bin/env bash
# Runs the ops benchmarks on a throw-away PostgreSQL and reports DoTxCreate's
# throughput as a ratio of RawCreate's (the same SQL without the library).
# Each round runs the pair in one process, so both see the same machine;
# the median ratio over the rounds is the figure to quote.
#
#   scripts/bench.sh [rounds] [benchtime]     (defaults: 5 rounds, 3s)
set -euo pipefail
rounds=${1:-5}
benchtime=${2:-3s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for ((r = 1; r <= rounds; r++)); do
	echo "round $r/$rounds" >&2
	go test ./ops -run '^$' -bench 'Benchmark(DoTxCreate|RawCreate|DoTxReplay|DoExternal)$' \
		-benchtime "$benchtime" -count 1 | tee -a "$out" | grep '^Benchmark' >&2
done

awk -v rounds="$rounds" '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	n[name]++; ns[name, n[name]] = $3
	for (i = 4; i <= NF; i++) if ($(i) == "allocs/op") allocs[name] = $(i - 1)
	for (i = 4; i <= NF; i++) if ($(i) == "B/op") bytes[name] = $(i - 1)
}
function median(a, k,    i, j, t) {
	for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
END {
	printf "%-12s %12s %10s %10s %10s\n", "benchmark", "median ns/op", "ops/s", "B/op", "allocs/op"
	for (name in n) {
		delete v; for (i = 1; i <= n[name]; i++) v[i] = ns[name, i]
		m = median(v, n[name])
		printf "%-12s %12.0f %10.0f %10s %10s\n", name, m, 1e9 / m, bytes[name], allocs[name]
	}
	k = 0
	for (i = 1; i <= n["DoTxCreate"] && i <= n["RawCreate"]; i++) { k++; ratio[k] = ns["RawCreate", i] / ns["DoTxCreate", i]; printf "round %d: DoTxCreate/RawCreate throughput ratio %.3f\n", i, ratio[k] }
	printf "median throughput ratio DoTxCreate/RawCreate: %.3f (target >= 0.85)\n", median(ratio, k)
}' "$out"
