package storeview

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// The console's queries at scale. `make bench-console` seeds
// OPSDESK_BENCH_ROWS operations (default 1,000,000) with COPY and reports
// each query's p95; run it at 1M and 10M to see the growth.
// OPSDESK_BENCH_EXPLAIN=1 also logs EXPLAIN (ANALYZE, BUFFERS) of every
// statement each query runs (add -v to see it).

var benchTools = []string{"create-note", "create-ticket", "send-email", "charge-card", "deploy-service"}

// benchCatalog knows the seeded tools but one, as a catalog may.
var benchCatalog = map[string]ToolPolicy{
	"create-note": {}, "create-ticket": {RetryWindow: 14 * 24 * time.Hour}, "send-email": {}, "charge-card": {AfterExpiry: "reject"},
}

// seed fills the store with a realistic mix: about 0.1% pending (a tenth
// of them stuck), 1% rejected, 0.5% released, 0.05% with conflicts, the
// rest completed, spread over 20 tenants and 30 days.
func seed(b *testing.B, pool *pgxpool.Pool, n int) {
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
		tool := benchTools[i%len(benchTools)]
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
	// (migration 00020): autovacuum would in time.
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

// measure runs q b.N times and reports the p95 and p50 in milliseconds.
func measure(b *testing.B, q func(ctx context.Context) error) {
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

func BenchmarkConsoleQueries(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("OPSDESK_BENCH_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("OPSDESK_BENCH_ROWS=%q: %v", v, err)
		}
	}
	d := dbtest.New(b)
	start := time.Now()
	seed(b, d.Admin, n)
	b.Logf("seeded %d operations in %v", n, time.Since(start).Round(time.Second))
	s := New(d.Admin, Options{})
	var someID int64
	// A record in the middle of the table, of the tenant the one-tenant
	// viewer sees.
	if err := d.Admin.QueryRow(context.Background(),
		`SELECT min(id) FROM opsdesk.operations WHERE tenant = 'tenant-3' AND id >= $1`, n/2).Scan(&someID); err != nil {
		b.Fatal(err)
	}
	filtered, err := ParseFilter("tenant:tenant-3 tool:send-email state:completed")
	if err != nil {
		b.Fatal(err)
	}
	deep, err := s.List(context.Background(), Query{Limit: 1, After: &Cursor{ID: int64(n / 2)}})
	if err != nil {
		b.Fatal(err)
	}

	expiring, err := ParseFilter("expires<24h")
	if err != nil {
		b.Fatal(err)
	}
	list := func(q Query) func(context.Context, *Store) error {
		return func(ctx context.Context, s *Store) error { _, err := s.List(ctx, q); return err }
	}
	// The five queries of the target, then the time sorts an operator
	// reaches with one key: `s` on the full list, the expiring tile.
	queries := []struct {
		name string
		run  func(context.Context, *Store) error
	}{
		{"Overview", func(ctx context.Context, s *Store) error { _, err := s.Overview(ctx); return err }},
		{"StuckFirstPage", list(Query{Filter: Filter{States: []State{StateStuck}}, Sort: SortLease})},
		{"FilteredPage", list(Query{Filter: filtered})},
		{"DeepPage", list(Query{After: &Cursor{ID: deep.Rows[0].ID}})},
		{"Detail", func(ctx context.Context, s *Store) error { _, err := s.Get(ctx, someID); return err }},
		{"AllByLease", list(Query{Sort: SortLease})},
		{"AllByRetention", list(Query{Sort: SortExpires})},
		{"ExpiringByRetention", list(Query{Filter: expiring, Sort: SortExpires})},
		{"FilteredByRetention", list(Query{Filter: filtered, Sort: SortExpires})},
		// The retention review, with a catalog of the seeded tools.
		{"RetentionReview", func(ctx context.Context, s *Store) error { _, err := s.Review(ctx, benchCatalog); return err }},
	}
	// As the superuser (no row-level security), then as people: a viewer
	// of every tenant and a viewer of one, whose queries go through the
	// tenant policies.
	stores := []struct {
		prefix string
		store  *Store
	}{
		{"", s},
		{"Viewer/", New(dbtest.NewPerson(b, d, "viewer", "*").Pool, Options{})},
		{"TenantViewer/", New(dbtest.NewPerson(b, d, "viewer", "tenant-3").Pool, Options{})},
	}
	for _, st := range stores {
		for _, q := range queries {
			b.Run(st.prefix+q.name, func(b *testing.B) {
				measure(b, func(ctx context.Context) error { return q.run(ctx, st.store) })
			})
		}
	}
	if os.Getenv("OPSDESK_BENCH_EXPLAIN") != "" {
		for _, q := range queries {
			explain(b, d.AdminDSN, q.name, q.run)
			explain(b, stores[2].store.pool.Config().ConnString(), "TenantViewer/"+q.name, q.run)
		}
	}
}

// statements records the SQL and arguments a pool runs.
type statements struct {
	log []pgx.TraceQueryStartData
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.log = append(s.log, data)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// explain runs a query once through a pool that records its statements,
// and logs EXPLAIN (ANALYZE, BUFFERS) of each statement with the same
// arguments.
func explain(b *testing.B, dsn string, name string, query func(context.Context, *Store) error) {
	b.Helper()
	ctx := context.Background()
	rec := &statements{}
	cfg, err := db.PoolConfig(dsn, "opsdesk-bench")
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = rec
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if err := query(ctx, New(pool, Options{})); err != nil {
		b.Fatal(err)
	}
	for i, st := range rec.log {
		if sql := strings.ToUpper(strings.TrimSpace(st.SQL)); !strings.HasPrefix(sql, "SELECT") && !strings.HasPrefix(sql, "WITH") {
			continue // begin, commit, set: nothing to plan
		}
		rows, err := pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+st.SQL, st.Args...)
		if err != nil {
			b.Fatal(err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s, statement %d: %s\nargs %v\n%s", name, i+1, st.SQL, st.Args, strings.Join(plan, "\n"))
	}
}
