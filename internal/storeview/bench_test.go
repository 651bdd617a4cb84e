package storeview

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// The console's queries at scale. `make bench-console` seeds
// OPSDESK_BENCH_ROWS operations (default 1,000,000) with COPY and reports
// each query's p95; run it at 1M and 10M to see the growth.
// OPSDESK_BENCH_EXPLAIN=1 also logs EXPLAIN (ANALYZE, BUFFERS) of every
// statement each query runs (add -v to see it).

// benchCatalog knows the seeded tools but one, as a catalog may.
var benchCatalog = map[string]readmodel.ToolPolicy{
	"create-note": {}, "create-ticket": {RetryWindow: 14 * 24 * time.Hour}, "send-email": {}, "charge-card": {AfterExpiry: "reject"},
}

func BenchmarkConsoleQueries(b *testing.B) {
	n := dbtest.BenchRows(b)
	d := dbtest.New(b)
	start := time.Now()
	dbtest.SeedOperations(b, d.Admin, n)
	b.Logf("seeded %d operations in %v", n, time.Since(start).Round(time.Second))
	s := New(d.Admin, Config{})
	var someID int64
	// A record in the middle of the table, of the tenant the one-tenant
	// viewer sees.
	if err := d.Admin.QueryRow(context.Background(),
		`SELECT min(id) FROM opsdesk.operations WHERE tenant = 'tenant-3' AND id >= $1`, n/2).Scan(&someID); err != nil {
		b.Fatal(err)
	}
	filtered, err := readmodel.ParseFilter("tenant:tenant-3 tool:send-email state:completed")
	if err != nil {
		b.Fatal(err)
	}
	deep, err := s.List(context.Background(), readmodel.Query{Limit: 1, After: &readmodel.Cursor{ID: int64(n / 2)}})
	if err != nil {
		b.Fatal(err)
	}

	expiring, err := readmodel.ParseFilter("expires<24h")
	if err != nil {
		b.Fatal(err)
	}
	list := func(q readmodel.Query) func(context.Context, *Store) error {
		return func(ctx context.Context, s *Store) error { _, err := s.List(ctx, q); return err }
	}
	// The five queries of the target, then the time sorts an operator
	// reaches with one key: `s` on the full list, the expiring tile.
	queries := []struct {
		name string
		run  func(context.Context, *Store) error
	}{
		{"Overview", func(ctx context.Context, s *Store) error { _, err := s.Overview(ctx); return err }},
		{"StuckFirstPage", list(readmodel.Query{Filter: readmodel.Filter{States: []readmodel.State{readmodel.StateStuck}}, Sort: readmodel.SortLease})},
		{"FilteredPage", list(readmodel.Query{Filter: filtered})},
		{"DeepPage", list(readmodel.Query{After: &readmodel.Cursor{ID: deep.Rows[0].ID}})},
		{"Detail", func(ctx context.Context, s *Store) error { _, err := s.Get(ctx, someID); return err }},
		{"AllByLease", list(readmodel.Query{Sort: readmodel.SortLease})},
		{"AllByRetention", list(readmodel.Query{Sort: readmodel.SortExpires})},
		{"ExpiringByRetention", list(readmodel.Query{Filter: expiring, Sort: readmodel.SortExpires})},
		{"FilteredByRetention", list(readmodel.Query{Filter: filtered, Sort: readmodel.SortExpires})},
		// The counts a list shows beside its page, which the console asks
		// for once the page is shown (not lists: no page waits for them).
		{"FilteredTotal", func(ctx context.Context, s *Store) error { _, err := s.Total(ctx, filtered); return err }},
		{"AllTotal", func(ctx context.Context, s *Store) error { _, err := s.Total(ctx, readmodel.Filter{}); return err }},
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
		{"Viewer/", New(dbtest.NewPerson(b, d, "viewer", "*").Pool, Config{})},
		{"TenantViewer/", New(dbtest.NewPerson(b, d, "viewer", "tenant-3").Pool, Config{})},
	}
	for _, st := range stores {
		for _, q := range queries {
			b.Run(st.prefix+q.name, func(b *testing.B) {
				dbtest.MeasureP95(b, func(ctx context.Context) error { return q.run(ctx, st.store) })
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
	if err := query(ctx, New(pool, Config{})); err != nil {
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
