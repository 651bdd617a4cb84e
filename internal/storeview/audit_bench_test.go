package storeview

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// The audit browser's queries at scale. `make bench-audit` seeds
// OPSDESK_BENCH_AUDIT_ROWS audit records (default 1,000,000) and reports
// each query's p95 as a viewer of every tenant and a viewer of one of 20.
// OPSDESK_BENCH_EXPLAIN=1 logs EXPLAIN (ANALYZE, BUFFERS) of each query as
// the one-tenant viewer (add -v).

// seedAudit fills opsdesk.audit in one statement, as the superuser: n
// records over 30 days, 1% in the chain of events outside any tenant
// (access grants), the rest spread over 20 tenants, ten roles, seven
// actions, outcomes 90% succeeded, 8% denied, 2% failed, three records
// per operation. Times rise with seq in every chain, as audit_append
// makes them. The hashes are stand-ins: the chains do not verify (the
// browser never recomputes them, the detail's check says so), which
// spares a million SHA-256 chain steps in the seed.
func seedAudit(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `ALTER TABLE opsdesk.audit SET (autovacuum_enabled = off)`)
	if err != nil {
		b.Fatal(err)
	}
	_, err = pool.Exec(ctx, `
SELECT setseed(0.42);
INSERT INTO opsdesk.audit (tenant, seq, event_id, at, role, display_name, action, outcome, tool, key, operation_id,
    state_before, state_after, version_before, version_after, reason, forced, override, prev_hash, hash, hash_version)
SELECT tenant, row_number() OVER (PARTITION BY tenant ORDER BY i), md5(i::text)::uuid,
    now() - interval '30 days' + i * (interval '30 days' / `+strconv.Itoa(n)+`),
    role, role, action, outcome,
    CASE WHEN tenant <> '' THEN tool END, CASE WHEN tenant <> '' THEN 'run-' || (i / 3) || ':' || tool END,
    CASE WHEN tenant <> '' THEN i / 3 + 1 END,
    CASE WHEN action = 'decide:completed' THEN 'pending' END, CASE WHEN action = 'decide:completed' THEN 'completed' END,
    CASE WHEN action = 'decide:completed' THEN 1 END, CASE WHEN action = 'decide:completed' THEN 2 END,
    'bench reason ' || i, false, false, NULL, sha256(int8send(i)), 1
FROM (
    SELECT i,
        CASE WHEN i % 100 = 0 THEN '' ELSE 'tenant-' || floor(random() * 20)::int END AS tenant,
        'person-' || floor(random() * 10)::int AS role,
        CASE WHEN i % 100 = 0 THEN 'access:grant' ELSE (ARRAY['decide:defer', 'decide:defer', 'decide:defer',
            'decide:completed', 'decide:completed', 'decide:not-executed', 'decide:failed', 'conflicts:ack',
            'reveal:result', 'reveal:intent'])[1 + floor(random() * 10)::int] END AS action,
        (ARRAY['succeeded', 'denied', 'failed'])[CASE WHEN r < 0.90 THEN 1 WHEN r < 0.98 THEN 2 ELSE 3 END] AS outcome,
        (ARRAY['create-note', 'create-ticket', 'send-email', 'charge-card', 'deploy-service'])[1 + (i / 3) % 5] AS tool
    FROM (SELECT i, random() AS r FROM generate_series(1, `+strconv.Itoa(n)+`) i) g
) s`)
	if err != nil {
		b.Fatal(err)
	}
	// The head rows, as the chains end.
	_, err = pool.Exec(ctx, `
INSERT INTO opsdesk.audit_heads (tenant, seq, hash)
SELECT DISTINCT ON (tenant) tenant, seq, hash FROM opsdesk.audit ORDER BY tenant, seq DESC`)
	if err != nil {
		b.Fatal(err)
	}
	// As in seed: flush the WAL so VACUUM can mark pages all-visible, then
	// statistics and a visibility map, the steady state autovacuum keeps.
	for _, sql := range []string{`CHECKPOINT`, `VACUUM (ANALYZE) opsdesk.audit, opsdesk.audit_heads`,
		`ALTER TABLE opsdesk.audit RESET (autovacuum_enabled)`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuditBrowse(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("OPSDESK_BENCH_AUDIT_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("OPSDESK_BENCH_AUDIT_ROWS=%q: %v", v, err)
		}
	}
	d := dbtest.New(b)
	start := time.Now()
	seedAudit(b, d.Admin, n)
	b.Logf("seeded %d audit records in %v", n, time.Since(start).Round(time.Second))
	ctx := context.Background()

	// An operation of the one-tenant viewer's tenant in the middle of the
	// trail, and the cursor of a record half-way down.
	var opID int64
	if err := d.Admin.QueryRow(ctx, `SELECT operation_id FROM opsdesk.audit WHERE tenant = 'tenant-3' AND seq = 
    (SELECT max(seq) / 2 FROM opsdesk.audit WHERE tenant = 'tenant-3')`).Scan(&opID); err != nil {
		b.Fatal(err)
	}
	var deep readmodel.AuditCursor
	if err := d.Admin.QueryRow(ctx, `SELECT at, tenant, seq FROM opsdesk.audit WHERE tenant = 'tenant-3' AND seq = 
    (SELECT max(seq) / 2 FROM opsdesk.audit WHERE tenant = 'tenant-3')`).Scan(&deep.At, &deep.Tenant, &deep.Seq); err != nil {
		b.Fatal(err)
	}
	day := time.Now().UTC().Add(-15 * 24 * time.Hour).Truncate(time.Hour)
	filter := func(s string) readmodel.AuditFilter {
		f, err := readmodel.ParseAuditFilter(s)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	page := func(q readmodel.AuditQuery) func(context.Context, *Store) error {
		return func(ctx context.Context, s *Store) error { _, err := s.AuditList(ctx, q); return err }
	}
	queries := []struct {
		name string
		run  func(context.Context, *Store) error
	}{
		{"FirstPage", page(readmodel.AuditQuery{})},
		// Keeps about 54% of the records.
		{"UnselectiveFilter", page(readmodel.AuditQuery{Filter: filter("action:decide:* outcome:succeeded")})},
		// About 0.8%: one role's denials.
		{"SelectiveFilter", page(readmodel.AuditQuery{Filter: filter("role:person-7 outcome:denied")})},
		// Rare and old: denials of a tool in a one-hour window 15 days ago.
		{"TimeRange", page(readmodel.AuditQuery{Filter: filter("tool:send-email outcome:denied since:" +
			day.Format(time.RFC3339) + " until:" + day.Add(time.Hour).Format(time.RFC3339))})},
		// The console's "audit history of this operation".
		{"OperationHistory", page(readmodel.AuditQuery{Filter: readmodel.OperationAuditFilter("tenant-3", opID)})},
		{"KeyPrefix", page(readmodel.AuditQuery{Filter: filter("key:run-1234*")})},
		// Only the chain of no tenant: nothing for the one-tenant viewer,
		// who reads every access:grant to find that out.
		{"NoTenantChain", page(readmodel.AuditQuery{Filter: filter("action:access:grant")})},
		{"DeepPage", page(readmodel.AuditQuery{After: &deep})},
		{"Detail", func(ctx context.Context, s *Store) error {
			_, err := s.AuditRecord(ctx, deep.Tenant, deep.Seq)
			return err
		}},
	}
	stores := []struct {
		prefix string
		store  *Store
	}{
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
			explain(b, stores[1].store.pool.Config().ConnString(), "TenantViewer/"+q.name, q.run)
		}
	}
}
