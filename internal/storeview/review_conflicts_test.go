package storeview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/retention"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// The review's "conflicted" figure comes from opsdesk.record_conflicts
// (migration 00022), which triggers keep for every writer. These tests
// write as each writer does (the library as the service, people through
// their functions, purges, the superuser by hand) and check after each
// step that the table says what the records and conflicts say, and that
// the review, read by a viewer, reports what the definition counts.

// conflictedTruth is the definition the review's figure answers: a tool's
// expired, unheld, completed records with an unreviewed conflict, counted
// by joining every conflict to its record (the review's query before
// migration 00022), as the superuser.
func conflictedTruth(t *testing.T, d *dbtest.DB, tool string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, d.Admin.QueryRow(t.Context(), `
SELECT count(*) FROM (SELECT DISTINCT tenant, tool, key FROM opsdesk.conflicts
        WHERE reviewed_at IS NULL AND tool = $1) c
    JOIN opsdesk.operations o ON o.tenant = c.tenant AND o.tool = c.tool AND o.key = c.key
    WHERE o.state = 'completed' AND o.expires_at <= now() AND NOT o.held`, tool).Scan(&n))
	return n
}

// requireSummaryTrue checks record_conflicts against the records and
// conflicts, as the superuser: a row with unreviewed conflicts for exactly
// the records that have some, tracked exactly when the record counts
// conflicts, with the record's state, hold and expiry when tracked, and no
// row without its record.
func requireSummaryTrue(t *testing.T, d *dbtest.DB, step string) {
	t.Helper()
	rows, err := d.Admin.Query(t.Context(), `
WITH want AS (
    SELECT o.tenant, o.tool, o.key, o.conflict_count > 0 AS tracked, o.state, o.held, o.expires_at
    FROM opsdesk.operations o
    WHERE EXISTS (SELECT FROM opsdesk.conflicts c
                  WHERE c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key AND c.reviewed_at IS NULL)),
have AS (SELECT * FROM opsdesk.record_conflicts WHERE unreviewed)
SELECT coalesce(w.key, h.key) || ': ' || CASE
    WHEN h.key IS NULL THEN 'no row with unreviewed conflicts'
    WHEN w.key IS NULL THEN 'a row with unreviewed conflicts, which it has not'
    WHEN h.tracked <> w.tracked THEN 'tracked ' || h.tracked || ', its count says ' || w.tracked
    ELSE 'facts ' || row(h.state, h.held, h.expires_at)::text || ', the record ' || row(w.state, w.held, w.expires_at)::text END
FROM want w FULL JOIN have h ON h.tenant = w.tenant AND h.tool = w.tool AND h.key = w.key
WHERE h.key IS NULL OR w.key IS NULL OR h.tracked <> w.tracked
   OR (h.tracked AND row(h.state, h.held, h.expires_at) IS DISTINCT FROM row(w.state, w.held, w.expires_at))
UNION ALL
SELECT r.key || ': a row without its record' FROM opsdesk.record_conflicts r
WHERE NOT EXISTS (SELECT FROM opsdesk.operations o WHERE o.tenant = r.tenant AND o.tool = r.tool AND o.key = r.key)`)
	require.NoError(t, err)
	wrong, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, wrong, step)
}

// requireConflicted checks the review's figure per tool, as read by
// viewer, against want and against the definition.
func requireConflicted(t *testing.T, d *dbtest.DB, viewer *Store, step string, want map[string]int64) {
	t.Helper()
	requireSummaryTrue(t, d, step)
	r, err := viewer.Review(t.Context(), nil)
	require.NoError(t, err)
	tools := byTool(r)
	for tool, n := range want {
		require.Equal(t, n, conflictedTruth(t, d, tool), "%s: the definition, %s", step, tool)
		require.Equal(t, n, tools[tool].Conflicted, "%s: the review, %s", step, tool)
	}
}

// idOf is the id of the record with key.
func idOf(t *testing.T, d *dbtest.DB, key string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT id FROM opsdesk.operations WHERE key = $1`, key).Scan(&id))
	return id
}

// unreviewed is the ids of the record's unreviewed conflicts.
func unreviewed(t *testing.T, d *dbtest.DB, key string) []int64 {
	t.Helper()
	rows, err := d.Admin.Query(t.Context(), `SELECT id FROM opsdesk.conflicts WHERE key = $1 AND reviewed_at IS NULL`, key)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

func adminExec(t *testing.T, d *dbtest.DB, sql string, args ...any) {
	t.Helper()
	_, err := d.Admin.Exec(t.Context(), sql, args...)
	require.NoError(t, err)
}

func TestConflictedFigureForEveryWriter(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	viewer := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})
	operator := dbtest.NewPerson(t, d, "operator", "*")
	admin := dbtest.NewPerson(t, d, "admin", "*")
	svc, err := ops.New(d.Service, ops.Config{Owner: "svc", Tools: map[string]ops.Policy{
		"create-ticket": {Effect: ops.EffectLocal},
		"charge-card":   {Effect: ops.EffectUnknownOutcome},
	}})
	require.NoError(t, err)
	ticket := func(key string, n int) error {
		_, err := ops.DoTx(ctx, svc, ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: "create-ticket", Key: key},
			Version: "1", Intent: map[string]int{"n": n}}, func(context.Context, pgx.Tx) (int, error) { return n, nil })
		return err
	}
	expire := func(key string) {
		adminExec(t, d, `UPDATE opsdesk.operations SET expires_at = now() - interval '1 hour' WHERE key = $1`, key)
	}

	// The library: DoTx inserts its record completed; a retry with another
	// intent is a conflict, recorded and counted in one statement.
	require.NoError(t, ticket("t1", 1))
	require.ErrorIs(t, ticket("t1", 2), ops.ErrIntentConflict)
	requireConflicted(t, d, viewer, "a conflict on a live record", map[string]int64{"create-ticket": 0})
	expire("t1") // the superuser edits the expiry
	requireConflicted(t, d, viewer, "the record expired", map[string]int64{"create-ticket": 1})

	// People: a hold keeps the record out of the purge's way, and out of
	// the figure; its release puts it back; acknowledging the conflict
	// makes the record purgeable.
	_, err = retention.SetHold(ctx, admin.Pool, []int64{idOf(t, d, "t1")}, true, "litigation", "", nil)
	require.NoError(t, err)
	requireConflicted(t, d, viewer, "held", map[string]int64{"create-ticket": 0})
	_, err = retention.SetHold(ctx, admin.Pool, []int64{idOf(t, d, "t1")}, false, "litigation over", "", nil)
	require.NoError(t, err)
	requireConflicted(t, d, viewer, "released", map[string]int64{"create-ticket": 1})
	_, err = desk.AckConflicts(ctx, operator.Pool, idOf(t, d, "t1"), unreviewed(t, d, "t1"), "caller bug, fixed", "")
	require.NoError(t, err)
	requireConflicted(t, d, viewer, "acknowledged", map[string]int64{"create-ticket": 0})

	// The library: a conflict on a pending external record, which the
	// library then completes (the completion's update, not an insert).
	_, err = ops.DoExternal(ctx, svc, ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: "charge-card", Key: "c1"},
		Version: "1", Intent: map[string]int{"cents": 100}}, func(ctx context.Context, _ ops.Attempt) (string, error) {
		_, err := ops.DoExternal(ctx, svc, ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: "charge-card", Key: "c1"},
			Version: "1", Intent: map[string]int{"cents": 999}}, func(context.Context, ops.Attempt) (string, error) { return "", nil })
		if !errors.Is(err, ops.ErrIntentConflict) {
			return "", fmt.Errorf("want a conflict, got %v", err)
		}
		requireSummaryTrue(t, d, "a conflict on a pending record")
		return "ch_1", nil
	})
	require.NoError(t, err)
	requireConflicted(t, d, viewer, "completed by the library", map[string]int64{"charge-card": 0})
	expire("c1")
	requireConflicted(t, d, viewer, "completed and expired", map[string]int64{"charge-card": 1})

	// People: a decision on a stuck record with a conflict (written by
	// hand, counted as the library counts it).
	adminExec(t, d, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at, conflict_count)
VALUES ('globex', 'charge-card', 'c2', '1', sha256('c2'), 'external_unknown', 'pending', 'w', now() - interval '2h', now() - interval '1h', 1);
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '1', sha256('other'), fingerprint, 'w' FROM opsdesk.operations WHERE key = 'c2'`)
	requireConflicted(t, d, viewer, "stuck with a conflict", map[string]int64{"charge-card": 1})
	var version int64
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT version FROM opsdesk.operations WHERE key = 'c2'`).Scan(&version))
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: idOf(t, d, "c2"), Decision: reconcile.Completed,
		ExpectVersion: version, Reason: "provider shows it", ResultRef: "ch_2", Retention: time.Minute})
	require.NoError(t, err)
	requireConflicted(t, d, viewer, "decided completed", map[string]int64{"charge-card": 1})
	expire("c2")
	requireConflicted(t, d, viewer, "decided and expired", map[string]int64{"charge-card": 2})

	// A purge: t1 (its conflict reviewed) goes with its row; c1 and c2
	// (unreviewed conflicts) stay.
	res, err := retention.Purge(ctx, admin.Pool, retention.PurgeParams{Reason: "weekly"}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Purged)
	requireConflicted(t, d, viewer, "purged", map[string]int64{"create-ticket": 0, "charge-card": 2})
	var rows int
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT count(*) FROM opsdesk.record_conflicts WHERE key = 't1'`).Scan(&rows))
	require.Zero(t, rows, "the purged record's row went with it")

	// The superuser: a conflict written by hand on a record that does not
	// count it (conflict_count 0) is untracked, and the review reads its
	// record, whose later edits fire nothing.
	adminExec(t, d, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at)
VALUES ('globex', 'create-ticket', 'h1', '1', sha256('h1'), 'local', 'completed', 'succeeded', 'w',
    now() - interval '9d', now() - interval '9d', now() - interval '9d', now() - interval '2d');
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '1', sha256('other'), fingerprint, 'w' FROM opsdesk.operations WHERE key = 'h1'`)
	requireConflicted(t, d, viewer, "a hand-written conflict", map[string]int64{"create-ticket": 1})
	adminExec(t, d, `UPDATE opsdesk.operations SET held = true WHERE key = 'h1'`)
	requireConflicted(t, d, viewer, "untracked and held", map[string]int64{"create-ticket": 0})
	adminExec(t, d, `UPDATE opsdesk.operations SET held = false, expires_at = now() + interval '1d' WHERE key = 'h1'`)
	requireConflicted(t, d, viewer, "untracked, no longer expired", map[string]int64{"create-ticket": 0})
	adminExec(t, d, `UPDATE opsdesk.operations SET conflict_count = 1, expires_at = now() - interval '1d' WHERE key = 'h1'`)
	requireConflicted(t, d, viewer, "counted by hand: tracked", map[string]int64{"create-ticket": 1})
	adminExec(t, d, `UPDATE opsdesk.operations SET conflict_count = 0 WHERE key = 'h1'`)
	requireConflicted(t, d, viewer, "uncounted by hand", map[string]int64{"create-ticket": 1})
	adminExec(t, d, `UPDATE opsdesk.operations SET state = 'released', outcome = NULL, completed_at = NULL, expires_at = NULL WHERE key = 'h1'`)
	requireConflicted(t, d, viewer, "released by hand", map[string]int64{"create-ticket": 0})

	// The superuser's edits of conflicts: reviewing and unreviewing by
	// hand, deleting, truncating.
	adminExec(t, d, `UPDATE opsdesk.conflicts SET reviewed_at = now(), reviewed_by = 'root' WHERE key = 'c1'`)
	requireConflicted(t, d, viewer, "reviewed by hand", map[string]int64{"charge-card": 1})
	adminExec(t, d, `UPDATE opsdesk.conflicts SET reviewed_at = NULL, reviewed_by = NULL WHERE key = 'c1'`)
	requireConflicted(t, d, viewer, "unreviewed by hand", map[string]int64{"charge-card": 2})
	adminExec(t, d, `DELETE FROM opsdesk.conflicts WHERE key = 'c2'`)
	requireConflicted(t, d, viewer, "a conflict deleted", map[string]int64{"charge-card": 1})
	adminExec(t, d, `TRUNCATE opsdesk.conflicts`)
	requireConflicted(t, d, viewer, "conflicts truncated", map[string]int64{"charge-card": 0, "create-ticket": 0})
}

// A scoped viewer's figure counts its tenants' records only, through the
// table's policy.
func TestConflictedFigureOfAScopedViewer(t *testing.T) {
	t.Parallel()
	d := reviewDB(t)
	// globex's expired record with an unreviewed conflict, counted by hand
	// and not: two rows, one tracked, one not.
	adminExec(t, d, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at, conflict_count)
VALUES ('globex', 'create-ticket', 'g1', '1', sha256('g1'), 'local', 'completed', 'succeeded', 'w',
    now() - interval '9d', now() - interval '9d', now() - interval '9d', now() - interval '2d', 1),
       ('globex', 'create-ticket', 'g2', '1', sha256('g2'), 'local', 'completed', 'succeeded', 'w',
    now() - interval '9d', now() - interval '9d', now() - interval '9d', now() - interval '2d', 0);
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '1', sha256('other'), fingerprint, 'w' FROM opsdesk.operations WHERE key IN ('g1', 'g2')`)
	requireSummaryTrue(t, d, "fixtures")
	for _, c := range []struct {
		tenants []string
		want    int64
	}{{[]string{"acme"}, 1}, {[]string{"globex"}, 2}, {[]string{"*"}, 3}, {[]string{"initech"}, 0}} {
		r, err := New(dbtest.NewPerson(t, d, "viewer", c.tenants...).Pool, Config{}).Review(t.Context(), reviewCatalog)
		require.NoError(t, err)
		require.Equal(t, c.want, byTool(r)["create-ticket"].Conflicted, c.tenants)
	}
}

// Writers of one record in concurrent transactions: a refresh waits for
// the record's lock, so the later transaction reads what the earlier one
// committed, whichever comes first; under REPEATABLE READ a refresh whose
// snapshot missed a committed change fails rather than write stale facts.
func TestConflictedSummaryUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	adminExec(t, d, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at, conflict_count)
SELECT 'acme', 'create-ticket', k, '1', sha256(k::bytea), 'local', 'completed', 'succeeded', 'w',
    now() - interval '9d', now() - interval '9d', now() - interval '9d', now() - interval '2d', 1
FROM unnest(ARRAY['a', 'b', 'c']) k;
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, reviewed_at, reviewed_by)
SELECT tenant, tool, key, id, '1', sha256('other'), fingerprint, 'w', now(), 'alice' FROM opsdesk.operations`)
	conflictSQL := `INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '2', sha256('late'), fingerprint, 'w' FROM opsdesk.operations WHERE key = $1`
	holdSQL := `UPDATE opsdesk.operations SET held = true WHERE key = $1`
	begin := func(iso pgx.TxIsoLevel) pgx.Tx {
		tx, err := d.Admin.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
		return tx
	}
	// second runs sql in a transaction of its own while first holds its
	// transaction open, and waits until it blocks on the record's lock.
	second := func(sql, key string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := d.Admin.Exec(ctx, sql, key)
			done <- err
		}()
		require.Eventually(t, func() bool {
			var waiting bool
			require.NoError(t, d.Admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%')`, strings.Fields(sql)[0]).Scan(&waiting))
			return waiting
		}, 10*time.Second, 10*time.Millisecond, "the second writer waits for the first")
		return done
	}

	// A conflict first, the hold waits; then a hold first, the conflict
	// waits. Either way the record is held with an unreviewed conflict.
	for _, c := range []struct{ key, first, then string }{{"a", conflictSQL, holdSQL}, {"b", holdSQL, conflictSQL}} {
		tx := begin(pgx.ReadCommitted)
		_, err := tx.Exec(ctx, c.first, c.key)
		require.NoError(t, err)
		done := second(c.then, c.key)
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, <-done)
		requireSummaryTrue(t, d, "concurrent writers of "+c.key)
		var held, open bool
		require.NoError(t, d.Admin.QueryRow(ctx, `SELECT held, unreviewed FROM opsdesk.record_conflicts WHERE key = $1`, c.key).Scan(&held, &open))
		require.True(t, held && open, c.key)
	}

	// A REPEATABLE READ hold whose snapshot predates a committed conflict.
	tx := begin(pgx.RepeatableRead)
	_, err := tx.Exec(ctx, `SELECT 1`) // takes the snapshot
	require.NoError(t, err)
	adminExec(t, d, conflictSQL, "c")
	_, err = tx.Exec(ctx, holdSQL, "c")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "40001", pgErr.Code, "a serialization failure, not stale facts")
	require.Contains(t, pgErr.Where, "record_conflicts_refresh", "raised by the refresh's upsert")
	require.NoError(t, tx.Rollback(ctx))
	requireSummaryTrue(t, d, "after the serialization failure")
}

// The review's conflicted figure reads no record per conflict: the
// records it counts are counted from record_conflicts. (The join it
// replaced read each conflict's record: at 10M records, 4,891 probes by
// primary key.) The review reads no more records than its count cap, as
// many records with conflicts as there may be; the planner is held to
// indexes, as it is on a large table.
func TestReviewReadsNoRecordPerConflict(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	adminExec(t, d, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at, conflict_count)
SELECT 'tenant-' || (i % 3), 'create-ticket', 'k' || i, '1', sha256(i::text::bytea), 'local', 'completed', 'succeeded', 'w',
    now() - interval '9d', now() - interval '9d', now() - interval '9d', now() - interval '2d', 1
FROM generate_series(1, $1) i`, readmodel.CountCap+500)
	adminExec(t, d, `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '1', sha256('other'), fingerprint, 'w' FROM opsdesk.operations`)
	adminExec(t, d, `VACUUM ANALYZE opsdesk.operations, opsdesk.conflicts, opsdesk.record_conflicts`)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	rec := &statements{}
	cfg, err := pgxpool.ParseConfig(viewer.DSN)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	r, err := New(pool, Config{}).Review(t.Context(), nil)
	require.NoError(t, err)
	require.EqualValues(t, readmodel.CountCap+500, byTool(r)["create-ticket"].Conflicted)

	i := slices.IndexFunc(rec.log, func(st pgx.TraceQueryStartData) bool { return st.SQL == reviewSQL })
	require.GreaterOrEqual(t, i, 0, "the review ran reviewSQL")
	tx, err := viewer.Pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(t.Context()) //nolint:errcheck // read only
	_, err = tx.Exec(t.Context(), `SET LOCAL enable_seqscan = off`)
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), reviewSQL, rec.log[i].Args...)
	require.NoError(t, err)
	var read int64
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT seq_tup_read + idx_tup_fetch FROM pg_stat_xact_user_tables
WHERE relid = 'opsdesk.operations'::regclass`).Scan(&read))
	rows, err := tx.Query(t.Context(), "EXPLAIN (ANALYZE) "+reviewSQL, rec.log[i].Args...)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.LessOrEqual(t, read, int64(readmodel.CountCap+1), "records read for %d records with conflicts\n%s", readmodel.CountCap+500, strings.Join(plan, "\n"))
}
