package storeview

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/retention"
)

// reviewFixtures is a hand-counted store for the retention review; the
// figures the tests expect are counted from this SQL.
//
//	create-ticket (catalog: 7d retention, 3d retry window)
//	  acme    t1 expires in 5h          24h, 7d
//	  acme    t2 expires in 6d          7d
//	  acme    t3 expired 1h ago         purgeable
//	  acme    t4 expired 2d ago, held   held
//	  acme    t5 expired 3h ago         an unreviewed conflict
//	  acme    t6 expired 1d ago         a reviewed conflict only: purgeable
//	  globex  t7 expired 4h ago         purgeable
//	  acme    p1 pending, lease expired 8d ago: stuck past the retention, the oldest
//	  acme    p2 pending, lease expired 10m ago
//	  globex  p3 pending, lease live
//	charge-card (catalog: 1d retention, 3d retry window, reject)
//	  acme    c1 expires in 20h         24h, 7d
//	legacy-sync (not in the catalog: the default 7d retention)
//	  globex  l1 expires in 2d          7d
//	  globex  l2 pending, lease expired 9d ago: stuck past the retention
//	unused-tool (catalog only: 30d retention, 7d retry window)
const reviewFixtures = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at, held, conflict_count)
SELECT tenant, tool, key, '1', sha256(key::bytea), 'local', state, CASE WHEN state = 'completed' THEN 'succeeded' END, 'w',
    now() - lease_end - interval '1m', now() - lease_end, now() - interval '10d',
    CASE WHEN state = 'completed' THEN now() - interval '10d' END, now() + expires_in, held, conflicts
FROM (VALUES
    ('acme',   'create-ticket', 't1', 'completed', NULL::interval, interval '5h',  false, 0),
    ('acme',   'create-ticket', 't2', 'completed', NULL,           interval '6d',  false, 0),
    ('acme',   'create-ticket', 't3', 'completed', NULL,           interval '-1h', false, 0),
    ('acme',   'create-ticket', 't4', 'completed', NULL,           interval '-2d', true,  0),
    ('acme',   'create-ticket', 't5', 'completed', NULL,           interval '-3h', false, 1),
    ('acme',   'create-ticket', 't6', 'completed', NULL,           interval '-1d', false, 1),
    ('globex', 'create-ticket', 't7', 'completed', NULL,           interval '-4h', false, 0),
    ('acme',   'create-ticket', 'p1', 'pending',   interval '8d',  NULL,           false, 0),
    ('acme',   'create-ticket', 'p2', 'pending',   interval '10m', NULL,           false, 0),
    ('globex', 'create-ticket', 'p3', 'pending',   interval '-30s', NULL,          false, 0),
    ('acme',   'charge-card',   'c1', 'completed', NULL,           interval '20h', false, 0),
    ('globex', 'legacy-sync',   'l1', 'completed', NULL,           interval '2d',  false, 0),
    ('globex', 'legacy-sync',   'l2', 'pending',   interval '9d',  NULL,           false, 0)
) AS f (tenant, tool, key, state, lease_end, expires_in, held, conflicts);

INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, reviewed_at, reviewed_by)
SELECT tenant, tool, key, id, '2', sha256('other'::bytea), fingerprint, 'w', CASE WHEN key = 't6' THEN now() END,
    CASE WHEN key = 't6' THEN 'alice' END
FROM opsdesk.operations WHERE key IN ('t5', 't6');
`

var reviewCatalog = map[string]readmodel.ToolPolicy{
	"create-ticket": {Retention: 7 * 24 * time.Hour, RetryWindow: 3 * 24 * time.Hour},
	"charge-card":   {Retention: 24 * time.Hour, RetryWindow: 3 * 24 * time.Hour, AfterExpiry: "reject"},
	"unused-tool":   {Retention: 30 * 24 * time.Hour, RetryWindow: 7 * 24 * time.Hour},
}

func reviewDB(t *testing.T) *dbtest.DB {
	t.Helper()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), reviewFixtures)
	require.NoError(t, err)
	return d
}

func byTool(r readmodel.Review) map[string]readmodel.ToolReview {
	out := map[string]readmodel.ToolReview{}
	for _, t := range r.Tools {
		out[t.Tool] = t
	}
	return out
}

func TestReviewMatchesHandCountedFixtures(t *testing.T) {
	d := reviewDB(t)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	r, err := New(admin.Pool, Config{}).Review(t.Context(), reviewCatalog)
	require.NoError(t, err)
	require.False(t, r.Scoped)
	require.False(t, r.DBTime.IsZero())

	var names []string
	for _, tr := range r.Tools {
		names = append(names, tr.Tool)
	}
	require.Equal(t, []string{"charge-card", "create-ticket", "legacy-sync", "unused-tool"}, names)
	tools := byTool(r)

	ct := tools["create-ticket"]
	require.True(t, ct.InCatalog)
	require.True(t, ct.InStore)
	require.Equal(t, readmodel.Count{N: 1}, ct.Expiring24h)
	require.Equal(t, readmodel.Count{N: 2}, ct.Expiring7d)
	require.Equal(t, readmodel.Count{N: 5}, ct.Expired)
	require.Equal(t, readmodel.Count{N: 3}, ct.Purgeable)
	require.EqualValues(t, 1, ct.Held)
	require.EqualValues(t, 1, ct.Conflicted)
	require.Equal(t, readmodel.Count{N: 1}, ct.StuckPastRetention)
	require.NotNil(t, ct.OldestPending)
	require.True(t, ct.OldestPending.Stuck)
	require.InDelta(t, (8 * 24 * time.Hour).Seconds(), r.DBTime.Sub(ct.OldestPending.LeaseExpiresAt).Seconds(), 5)
	require.Equal(t, "reexecute", ct.AfterExpiry)
	require.Len(t, ct.Warnings, 1)
	require.Contains(t, ct.Warnings[0], "1 record stuck for longer than the retention 7d")

	cc := tools["charge-card"]
	require.Equal(t, readmodel.Count{N: 1}, cc.Expiring24h)
	require.Equal(t, readmodel.Count{N: 1}, cc.Expiring7d)
	require.Equal(t, readmodel.Count{}, cc.Expired)
	require.Nil(t, cc.OldestPending)
	require.Equal(t, []string{"retention 1d is shorter than the retry window 3d: a retry in between gets ErrExpired instead of its result"}, cc.Warnings)

	ls := tools["legacy-sync"]
	require.False(t, ls.InCatalog)
	require.True(t, ls.InStore)
	require.Equal(t, 7*24*time.Hour, ls.Retention)
	require.Equal(t, readmodel.Count{N: 0}, ls.Expiring24h)
	require.Equal(t, readmodel.Count{N: 1}, ls.Expiring7d)
	require.Equal(t, readmodel.Count{N: 1}, ls.StuckPastRetention)
	require.Len(t, ls.Warnings, 2)
	require.Contains(t, ls.Warnings[0], "not in the catalog")
	require.Contains(t, ls.Warnings[1], "stuck for longer than the retention 7d")

	ut := tools["unused-tool"]
	require.True(t, ut.InCatalog)
	require.False(t, ut.InStore)
	require.Equal(t, readmodel.ToolReview{Tool: "unused-tool", InCatalog: true, Retention: 30 * 24 * time.Hour,
		RetryWindow: 7 * 24 * time.Hour, AfterExpiry: "reexecute"}, ut)
	require.Equal(t, 4, r.Warnings())
}

// The review's purgeable figure is what a purge's dry run counts, for
// every tool.
func TestReviewPurgeableIsWhatAPurgeDeletes(t *testing.T) {
	d := reviewDB(t)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	r, err := New(admin.Pool, Config{}).Review(t.Context(), reviewCatalog)
	require.NoError(t, err)
	for _, tr := range r.Tools {
		dry, err := retention.Eligible(t.Context(), admin.Pool, retention.PurgeParams{Tool: tr.Tool})
		require.NoError(t, err)
		require.Equal(t, readmodel.Count{N: dry.Count}, tr.Purgeable, tr.Tool)
	}
}

// A viewer of one tenant sees that tenant's figures, and no tool that only
// other tenants use.
func TestReviewOfAScopedViewer(t *testing.T) {
	d := reviewDB(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "acme")
	r, err := New(viewer.Pool, Config{}).Review(t.Context(), reviewCatalog)
	require.NoError(t, err)
	require.True(t, r.Scoped)
	tools := byTool(r)
	require.NotContains(t, tools, "legacy-sync")
	ct := tools["create-ticket"]
	require.Equal(t, readmodel.Count{N: 4}, ct.Expired)
	require.Equal(t, readmodel.Count{N: 2}, ct.Purgeable)
	require.Equal(t, readmodel.Count{N: 2}, ct.Expiring7d)

	// A viewer of a tenant without records sees the catalog only.
	none := dbtest.NewPerson(t, d, "viewer", "initech")
	r, err = New(none.Pool, Config{}).Review(t.Context(), reviewCatalog)
	require.NoError(t, err)
	for _, tr := range r.Tools {
		require.False(t, tr.InStore, tr.Tool)
		require.Equal(t, readmodel.Count{}, tr.Expired, tr.Tool)
	}
}

// Above the cap a figure is the planner's estimate for a role that sees
// every tenant, and a lower bound for one that sees some; each says so.
func TestReviewCountsAboveTheCap(t *testing.T) {
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    created_at, completed_at, expires_at)
SELECT 'acme', 'bulk', 'k' || i, '1', sha256(i::text::bytea), 'local', 'completed', 'succeeded', 'w',
    now() - interval '9d', now() - interval '9d', now() - interval '1h'
FROM generate_series(1, $1) i`, readmodel.CountCap+500)
	require.NoError(t, err)
	_, err = d.Admin.Exec(t.Context(), `ANALYZE opsdesk.operations`)
	require.NoError(t, err)

	r, err := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{}).Review(t.Context(), nil)
	require.NoError(t, err)
	bulk := byTool(r)["bulk"]
	require.True(t, bulk.Purgeable.Estimated)
	require.InDelta(t, readmodel.CountCap+500, bulk.Purgeable.N, 50)
	require.Equal(t, bulk.Purgeable, bulk.Expired)
	require.Equal(t, readmodel.Count{}, bulk.Expiring7d)

	r, err = New(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{}).Review(t.Context(), nil)
	require.NoError(t, err)
	bulk = byTool(r)["bulk"]
	require.Equal(t, readmodel.Count{N: readmodel.CountCap, AtLeast: true}, bulk.Purgeable)
	require.Equal(t, readmodel.Count{N: readmodel.CountCap, AtLeast: true}, bulk.Expired)
}

// An unfinished purge run is a warning of the review, with who started it,
// when, why and what it purged so far (its row's counts and its batches');
// only admins of every tenant see purge runs.
func TestReviewNamesUnfinishedPurges(t *testing.T) {
	d := reviewDB(t)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	var run, entry int64
	require.NoError(t, admin.Pool.QueryRow(t.Context(),
		`SELECT run, entry FROM opsdesk.purge_start('create-ticket', NULL, '{}', 'end of quarter', 3, 'Ann')`).Scan(&run, &entry))
	seal, err := auditlog.Seal(t.Context(), admin.Pool, "", entry)
	require.NoError(t, err)
	seq := seal.Seq
	var purged int64
	require.NoError(t, admin.Pool.QueryRow(t.Context(), `SELECT purged FROM opsdesk.purge_batch($1, 2)`, run).Scan(&purged))
	require.EqualValues(t, 2, purged)
	// A run from before migration 00014 counted in its row, and one from
	// before start records.
	_, err = d.Admin.Exec(t.Context(), `UPDATE opsdesk.purge_runs SET purged = 5 WHERE id = $1`, run)
	require.NoError(t, err)
	_, err = d.Admin.Exec(t.Context(), `INSERT INTO opsdesk.purge_runs (role, tool, before, tombstone_for, reason, purged)
VALUES ('bob', NULL, now(), '{}', 'old', 7)`)
	require.NoError(t, err)

	r, err := New(admin.Pool, Config{}).Review(t.Context(), reviewCatalog)
	require.NoError(t, err)
	require.Len(t, r.UnfinishedPurges, 2)
	u := r.UnfinishedPurges[0]
	require.Equal(t, run, u.Run)
	require.Equal(t, admin.Role, u.Role)
	require.Equal(t, "Ann", u.DisplayName)
	require.Equal(t, "end of quarter", u.Reason)
	require.Equal(t, "create-ticket", u.Tool)
	require.EqualValues(t, 7, u.Purged, "the row's 5 and the batch's 2")
	require.Equal(t, int64(3), *u.MayPurge)
	require.Equal(t, seq, *u.StartSeq)
	require.NotNil(t, u.LastBatchAt)
	require.Contains(t, u.Warning(), "start record #")
	old := r.UnfinishedPurges[1]
	require.Nil(t, old.StartSeq)
	require.Contains(t, old.Warning(), "purge run "+strconv.FormatInt(old.Run, 10)+" (every tool) unfinished")
	require.Contains(t, old.Warning(), "no start record")
	require.Contains(t, old.Warning(), "bob finishes it: opsdesk retention purge --yes")
	require.Equal(t, 4+2, r.Warnings())

	for _, p := range []*dbtest.Person{dbtest.NewPerson(t, d, "admin", "acme"), dbtest.NewPerson(t, d, "viewer", "*")} {
		r, err := New(p.Pool, Config{}).Review(t.Context(), reviewCatalog)
		require.NoError(t, err)
		require.Empty(t, r.UnfinishedPurges, p.Role)
		_, seen, err := New(p.Pool, Config{}).UnfinishedPurges(t.Context())
		require.NoError(t, err)
		require.False(t, seen)
	}
}
