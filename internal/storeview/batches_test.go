package storeview

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// The runs batchesDB makes: their filters, and the legacy run's id.
const (
	filterA = "state:stuck tool:charge-card"
	filterB = "state:stuck tool:charge-card tenant:acme"
	legacy  = "0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b"
)

// batchesDB is a store where an operator of every tenant decided as two
// bulk runs do: run A over acme and globex (acme's f1 completed, f2
// refused as changed, globex's g1 not executed), then run B (acme's f3),
// and f4 by hand. Before them, a run from before runs were recorded (no
// filter) decided acme's f5. It returns the ids by key, the runs' ids
// (A, B, legacy) and the operator.
func batchesDB(t *testing.T) (*dbtest.DB, map[string]int64, [3]string, *dbtest.Person) {
	t.Helper()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT t, 'charge-card', k, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM (VALUES ('acme', 'f1'), ('acme', 'f2'), ('acme', 'f3'), ('acme', 'f4'), ('acme', 'f5'), ('globex', 'g1')) v(t, k)`)
	require.NoError(t, err)
	ids := map[string]int64{}
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT jsonb_object_agg(key, id) FROM opsdesk.operations`).Scan(&ids))
	operator := dbtest.NewPerson(t, d, "operator", "*")
	decide := func(key, batch string, d reconcile.Decision, version int64, lookup reconcile.Lookup) {
		t.Helper()
		p := reconcile.DecideParams{OperationID: ids[key], Decision: d, ExpectVersion: version, Reason: "outage", Batch: batch,
			Evidence: reconcile.Evidence{Lookup: lookup, Summary: "lookup", Digest: "sha256:00"}}
		if d == reconcile.Completed {
			p.ResultRef, p.Evidence.Ref = "CH-"+key, "CH-"+key
		}
		_, err := desk.Decide(t.Context(), operator.Pool, p)
		if version == 1 {
			require.NoError(t, err, key)
		} else {
			require.ErrorIs(t, err, reconcile.ErrChanged, key)
		}
	}
	// The legacy run: started, decided, then made what the migration's
	// backfill makes of a run before it (no filter).
	_, err = d.Admin.Exec(t.Context(), `INSERT INTO opsdesk.batches (id, role, filter, started_at) VALUES ($1, $2, 'x', now() - interval '1 day')`,
		legacy, operator.Role)
	require.NoError(t, err)
	decide("f5", legacy, reconcile.Completed, 1, reconcile.LookupFound)
	_, err = d.Admin.Exec(t.Context(), `UPDATE opsdesk.batches SET filter = NULL WHERE id = $1`, legacy)
	require.NoError(t, err)
	runA, err := desk.StartBatch(t.Context(), operator.Pool, filterA, "Olga")
	require.NoError(t, err)
	runB, err := desk.StartBatch(t.Context(), operator.Pool, filterB, "")
	require.NoError(t, err)
	decide("f1", runA, reconcile.Completed, 1, reconcile.LookupFound)
	decide("f2", runA, reconcile.Completed, 7, reconcile.LookupFound)
	decide("g1", runA, reconcile.NotExecuted, 1, reconcile.LookupNotFound)
	decide("f3", runB, reconcile.Completed, 1, reconcile.LookupFound)
	decide("f4", "", reconcile.Completed, 1, reconcile.LookupFound)
	_, err = auditlog.Seal(t.Context(), d.Admin, "", 0)
	require.NoError(t, err)
	return d, ids, [3]string{runA, runB, legacy}, operator
}

// The runs newest first, each with when, by whom, what and its groups'
// counts; one page at a time by the cursor; and as row-level security
// lets a one-tenant viewer see them: only its tenant's part of a run.
func TestAuditBatches(t *testing.T) {
	t.Parallel()
	d, _, runs, operator := batchesDB(t)
	runA, runB := runs[0], runs[1]
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	s := New(viewer.Pool, Config{})

	page, err := s.AuditBatches(t.Context(), readmodel.BatchQuery{})
	require.NoError(t, err)
	require.Nil(t, page.Next)
	require.False(t, page.DBTime.IsZero())
	require.Len(t, page.Batches, 3, "the decision of no run is no run")
	b, a, old := page.Batches[0], page.Batches[1], page.Batches[2]
	require.Equal(t, runB, b.ID, "newest first")
	require.Equal(t, runA, a.ID)
	require.Equal(t, legacy, old.ID)
	require.Nil(t, old.Filter, "a run from before runs were recorded has no filter")
	require.Equal(t, readmodel.BatchFilterNotRecorded, old.FilterText())
	require.Equal(t, 1, old.Records)
	require.Equal(t, filterA, *a.Filter)
	require.Equal(t, filterB, *b.Filter)
	require.Equal(t, operator.Role, a.StartedBy)
	require.Equal(t, "Olga", *a.StartedByName)
	require.Nil(t, b.StartedByName)
	require.False(t, a.StartedAt.After(*a.FirstAt))
	require.Equal(t, []string{"acme", "globex"}, a.Tenants)
	require.Equal(t, []string{"charge-card"}, a.Tools)
	require.Len(t, a.Roles, 1)
	require.Equal(t, 3, a.Records)
	require.Equal(t, 3, a.Operations)
	require.False(t, a.FirstAt.After(*a.LastAt))
	require.Equal(t, a.LastAt.Sub(*a.FirstAt), a.Span)
	require.Equal(t, []readmodel.BatchGroup{
		{Lookup: "found", Decision: "completed", Decided: 1, Skipped: 1},
		{Lookup: "not_found", Decision: "not-executed", Decided: 1},
	}, a.Groups)
	require.Equal(t, []readmodel.BatchGroup{{Lookup: "found", Decision: "completed", Decided: 1}}, b.Groups)

	// A page at a time.
	var got []string
	var after *readmodel.BatchCursor
	for range 3 {
		page, err := s.AuditBatches(t.Context(), readmodel.BatchQuery{Limit: 1, After: after})
		require.NoError(t, err)
		require.Len(t, page.Batches, 1)
		got = append(got, page.Batches[0].ID)
		if page.Next == nil {
			break
		}
		c, err := readmodel.ParseBatchCursor(page.Next.String())
		require.NoError(t, err)
		after = &c
	}
	require.Equal(t, []string{runB, runA, legacy}, got)

	// One tenant's viewers.
	for _, c := range []struct {
		tenant string
		want   map[string][]readmodel.BatchGroup
	}{
		{"acme", map[string][]readmodel.BatchGroup{
			runA:   {{Lookup: "found", Decision: "completed", Decided: 1, Skipped: 1}},
			runB:   {{Lookup: "found", Decision: "completed", Decided: 1}},
			legacy: {{Lookup: "found", Decision: "completed", Decided: 1}},
		}},
		{"globex", map[string][]readmodel.BatchGroup{runA: {{Lookup: "not_found", Decision: "not-executed", Decided: 1}}}},
		{"initech", map[string][]readmodel.BatchGroup{}},
	} {
		viewer := dbtest.NewPerson(t, d, "viewer", c.tenant)
		page, err := New(viewer.Pool, Config{}).AuditBatches(t.Context(), readmodel.BatchQuery{})
		require.NoError(t, err, c.tenant)
		got := map[string][]readmodel.BatchGroup{}
		for _, b := range page.Batches {
			got[b.ID] = b.Groups
			require.Equal(t, []string{c.tenant}, b.Tenants, c.tenant)
		}
		require.Equal(t, c.want, got, c.tenant)
	}
}

// Which runs each role sees, connected as itself: its own runs, every run
// when it sees every tenant, otherwise only runs with a decision it may
// see, and of those only that part; the table itself answers the same
// (row-level security, not the query), and a role without people's
// access reads nothing of it.
func TestAuditBatchesByRole(t *testing.T) {
	t.Parallel()
	d, _, runs, _ := batchesDB(t)
	runA, runB := runs[0], runs[1]
	opAcme := dbtest.NewPerson(t, d, "operator", "acme")
	runC, err := desk.StartBatch(t.Context(), opAcme.Pool, "state:stuck tool:charge-card tenant:acme key:c*", "")
	require.NoError(t, err, "a run that decides nothing")

	for _, c := range []struct {
		name    string
		p       *dbtest.Person
		want    []string
		tenants map[string][]string
	}{
		{"ViewerOfEveryTenant", dbtest.NewPerson(t, d, "viewer", "*"), []string{runC, runB, runA, legacy},
			map[string][]string{runA: {"acme", "globex"}, runC: {}}},
		{"ReconcilerOfEveryTenant", dbtest.NewPerson(t, d, "reconciler", "*"), []string{runC, runB, runA, legacy}, nil},
		{"OperatorOfOneTenant", opAcme, []string{runC, runB, runA, legacy}, map[string][]string{runA: {"acme"}, runC: {}}},
		{"ViewerOfOneTenant", dbtest.NewPerson(t, d, "viewer", "acme"), []string{runB, runA, legacy}, map[string][]string{runA: {"acme"}}},
		{"ViewerOfTheOtherTenant", dbtest.NewPerson(t, d, "viewer", "globex"), []string{runA}, map[string][]string{runA: {"globex"}}},
		{"ViewerOfNoTenantDecided", dbtest.NewPerson(t, d, "viewer", "initech"), nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			page, err := New(c.p.Pool, Config{}).AuditBatches(t.Context(), readmodel.BatchQuery{})
			require.NoError(t, err)
			var got []string
			for _, b := range page.Batches {
				got = append(got, b.ID)
				if want, ok := c.tenants[b.ID]; ok {
					require.Equal(t, want, b.Tenants, b.ID)
				}
				if b.ID == runC {
					require.Zero(t, b.Records)
					require.Nil(t, b.FirstAt)
					require.Equal(t, opAcme.Role, b.StartedBy)
				}
			}
			require.Equal(t, c.want, got)
			var n int
			require.NoError(t, c.p.Pool.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.batches`).Scan(&n))
			require.Equal(t, len(c.want), n, "the table's own rows")
		})
	}
	for _, p := range []*dbtest.Person{dbtest.NewService(t, d), dbtest.NewPerson(t, d, "")} {
		_, err := New(p.Pool, Config{}).AuditBatches(t.Context(), readmodel.BatchQuery{})
		require.ErrorContains(t, err, "permission denied", p.Role)
	}
}

// A page of runs reads each run's records through audit_batch_idx, not
// every decision: with sequential scans off (the tables are tiny), both
// of the list's queries can use it, as a one-tenant viewer runs them.
func TestAuditBatchesUseTheIndex(t *testing.T) {
	t.Parallel()
	d, _, runs, _ := batchesDB(t)
	f, err := readmodel.ParseAuditFilter("batch:" + runs[0])
	require.NoError(t, err)
	ab := &builder{}
	ab.oneOf("opsdesk.batch_of(a.details)", f.Batches)
	for _, tenant := range []string{"acme", "*"} {
		viewer := dbtest.NewPerson(t, d, "viewer", tenant)
		tx, err := viewer.Pool.Begin(t.Context())
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(t.Context()) }()
		_, err = tx.Exec(t.Context(), `SET LOCAL enable_seqscan = off`)
		require.NoError(t, err)
		for _, q := range []struct {
			sql  string
			args []any
		}{{batchesSQL, []any{nil, nil, 50}}, {batchGroupsSQL, []any{runs[:]}},
			{"SELECT count(*) FROM opsdesk.audit a WHERE " + ab.sql(), ab.args}} {
			rows, err := tx.Query(t.Context(), "EXPLAIN "+q.sql, q.args...)
			require.NoError(t, err)
			var plan []string
			for rows.Next() {
				var line string
				require.NoError(t, rows.Scan(&line))
				plan = append(plan, line)
			}
			require.NoError(t, rows.Err())
			// The batch is the index's condition, not a filter after the
			// audit's policy (a walk of every batched record).
			s := strings.Join(plan, "\n")
			require.Contains(t, s, "audit_batch_idx", "%s", s)
			require.Regexp(t, `Index Cond: \(+opsdesk\.batch_of\(`, s, "as a viewer of %s:\n%s", tenant, s)
		}
	}
}

// TestBatchLookupsCannotBeReplaced: the two functions the batches policy
// and the audit_batch_idx index are keyed on (migration 00029) are the
// migrator's. No login of any level, nor one without an opsdesk role,
// can redefine them (a batch_of that answered every run's id would show
// every run to anyone) or take their LEAKPROOF mark; opsdesk's logins may
// call them, and they answer only what their argument holds.
func TestBatchLookupsCannotBeReplaced(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	for _, who := range []struct {
		name string
		p    *dbtest.Person
	}{
		{"service", dbtest.NewService(t, d)}, {"viewer of one tenant", dbtest.NewPerson(t, d, "viewer", "acme")},
		{"operator", dbtest.NewPerson(t, d, "operator", "*")}, {"admin", dbtest.NewPerson(t, d, "admin", "*")},
		{"reconciler", dbtest.NewPerson(t, d, "reconciler", "*")}, {"no opsdesk role", dbtest.NewPerson(t, d, "")},
	} {
		for _, sql := range []string{
			`CREATE OR REPLACE FUNCTION opsdesk.batch_of(d jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT d->>'batch' $$`,
			`CREATE OR REPLACE FUNCTION opsdesk.uuid_text(u uuid) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT u::text $$`,
			`ALTER FUNCTION opsdesk.batch_of(jsonb) NOT LEAKPROOF`,
			`ALTER FUNCTION opsdesk.uuid_text(uuid) RENAME TO uuid_text_old`,
			`DROP FUNCTION opsdesk.batch_of(jsonb) CASCADE`,
		} {
			_, err := who.p.Pool.Exec(ctx, sql)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, "%s: %s", who.name, sql)
			require.Equal(t, "42501", pgErr.Code, "%s: %s: %v", who.name, sql, err)
		}
		call := `SELECT opsdesk.batch_of('{"batch": "b", "tenant": "acme"}'),
    opsdesk.batch_of('[1, 2]'), opsdesk.uuid_text('0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b')`
		var batch, noBatch *string
		var text string
		err := who.p.Pool.QueryRow(ctx, call).Scan(&batch, &noBatch, &text)
		if who.name == "no opsdesk role" {
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, "a login without opsdesk's schema reaches nothing in it")
			require.Equal(t, "42501", pgErr.Code, "%v", err)
			continue
		}
		require.NoError(t, err, who.name)
		require.Equal(t, "b", *batch, who.name)
		require.Nil(t, noBatch, "an array has no batch, and no error: %s", who.name)
		require.Equal(t, "0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b", text, who.name)
	}
	var marked bool
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT bool_and(proleakproof) FROM pg_proc
WHERE oid IN ('opsdesk.batch_of(jsonb)'::regprocedure, 'opsdesk.uuid_text(uuid)'::regprocedure)`).Scan(&marked))
	require.True(t, marked, "migrated by a superuser, both are marked")
}
