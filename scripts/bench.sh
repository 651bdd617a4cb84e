#!/usr/bin/env bash
# Runs the ops benchmarks on a throw-away PostgreSQL and reports, as ratios
# of throughput measured in the same process (the machine is shared and
# noisy), DoTxCreate against NaiveCreate (what a service author writes by
# hand: target >= 0.75) and RawCreate (the library's SQL without the
# library: target >= 0.9), DoTxReplay against DoTxCreate (target >= 5), and
# DoTxCreateMetrics (with ops/opsprom's hook) against DoTxCreate (>= 0.97),
# and DoTxCreateEncrypted (Config.Keyring on) against DoTxCreate (measured:
# what encryption at rest costs, no target).
# Each round runs every benchmark once, in one process; the median ratio
# over the rounds is the figure to quote.
#
#   scripts/bench.sh [rounds] [benchtime]     (defaults: 5 rounds, 3s)
set -euo pipefail
rounds=${1:-5}
benchtime=${2:-3s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for ((r = 1; r <= rounds; r++)); do
	echo "round $r/$rounds" >&2
	go test ./ops -run '^$' -bench 'Benchmark(DoTxCreate|DoTxCreateMetrics|DoTxCreateEncrypted|RawCreate|NaiveCreate|DoTxReplay|DoExternal)$' \
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
# ratios prints a/b throughput per round and their median.
function ratios(a, b, target,    i, k, r) {
	k = 0
	for (i = 1; i <= n[a] && i <= n[b]; i++) { k++; r[k] = ns[b, i] / ns[a, i]; printf "round %d: %s/%s throughput ratio %.3f\n", i, a, b, r[k] }
	printf "median throughput ratio %s/%s: %.3f (%s)\n", a, b, median(r, k), (target == "-" ? "measured, no target" : "target >= " target)
}
END {
	printf "%-18s %12s %10s %10s %10s\n", "benchmark", "median ns/op", "ops/s", "B/op", "allocs/op"
	for (name in n) {
		delete v; for (i = 1; i <= n[name]; i++) v[i] = ns[name, i]
		m = median(v, n[name])
		printf "%-18s %12.0f %10.0f %10s %10s\n", name, m, 1e9 / m, bytes[name], allocs[name]
	}
	ratios("DoTxCreate", "NaiveCreate", 0.75)
	ratios("DoTxCreate", "RawCreate", 0.9)
	ratios("DoTxReplay", "DoTxCreate", 5)
	ratios("DoTxCreateMetrics", "DoTxCreate", 0.97)
	ratios("DoTxCreateEncrypted", "DoTxCreate", "-")
}' "$out"
