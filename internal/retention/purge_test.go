package retention_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/internal/purgereport"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/retention"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fixtures, counted by hand: 9 records may go (acme's 5 expired, its
// expired record whose conflict was reviewed, globex's 3); 5 must stay.
const fixtures = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at, held, conflict_count)
SELECT 'acme', 'create-ticket', 'gone-' || i, '1', decode(repeat('01', 32), 'hex'), 'local', 'completed', 'succeeded', 'w',
    now() - interval '9 days', now() - interval '9 days', now() - interval '8 days', now() - i * interval '1 hour', false, 0
FROM generate_series(1, 5) i
UNION ALL
SELECT 'globex', 'send-email', 'gone-' || i, '1', decode(repeat('02', 32), 'hex'), 'external_idempotent', 'completed', 'succeeded', 'w',
    now() - interval '9 days', now() - interval '9 days', now() - interval '8 days', now() - i * interval '1 hour', false, 0
FROM generate_series(1, 3) i
UNION ALL
SELECT 'acme', 'create-ticket', k, '1', decode(repeat('03', 32), 'hex'), 'local', st, out, 'w',
    now() - interval '9 days', now() - interval '9 days', CASE WHEN st = 'completed' THEN now() - interval '8 days' END, exp, held, cc
FROM (VALUES
    ('kept-1', 'completed', 'succeeded', now() + interval '1 day', false, 0),
    ('kept-2', 'completed', 'succeeded', now() + interval '2 days', false, 0),
    ('pending-1', 'pending', NULL, NULL, false, 0),
    ('held-1', 'completed', 'succeeded', now() - interval '1 day', true, 0),
    ('conflicted-1', 'completed', 'succeeded', now() - interval '1 day', false, 1),
    ('reviewed-1', 'completed', 'succeeded', now() - interval '1 day', false, 1)) v(k, st, out, exp, held, cc);
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, reviewed_at, reviewed_by)
SELECT tenant, tool, key, id, '1', decode(repeat('ff', 32), 'hex'), fingerprint, 'w',
    CASE WHEN key = 'reviewed-1' THEN now() END, CASE WHEN key = 'reviewed-1' THEN 'alice' END
FROM opsdesk.operations WHERE key IN ('conflicted-1', 'reviewed-1');`

func setup(t *testing.T) (*dbtest.DB, *dbtest.Person) {
	t.Helper()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), fixtures)
	require.NoError(t, err)
	return d, dbtest.NewPerson(t, d, "admin", "*")
}

// startRun starts (or resumes) a purge run as p with purge_start's
// arguments args, in a statement of its own, and returns the run.
func startRun(t *testing.T, p *dbtest.Person, args string) int64 {
	t.Helper()
	var outcome string
	var run *int64
	require.NoError(t, p.Pool.QueryRow(t.Context(), `SELECT outcome, run FROM opsdesk.purge_start(`+args+`)`).Scan(&outcome, &run))
	require.Equal(t, "succeeded", outcome)
	return *run
}

func keys(t *testing.T, d *dbtest.DB, sql string) []string {
	t.Helper()
	// What the calls before queued for the audit trail is read sealed.
	_, err := auditlog.Seal(t.Context(), d.Admin, "", 0)
	require.NoError(t, err)
	rows, _ := d.Admin.Query(t.Context(), sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func TestPurge(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	// Two expired tombstones and a live one, of earlier purges.
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.tombstones (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at)
VALUES ('acme', 'create-ticket', 'old-1', 1001, sha256('a'), now() - interval '9 days', now() - interval '2 days'),
       ('globex', 'send-email', 'old-2', 1002, sha256('b'), now() - interval '9 days', now() - interval '1 minute'),
       ('acme', 'create-ticket', 'old-3', 1003, sha256('c'), now() - interval '1 day', now() + interval '1 day')`)
	require.NoError(t, err)
	p := retention.PurgeParams{Reason: "weekly purge", BatchSize: 2,
		TombstoneFor: map[string]time.Duration{"create-ticket": 48 * time.Hour}}
	dry, err := retention.Eligible(t.Context(), admin.Pool, p)
	require.NoError(t, err)
	require.EqualValues(t, 9, dry.Count)
	require.Zero(t, dry.Resumes)
	// A record whose retention ends after the dry run is not what the
	// person confirmed: the purge given the dry run's cut-off leaves it.
	_, err = d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations SET expires_at = $1::timestamptz + interval '1 microsecond'
WHERE key = 'kept-1'`, dry.Before)
	require.NoError(t, err)
	p.Before = dry.Before

	var seen []purgereport.Progress
	res, err := retention.Purge(t.Context(), admin.Pool, p, func(pr purgereport.Progress) { seen = append(seen, pr) })
	require.NoError(t, err)
	require.EqualValues(t, 9, res.Purged, "what the dry run counted")
	require.EqualValues(t, 2, res.TombstonesExpired)
	require.Empty(t, keys(t, d, `SELECT key FROM opsdesk.tombstones WHERE key LIKE 'old-%' AND expires_at <= now()`),
		"expired tombstones went")
	require.Equal(t, []string{"old-3"}, keys(t, d, `SELECT key FROM opsdesk.tombstones WHERE key LIKE 'old-%'`))
	require.Len(t, seen, 5, "batches of 2")
	require.EqualValues(t, 9, seen[len(seen)-1].Purged)

	require.ElementsMatch(t, []string{"kept-1", "kept-2", "pending-1", "held-1", "conflicted-1"},
		keys(t, d, `SELECT key FROM opsdesk.operations`), "pending, held, unexpired and unreviewed-conflict records stay")
	require.Equal(t, []string{"conflicted-1"}, keys(t, d, `SELECT key FROM opsdesk.conflicts`), "the reviewed conflict went with its record")

	// Tombstones for the tool's retry window, else the default week.
	var tickets, emails int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `
SELECT count(*) FILTER (WHERE tool = 'create-ticket' AND expires_at BETWEEN now() + interval '47 hours' AND now() + interval '49 hours'),
       count(*) FILTER (WHERE tool = 'send-email' AND expires_at BETWEEN now() + interval '6 days' AND now() + interval '8 days')
FROM opsdesk.tombstones`).Scan(&tickets, &emails))
	require.Equal(t, 6, tickets)
	require.Equal(t, 3, emails)

	// One audit record for the run.
	var details []byte
	var role string
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT role, details FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
		res.AuditTenant, res.AuditSeq).Scan(&role, &details))
	require.Equal(t, admin.Role, role)
	var got struct {
		Purged            int64            `json:"purged"`
		PerTenant         map[string]int64 `json:"per_tenant"`
		Batches           int              `json:"batches"`
		TombstonesExpired int64            `json:"tombstones_expired"`
	}
	require.NoError(t, json.Unmarshal(details, &got))
	require.EqualValues(t, 9, got.Purged)
	require.EqualValues(t, 2, got.TombstonesExpired)
	require.Equal(t, map[string]int64{"acme": 6, "globex": 3}, got.PerTenant)
	require.Equal(t, 5, got.Batches)

	// Nothing left: a second purge is a run of nothing.
	res, err = retention.Purge(t.Context(), admin.Pool, p, nil)
	require.NoError(t, err)
	require.Zero(t, res.Purged)
}

// A purge stopped half-way resumes its run, and the run's one audit
// record adds up every batch.
func TestInterruptedPurgeResumes(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	run := startRun(t, admin, `NULL, NULL, '{}', 'nightly', 9`)
	var first int
	require.NoError(t, admin.Pool.QueryRow(t.Context(), `SELECT purged FROM opsdesk.purge_batch($1, 4)`, run).Scan(&first))
	require.Equal(t, 4, first)
	// The process dies here. The dry run says the purge resumes the run:
	dry, err := retention.Eligible(t.Context(), admin.Pool, retention.PurgeParams{})
	require.NoError(t, err)
	require.Equal(t, run, dry.Resumes)
	require.EqualValues(t, 5, dry.Count)
	// Run again:
	res, err := retention.Purge(t.Context(), admin.Pool, retention.PurgeParams{Reason: "nightly"}, nil)
	require.NoError(t, err)
	require.Equal(t, run, res.Run, "the same run resumed")
	require.EqualValues(t, 9, res.Purged)
	var audits int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit WHERE action = 'retention:purge'`).Scan(&audits))
	require.Equal(t, 1, audits)
}

func TestOnlyAdminsOfEveryTenantPurge(t *testing.T) {
	t.Parallel()
	d, _ := setup(t)
	for _, p := range []*dbtest.Person{dbtest.NewPerson(t, d, "operator", "*"), dbtest.NewPerson(t, d, "admin", "acme")} {
		_, err := retention.Purge(t.Context(), p.Pool, retention.PurgeParams{Reason: "x"}, nil)
		require.ErrorIs(t, err, audited.ErrNotPermitted)
		require.Contains(t, err.Error(), "may not purge")
	}
	var n int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.operations`).Scan(&n))
	require.Equal(t, 14, n)
}

// After the purge a late retry follows the tool's policy, on both sides.
func TestLateRetryAfterPurge(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	store, err := ops.New(d.Service, ops.Config{Owner: "w", Tools: map[string]ops.Policy{
		"charge-card": {Effect: ops.EffectUnknownOutcome, AfterExpiry: ops.RejectAfterExpiry},
		"send-email":  {Effect: ops.EffectIdempotentProvider},
	}})
	require.NoError(t, err)
	calls := 0
	call := func(tool string) (ops.Reply[string], error) {
		return ops.DoExternal(t.Context(), store, ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: tool, Key: "k-1"},
			Version: "1", Intent: map[string]int{"n": 1}}, func(context.Context, ops.Attempt) (string, error) {
			calls++
			return "ref", nil
		})
	}
	for _, tool := range []string{"charge-card", "send-email"} {
		_, err := call(tool)
		require.NoError(t, err)
	}
	_, err = d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations SET expires_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	res, err := retention.Purge(t.Context(), admin.Pool, retention.PurgeParams{Reason: "test"}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Purged)

	_, err = call("charge-card")
	require.ErrorIs(t, err, ops.ErrExpired)
	require.Equal(t, 2, calls, "the late charge never reached the provider")
	out, err := call("send-email")
	require.NoError(t, err)
	require.Equal(t, ops.Created, out.Disposition, "a re-executing tool treats it as new work")
	require.Equal(t, 3, calls)
}

// A held record survives purges until an admin releases it; holds and
// releases are audited per record, and only admins may.
func TestLegalHold(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	var gone1, kept1 int64
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT (SELECT id FROM opsdesk.operations WHERE tenant = 'acme' AND key = 'gone-1'),
    (SELECT id FROM opsdesk.operations WHERE key = 'kept-1')`).Scan(&gone1, &kept1))

	operator := dbtest.NewPerson(t, d, "operator", "*")
	_, err := retention.SetHold(t.Context(), operator.Pool, []int64{gone1}, true, "litigation", "", nil)
	require.ErrorIs(t, err, audited.ErrNotPermitted)
	_, err = retention.SetHold(t.Context(), admin.Pool, []int64{gone1}, true, " ", "", nil)
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	require.Contains(t, err.Error(), "a reason is required")

	r, err := retention.SetHold(t.Context(), admin.Pool, []int64{gone1, kept1}, true, "litigation hold #12", "Ann", nil)
	require.NoError(t, err)
	require.Equal(t, retention.HoldResult{Changed: 2}, r)
	r, err = retention.SetHold(t.Context(), admin.Pool, []int64{gone1}, true, "again", "", nil)
	require.NoError(t, err)
	require.Equal(t, retention.HoldResult{Unchanged: 1}, r)

	res, err := retention.Purge(t.Context(), admin.Pool, retention.PurgeParams{Reason: "weekly"}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 8, res.Purged, "the held record stays")
	require.Contains(t, keys(t, d, `SELECT key FROM opsdesk.operations WHERE tenant = 'acme'`), "gone-1")

	r, err = retention.SetHold(t.Context(), admin.Pool, []int64{gone1}, false, "case closed", "", nil)
	require.NoError(t, err)
	require.Equal(t, 1, r.Changed)
	res, err = retention.Purge(t.Context(), admin.Pool, retention.PurgeParams{Reason: "weekly"}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Purged)

	require.Equal(t, []string{"hold:set", "hold:set", "hold:release"},
		keys(t, d, `SELECT action FROM opsdesk.audit WHERE action LIKE 'hold:%' AND outcome = 'succeeded' ORDER BY at, seq`))
	require.Equal(t, []string{operator.Role + " denied not_permitted", admin.Role + " failed invalid"},
		keys(t, d, `SELECT role || ' ' || outcome || ' ' || (details->>'refusal') FROM opsdesk.audit
WHERE action LIKE 'hold:%' AND outcome <> 'succeeded' ORDER BY at`), "the refusals are audited")
}

// The foreign key from conflicts to their records is kept by triggers
// (migration 00010): a conflict never points at nothing, whoever tries.
func TestConflictsKeepTheirRecord(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	ctx := t.Context()
	const conflict = `INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
VALUES ('acme', 'create-ticket', $1, 1, '1', decode(repeat('ee', 32), 'hex'), decode(repeat('01', 32), 'hex'), 'w')`
	requireFKViolation := func(t *testing.T, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "23503", pgErr.Code, pgErr.Message)
		require.Equal(t, "conflicts_operation_fkey", pgErr.ConstraintName)
	}

	t.Run("NoConflictWithoutItsRecord", func(t *testing.T) {
		_, err := d.Service.Exec(ctx, conflict, "no-such-key")
		requireFKViolation(t, err)
	})
	t.Run("NoRecordGoesWhileConflictsPointAtIt", func(t *testing.T) {
		for _, sql := range []string{
			`DELETE FROM opsdesk.operations WHERE key = 'reviewed-1'`,
			`DELETE FROM opsdesk.operations WHERE key IN ('gone-1', 'conflicted-1')`,
			`UPDATE opsdesk.operations SET key = 'renamed' WHERE key = 'conflicted-1'`,
			`TRUNCATE opsdesk.operations`,
		} {
			_, err := d.Admin.Exec(ctx, sql)
			requireFKViolation(t, err)
		}
		var n int
		require.NoError(t, d.Admin.QueryRow(ctx, `SELECT count(*) FROM opsdesk.operations`).Scan(&n))
		require.Equal(t, 14, n)
	})
	t.Run("DeletesOnlyUnderReadCommitted", func(t *testing.T) {
		err := pgx.BeginTxFunc(ctx, d.Admin, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `DELETE FROM opsdesk.operations WHERE key = 'kept-1'`)
			return err
		})
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "25000", pgErr.Code)
	})
	t.Run("ConflictRecordedDuringAPurgeFails", func(t *testing.T) {
		// The purge holds gone-1 (deleted, not yet committed); the
		// library records a conflict against it, waits, and fails once
		// the purge commits: no conflict is left pointing at nothing.
		run := startRun(t, admin, `NULL, NULL, '{}', 'race', 100`)
		tx, err := admin.Pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT purged FROM opsdesk.purge_batch($1, 100)`, run).Scan(&n))
		require.Equal(t, 9, n)
		done := make(chan error, 1)
		go func() {
			_, err := d.Service.Exec(ctx, conflict, "gone-1")
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("the conflict did not wait for the purge: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		require.NoError(t, tx.Commit(ctx))
		requireFKViolation(t, <-done)
		require.Equal(t, []string{"conflicted-1"}, keys(t, d, `SELECT key FROM opsdesk.conflicts`))
	})
}

// An identity purged, created again and purged again keeps one
// tombstone: the latest record's.
func TestPurgeAgainRenewsTheTombstone(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	ctx := t.Context()
	p := retention.PurgeParams{Reason: "weekly", Tool: "send-email"}
	res, err := retention.Purge(ctx, admin.Pool, p, nil)
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Purged)
	var first int64
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT operation_id FROM opsdesk.tombstones WHERE key = 'gone-1'`).Scan(&first))

	var again int64
	require.NoError(t, d.Admin.QueryRow(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at)
VALUES ('globex', 'send-email', 'gone-1', '1', decode(repeat('04', 32), 'hex'), 'external_idempotent', 'completed', 'succeeded', 'w',
    now(), now(), now(), now() - interval '1 second')
RETURNING id`).Scan(&again))
	res, err = retention.Purge(ctx, admin.Pool, p, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Purged)

	var stones int
	var id int64
	var fingerprint []byte
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT count(*) OVER (), operation_id, fingerprint FROM opsdesk.tombstones
WHERE tool = 'send-email' AND key = 'gone-1'`).Scan(&stones, &id, &fingerprint))
	require.Equal(t, 1, stones)
	require.NotEqual(t, first, again)
	require.Equal(t, again, id, "the tombstone is the latest record's")
	require.Equal(t, bytes.Repeat([]byte{4}, 32), fingerprint)
}

// A database whose default is REPEATABLE READ still purges: each batch
// asks for READ COMMITTED, which the conflicts check needs.
func TestPurgeUnderRepeatableReadDefault(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	_, err := d.Admin.Exec(t.Context(), `ALTER DATABASE `+pgx.Identifier{d.Name}.Sanitize()+
		` SET default_transaction_isolation = 'repeatable read'`)
	require.NoError(t, err)
	res, err := retention.Purge(t.Context(), dbtest.Pool(t, admin.DSN), retention.PurgeParams{Reason: "weekly"}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 9, res.Purged)
}

// A purge that yields between batches stops when its context ends, even
// while it waits, and resumes.
func TestYieldingPurgeStopsAndResumes(t *testing.T) {
	t.Parallel()
	_, admin := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	p := retention.PurgeParams{Reason: "weekly", BatchSize: 2, Pace: retention.FixedYield(retention.MaxYield)}
	var seen []purgereport.Progress
	_, err := retention.Purge(ctx, admin.Pool, p, func(pr purgereport.Progress) {
		seen = append(seen, pr)
		cancel() // while the purge waits its 100 batch times
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, seen, 1, "it stopped in the wait after the first batch")
	p.Pace = retention.FixedYield(0)
	res, err := retention.Purge(t.Context(), admin.Pool, p, nil)
	require.NoError(t, err)
	require.Equal(t, seen[0].Run, res.Run)
	require.EqualValues(t, 9, res.Purged)
}

// By default a purge paces itself, and each batch's progress says what it
// took, how much slower it ran than the loop's fastest batch, and how long
// the purge pauses: k-1 times the batch's time for a slowdown of k (at
// most MaxPacedYield times). Asked for a fixed pace, it keeps no
// baseline. (Relations between the reported figures, not timings.)
func TestPurgeProgressShowsItsPace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pace  retention.Pace
		paced bool
		yield float64
	}{{retention.Paced, true, 0}, {retention.FixedYield(0), false, 0}, {retention.FixedYield(0.5), false, 0.5}} {
		_, admin := setup(t)
		var seen []purgereport.Progress
		res, err := retention.Purge(t.Context(), admin.Pool, retention.PurgeParams{Reason: "weekly", BatchSize: 2, Pace: c.pace},
			func(pr purgereport.Progress) { seen = append(seen, pr) })
		require.NoError(t, err)
		require.EqualValues(t, 9, res.Purged)
		require.Len(t, seen, 5, "batches of 2, 2, 2, 2, 1")
		var records int64
		for i, pr := range seen {
			records += pr.Records
			require.Equal(t, records, pr.Purged)
			require.Equal(t, i+1, pr.Batches)
			require.Positive(t, pr.Took)
			yield := c.yield
			if c.paced {
				require.GreaterOrEqual(t, pr.Slowdown, 1.0, "batch %d", i)
				yield = min(pr.Slowdown-1, retention.MaxPacedYield)
			} else {
				require.Zero(t, pr.Slowdown)
			}
			require.InDelta(t, float64(pr.Took)*yield, float64(pr.Pause), 2, "batch %d: %+v", i, pr)
		}
		if c.paced {
			require.Equal(t, 1.0, seen[0].Slowdown, "the first batch is its own baseline")
		}
	}
}

// A yield a purge cannot wait is refused before the run starts.
func TestPurgeRefusesABadYield(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	for _, y := range []float64{-1, math.NaN(), math.Inf(1), retention.MaxYield + 1} {
		_, err := retention.Purge(t.Context(), admin.Pool, retention.PurgeParams{Reason: "x", Pace: retention.FixedYield(y)}, nil)
		require.ErrorContains(t, err, fmt.Sprintf("yield %g: give a number from 0 (full speed) to 100", y))
	}
	var runs int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.purge_runs`).Scan(&runs))
	require.Zero(t, runs)
}

// A concurrent run's purge_tombstones deleting the expired tombstone that
// purge_batch is about to renew leaves the purged record with a new one
// (found by review: it was left without any).
func TestConcurrentTombstoneExpiryKeepsTheNewTombstone(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	admin2 := dbtest.NewPerson(t, d, "admin", "*")
	ctx := t.Context()
	_, err := d.Admin.Exec(ctx, `INSERT INTO opsdesk.tombstones (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at)
VALUES ('globex', 'send-email', 'gone-1', 1, sha256('x'), now() - interval '9 days', now() - interval '1 day')`)
	require.NoError(t, err)
	run1 := startRun(t, admin, `'send-email', NULL, '{}', 'a', 100`)
	run2 := startRun(t, admin2, `NULL, NULL, '{}', 'b', 100`)
	tx, err := admin2.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT tombstones FROM opsdesk.purge_tombstones($1, 100)`, run2).Scan(&n))
	require.Equal(t, 1, n)
	done := make(chan error, 1)
	var purged int
	go func() {
		done <- admin.Pool.QueryRow(ctx, `SELECT purged FROM opsdesk.purge_batch($1, 100)`, run1).Scan(&purged)
	}()
	// The batch waits for the expiry's lock on the tombstone.
	require.Eventually(t, func() bool {
		var waiting bool
		_ = d.Admin.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%purge_batch%'`).Scan(&waiting)
		return waiting
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-done)
	require.Equal(t, 3, purged)
	require.Empty(t, keys(t, d, `SELECT key FROM opsdesk.operations WHERE tool = 'send-email'`))
	require.Equal(t, []string{"gone-1", "gone-2", "gone-3"},
		keys(t, d, `SELECT key FROM opsdesk.tombstones WHERE tool = 'send-email' AND expires_at > now() ORDER BY key`),
		"every purged record has a live tombstone")
}

// A conflict must name the record it conflicts with by its id: one read
// before a purge cannot land on a record created again since (found by
// review).
func TestConflictNamesItsRecord(t *testing.T) {
	t.Parallel()
	d, _ := setup(t)
	_, err := d.Service.Exec(t.Context(), `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
VALUES ('acme', 'create-ticket', 'kept-1', 987654, '1', decode(repeat('ee', 32), 'hex'), decode(repeat('01', 32), 'hex'), 'w')`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23503", pgErr.Code)
	require.Equal(t, "conflicts_operation_fkey", pgErr.ConstraintName)
}

// A purge given its dry run deletes no more than it counted, though a
// hold released since makes one more record purgeable (found by review).
func TestPurgeTakesNoMoreThanItsDryRun(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	ctx := t.Context()
	dry, err := retention.Eligible(ctx, admin.Pool, retention.PurgeParams{})
	require.NoError(t, err)
	require.EqualValues(t, 9, dry.Count)
	_, err = admin.Pool.Exec(ctx, `SELECT * FROM opsdesk.set_hold(ARRAY(SELECT id FROM opsdesk.operations WHERE key = 'held-1'), false, 'released')`)
	require.NoError(t, err)
	res, err := retention.Purge(ctx, admin.Pool, retention.PurgeParams{Reason: "r", DryRun: &dry, BatchSize: 4}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 9, res.Purged)
	require.Len(t, keys(t, d, `SELECT key FROM opsdesk.operations WHERE expires_at <= now() AND state = 'completed' AND NOT held
  AND conflict_count = 0`), 1, "the released record waits for the next dry run")
}

// manyExpired adds 400 expired records over three tenants to the
// fixtures: 409 may go.
const manyExpired = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at)
SELECT (ARRAY['acme', 'globex', 'initech'])[1 + i % 3], 'create-ticket', 'many-' || i, '1', sha256(int8send(i)), 'local',
    'completed', 'succeeded', 'w', now() - interval '9 days', now() - interval '9 days', now() - interval '8 days',
    now() - interval '1 day' - i * interval '1 second'
FROM generate_series(1, 400) i`

// auditDetails is what a run's audit record says it purged.
type auditDetails struct {
	Purged    int64            `json:"purged"`
	PerTenant map[string]int64 `json:"per_tenant"`
	Batches   int              `json:"batches"`
	FirstID   int64            `json:"first_id"`
	LastID    int64            `json:"last_id"`
}

func readAudit(t *testing.T, d *dbtest.DB, res purgereport.Result) auditDetails {
	t.Helper()
	var raw []byte
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT details FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
		res.AuditTenant, res.AuditSeq).Scan(&raw))
	var got auditDetails
	require.NoError(t, json.Unmarshal(raw, &got))
	return got
}

// Workers side by side purge exactly what the dry run counted, and the
// run's one audit record adds up all their batches.
func TestParallelPurge(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	_, err := d.Admin.Exec(t.Context(), manyExpired)
	require.NoError(t, err)
	p := retention.PurgeParams{Reason: "weekly", BatchSize: 7, Workers: 4}
	dry, err := retention.Eligible(t.Context(), admin.Pool, p)
	require.NoError(t, err)
	require.EqualValues(t, 409, dry.Count)
	// Expires just after the cut-off: not what was counted.
	_, err = d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations SET expires_at = $1::timestamptz + interval '1 microsecond'
WHERE key = 'kept-1'`, dry.Before)
	require.NoError(t, err)
	p.Before = dry.Before
	var before struct{ min, max int64 }
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT min(id), max(id) FROM opsdesk.operations
WHERE state = 'completed' AND expires_at <= $1 AND NOT held AND key <> 'conflicted-1'`, dry.Before).Scan(&before.min, &before.max))

	var seen []purgereport.Progress
	var inside atomic.Int32
	var overlapped atomic.Bool
	res, err := retention.Purge(t.Context(), admin.Pool, p, func(pr purgereport.Progress) {
		if inside.Add(1) != 1 {
			overlapped.Store(true)
		}
		defer inside.Add(-1)
		seen = append(seen, pr)
	})
	require.NoError(t, err)
	require.False(t, overlapped.Load(), "one progress call at a time")
	require.EqualValues(t, 409, res.Purged)
	require.ElementsMatch(t, []string{"kept-1", "kept-2", "pending-1", "held-1", "conflicted-1"},
		keys(t, d, `SELECT key FROM opsdesk.operations`))
	for i, pr := range seen {
		require.Equal(t, i+1, pr.Batches)
	}
	require.EqualValues(t, 409, seen[len(seen)-1].Purged)

	got := readAudit(t, d, res)
	require.EqualValues(t, 409, got.Purged)
	require.Equal(t, len(seen), got.Batches)
	require.Equal(t, map[string]int64{"acme": 6 + 133, "globex": 3 + 134, "initech": 133}, got.PerTenant)
	require.Equal(t, before.min, got.FirstID)
	require.Equal(t, before.max, got.LastID)
	require.Empty(t, keys(t, d, `SELECT run::text FROM opsdesk.purge_batches`), "folded into the run")
}

// A parallel purge stopped half-way resumes its run, with any number of
// workers, and its one audit record adds up every batch of both.
func TestInterruptedParallelPurgeResumes(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	_, err := d.Admin.Exec(t.Context(), manyExpired)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	p := retention.PurgeParams{Reason: "weekly", BatchSize: 5, Workers: 3}
	var first purgereport.Progress
	_, err = retention.Purge(ctx, admin.Pool, p, func(pr purgereport.Progress) {
		first = pr
		if pr.Batches == 3 {
			cancel()
		}
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "run the purge again to resume")
	var left, batchRows int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM opsdesk.operations WHERE key LIKE 'many-%'),
    (SELECT count(*) FROM opsdesk.purge_batches WHERE run = $1)`, first.Run).Scan(&left, &batchRows))
	require.Less(t, left, 400, "some went")
	require.Greater(t, left, 300, "it stopped")
	require.GreaterOrEqual(t, batchRows, 3)

	dry, err := retention.Eligible(t.Context(), admin.Pool, retention.PurgeParams{})
	require.NoError(t, err)
	require.Equal(t, first.Run, dry.Resumes)
	p.Workers = 2
	var last purgereport.Progress
	res, err := retention.Purge(t.Context(), admin.Pool, p, func(pr purgereport.Progress) { last = pr })
	require.NoError(t, err)
	require.Equal(t, first.Run, res.Run, "the same run resumed")
	require.EqualValues(t, 409, res.Purged)
	require.EqualValues(t, 409, last.Purged, "progress counts the batches before the interruption")
	got := readAudit(t, d, res)
	require.EqualValues(t, 409, got.Purged)
	require.Equal(t, last.Batches, got.Batches)
	require.Equal(t, map[string]int64{"acme": 6 + 133, "globex": 3 + 134, "initech": 133}, got.PerTenant)
	var audits int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit WHERE action = 'retention:purge'`).Scan(&audits))
	require.Equal(t, 1, audits)
}

// A run resumed from before migration 00014 keeps the counts its earlier
// batches wrote into its row, and its audit record adds both up.
func TestRunCountedInItsRowResumes(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	run := startRun(t, admin, `NULL, NULL, '{}', 'nightly', 0`)
	_, err := d.Admin.Exec(t.Context(), `UPDATE opsdesk.purge_runs
SET purged = 3, batches = 1, first_id = 1, last_id = 3, per_tenant = '{"acme": 2, "hooli": 1}' WHERE id = $1`, run)
	require.NoError(t, err)
	res, err := retention.Purge(t.Context(), admin.Pool, retention.PurgeParams{Reason: "nightly", BatchSize: 4, Workers: 2}, nil)
	require.NoError(t, err)
	require.Equal(t, run, res.Run)
	require.EqualValues(t, 12, res.Purged)
	got := readAudit(t, d, res)
	require.EqualValues(t, 12, got.Purged)
	require.Equal(t, map[string]int64{"acme": 8, "globex": 3, "hooli": 1}, got.PerTenant)
	require.EqualValues(t, 1, got.FirstID)
	require.GreaterOrEqual(t, got.Batches, 1+3)
}

// purge_finish adds up what committed while it waited: under REPEATABLE
// READ it would miss it, so it refuses (audited).
func TestFinishNeedsReadCommitted(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	run := startRun(t, admin, `NULL, NULL, '{}', 'nightly', 0`)
	var code, message string
	err := pgx.BeginTxFunc(t.Context(), admin.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		return tx.QueryRow(t.Context(), `SELECT code, message FROM opsdesk.purge_finish($1)`, run).Scan(&code, &message)
	})
	require.NoError(t, err)
	require.Equal(t, "invalid", code)
	require.Contains(t, message, "READ COMMITTED")
	require.Equal(t, []string{"failed invalid"}, keys(t, d,
		`SELECT outcome || ' ' || (details->>'refusal') FROM opsdesk.audit WHERE action = 'retention:purge'`))
}

// Workers share the dry run's count: together they delete no more.
func TestParallelPurgeTakesNoMoreThanItsDryRun(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	_, err := d.Admin.Exec(t.Context(), manyExpired)
	require.NoError(t, err)
	dry, err := retention.Eligible(t.Context(), admin.Pool, retention.PurgeParams{})
	require.NoError(t, err)
	require.EqualValues(t, 409, dry.Count)
	res, err := retention.Purge(t.Context(), admin.Pool,
		retention.PurgeParams{Reason: "r", DryRun: &purgereport.DryRun{Count: 100, Before: dry.Before}, BatchSize: 7, Workers: 4}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 100, res.Purged)
	require.EqualValues(t, 100, readAudit(t, d, res).Purged)
}
