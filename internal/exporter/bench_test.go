package exporter

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// BenchmarkExporterScrape: a whole scrape (every read, the exposition, the
// process's metrics) over OPSDESK_BENCH_ROWS operations (default
// 1,000,000) seeded as the console's benchmark seeds them, with a tenth of
// the first stuck records deferred. `make bench-exporter` reports the p95
// of each: a viewer of every tenant (what the alerts read), the same with
// tenant labels, and a viewer of one tenant.
func BenchmarkExporterScrape(b *testing.B) {
	d := dbtest.New(b)
	dbtest.SeedOperations(b, d.Admin, dbtest.BenchRows(b))
	operator := dbtest.NewPerson(b, d, "operator", "*")
	var deferred int
	err := operator.Pool.QueryRow(context.Background(), `
SELECT count(*) FROM (SELECT id, version FROM opsdesk.operations
    WHERE state = 'pending' AND lease_expires_at <= now() ORDER BY id LIMIT 100) o,
    opsdesk.decide(p_id => o.id, p_decision => 'defer', p_expect_version => o.version,
        p_reason => 'the provider answers tomorrow', p_snooze_until => now() + interval '1 day') r
WHERE r.outcome = 'succeeded' AND o.id % 10 = 0`).Scan(&deferred)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("deferred %d stuck records", deferred)
	// Pools as opsdesk exporter makes them.
	pool := func(p *dbtest.Person) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(p.DSN)
		if err != nil {
			b.Fatal(err)
		}
		ConfigurePool(cfg, DefaultBudget)
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		return pool
	}
	every := pool(dbtest.NewPerson(b, d, "viewer", "*"))
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"Viewer", Config{Pool: every}},
		{"Viewer/TenantLabels", Config{Pool: every, TenantLabels: true}},
		{"TenantViewer", Config{Pool: pool(dbtest.NewPerson(b, d, "viewer", "tenant-3"))}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := New(c.cfg)
			dbtest.MeasureP95(b, func(context.Context) error {
				body, _ := scrapeBody(b, e)
				if !strings.Contains(body, "\nopsdesk_scrape_partial 0\n") || !strings.Contains(body, "\nopsdesk_store_up 1\n") {
					return errors.New("a partial scrape:\n" + body)
				}
				return nil
			})
		})
	}
}
