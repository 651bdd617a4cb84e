package dbtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The benchmarks' store: OPSDESK_BENCH_ROWS operations (default
// 1,000,000), seeded with COPY as internal/storeview's console benchmark
// and internal/exporter's scrape benchmark read them.

// SeedTools are the tools SeedOperations spreads the records over, in turn.
var SeedTools = []string{"create-note", "create-ticket", "send-email", "charge-card", "deploy-service"}

// BenchRows is OPSDESK_BENCH_ROWS, 1,000,000 when unset.
func BenchRows(b testing.TB) int {
	b.Helper()
	v := os.Getenv("OPSDESK_BENCH_ROWS")
	if v == "" {
		return 1_000_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("OPSDESK_BENCH_ROWS=%q: give a number of records from 1 up", v)
	}
	return n
}

// SeedOperations fills the store with a realistic mix: about 0.1% pending
// (a tenth of them stuck), 1% rejected, 0.5% released, 0.05% with
// conflicts, the rest completed, spread over 20 tenants and 30 days.
func SeedOperations(b testing.TB, pool *pgxpool.Pool, n int) {
	b.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now()
	rows := make([][]any, 0, 10_000)
	flush := func() {
		_, err := pool.CopyFrom(ctx, pgx.Identifier{"opsdesk", "operations"},
			[]string{"tenant", "tool", "key", "tool_version", "fingerprint", "effect", "state", "outcome", "owner", "attempt",
				"leased_at", "lease_expires_at", "created_at", "updated_at", "completed_at", "expires_at", "result_ref", "conflict_count"},
			pgx.CopyFromRows(rows))
		if err != nil {
			b.Fatal(err)
		}
		rows = rows[:0]
	}
	// Autovacuum stays off while seeding, so it does not run during the
	// seed or the measurements; the VACUUM below does its work once.
	_, err := pool.Exec(ctx, `
ALTER TABLE opsdesk.operations SET (autovacuum_enabled = off);
ALTER TABLE opsdesk.conflicts SET (autovacuum_enabled = off)`)
	if err != nil {
		b.Fatal(err)
	}
	fp := make([]byte, 32)
	for i := range n {
		created := now.Add(-time.Duration(rng.Int64N(int64(30 * 24 * time.Hour))))
		tool := SeedTools[i%len(SeedTools)]
		var (
			state, outcome               any = "completed", "succeeded"
			leaseExp, completed, expires any = created.Add(30 * time.Second), created.Add(time.Second), created.Add(7 * 24 * time.Hour)
			conflicts                        = 0
		)
		switch r := rng.IntN(100_000); {
		case r < 10: // 0.01% stuck
			state, outcome, completed, expires = "pending", nil, nil, nil
			leaseExp = now.Add(-time.Duration(1+rng.IntN(3600)) * time.Second)
		case r < 100: // 0.09% live
			// Leases that outlive the seed and the measurements (seeding
			// 10M rows takes minutes): live, not stuck, while measured.
			state, outcome, completed, expires = "pending", nil, nil, nil
			created = now.Add(-time.Duration(rng.IntN(20)) * time.Second)
			leaseExp = now.Add(time.Hour + time.Duration(rng.IntN(20))*time.Second)
		case r < 1100:
			outcome = "rejected"
		case r < 1600:
			state, outcome, completed, expires = "released", nil, nil, nil
		case r < 1650:
			conflicts = 1
		}
		fp[0], fp[1], fp[2] = byte(i), byte(i>>8), byte(i>>16)
		rows = append(rows, []any{
			"tenant-" + strconv.Itoa(rng.IntN(20)), tool, fmt.Sprintf("run-%d:%s", i, tool), "1", slices.Clone(fp),
			"external_unknown", state, outcome, "worker-" + strconv.Itoa(i%8), 1,
			created, leaseExp, created, created, completed, expires, nil, conflicts,
		})
		if len(rows) == cap(rows) {
			flush()
		}
	}
	if len(rows) > 0 {
		flush()
	}
	_, err = pool.Exec(ctx, `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '2', decode(repeat('ee', 32), 'hex'), fingerprint, 'worker-9'
FROM opsdesk.operations WHERE conflict_count > 0`)
	if err != nil {
		b.Fatal(err)
	}
	// The steady state autovacuum keeps: statistics and a visibility map,
	// so the overview's counts are index-only scans. The throw-away
	// cluster commits asynchronously, and VACUUM marks a page all-visible
	// only once it could set the commit hint bits of its rows, which it may
	// not do before the commits' WAL is flushed: CHECKPOINT flushes it
	// first. (Without it, 200,000 rows left 909 of 6,061 pages
	// all-visible, and the overview took 19.5 ms instead of 4.2.)
	_, err = pool.Exec(ctx, `CHECKPOINT`)
	if err != nil {
		b.Fatal(err)
	}
	// record_conflicts too, which the conflicts' triggers filled
	// (migration 00022): autovacuum would in time.
	_, err = pool.Exec(ctx, `VACUUM (ANALYZE) opsdesk.operations, opsdesk.conflicts, opsdesk.record_conflicts`)
	if err != nil {
		b.Fatal(err)
	}
	_, err = pool.Exec(ctx, `
ALTER TABLE opsdesk.operations RESET (autovacuum_enabled);
ALTER TABLE opsdesk.conflicts RESET (autovacuum_enabled)`)
	if err != nil {
		b.Fatal(err)
	}
	var pages, visible int64
	err = pool.QueryRow(ctx, `SELECT relpages, relallvisible FROM pg_class WHERE oid = 'opsdesk.operations'::regclass`).Scan(&pages, &visible)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("operations: %d pages, %d all-visible", pages, visible)
}

// MeasureP95 runs q b.N times and reports the p95 and p50 in milliseconds
// (p95-ms and p50-ms), as the console's benchmarks do.
func MeasureP95(b *testing.B, q func(ctx context.Context) error) {
	b.Helper()
	ctx := context.Background()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := q(ctx); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)*95/100].Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
}
