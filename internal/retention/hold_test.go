package retention_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/reconcile/desk"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/retention"
	"github.com/opsdesk/opsdesk/reconcile"
)

// stuckRecords makes n stuck records in acme as fixtures, keys prefix-1
// and up, and returns their ids in order.
func stuckRecords(t *testing.T, d *dbtest.DB, prefix string, n int) []int64 {
	t.Helper()
	rows, err := d.Admin.Query(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT 'acme', 'charge-card', $1 || i, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM generate_series(1, $2) i ORDER BY i RETURNING id`, prefix, n)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

func heldCount(t *testing.T, d *dbtest.DB, ids []int64) int {
	t.Helper()
	var n int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.operations WHERE held AND id = ANY ($1)`, ids).Scan(&n))
	return n
}

// A hold of thousands of records goes in batches, each a short
// transaction of its own, so an operator deciding in the tenant meanwhile
// neither waits long nor ends it. It was one transaction that kept the
// tenant's chain for seconds, and the first decision there ended it after
// 2 s: a large hold could not finish in a busy tenant.
func TestLargeHoldOutlastsDecisions(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	ctx := t.Context()
	const n = 3000
	held := stuckRecords(t, d, "held-", n)
	deferred := stuckRecords(t, d, "deferred-", 5)

	// The operator defers records in acme over and over (a deferral
	// changes no version), until the hold is done.
	stop := make(chan struct{})
	first := make(chan struct{})
	type tally struct {
		n       int
		slowest time.Duration
		err     error
	}
	done := make(chan tally, 1)
	go func() {
		var r tally
		defer func() { done <- r }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			_, r.err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: deferred[i%len(deferred)],
				Decision: reconcile.Defer, ExpectVersion: 1, Reason: "provider down", SnoozeUntil: time.Now().Add(time.Hour)})
			if r.err != nil {
				return
			}
			r.slowest = max(r.slowest, time.Since(start))
			if r.n++; r.n == 1 {
				close(first)
			}
		}
	}()
	select {
	case <-first:
	case r := <-done:
		t.Fatalf("the first deferral: %v", r.err)
	}

	var reports []retention.HoldProgress
	start := time.Now()
	r, err := retention.SetHold(ctx, admin.Pool, held, true, "litigation", "", func(p retention.HoldProgress) {
		reports = append(reports, p)
	})
	took := time.Since(start)
	close(stop)
	decisions := <-done
	t.Logf("held %d records in %s while %d deferrals ran in the tenant, the slowest in %s",
		n, took.Round(time.Millisecond), decisions.n, decisions.slowest.Round(time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, decisions.err)
	require.Equal(t, retention.HoldResult{Changed: n}, r)
	require.Equal(t, n, heldCount(t, d, held))
	require.Greater(t, decisions.n, 1, "deferrals ran while the hold did")
	require.Greater(t, len(reports), 1)
	require.Equal(t, retention.HoldBatch, reports[0].Done, "the first batch")
	for i, p := range reports {
		require.Equal(t, n, p.Total)
		require.Equal(t, held[p.Done-1], p.Through)
		if i > 0 {
			require.Greater(t, p.Done, reports[i-1].Done)
			require.LessOrEqual(t, p.Done-reports[i-1].Done, 4*retention.HoldBatch, "batch %d", i)
		}
	}
	require.Equal(t, n, reports[len(reports)-1].Done)
	t.Logf("in %d batches", len(reports))
	var ended int
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT count(*) FROM opsdesk.audit WHERE details ? 'ended_sessions'`).Scan(&ended))
	require.Zero(t, ended, "no session was ended")
}

// A large hold checks every record before it holds any: one missing (or
// not visible) holds nothing, and the refusal names it, as a small hold's.
func TestLargeHoldOfAMissingRecordHoldsNothing(t *testing.T) {
	t.Parallel()
	d, _ := setup(t)
	ids := stuckRecords(t, d, "held-", 3*retention.HoldBatch)
	var globex int64
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT id FROM opsdesk.operations WHERE tenant = 'globex' LIMIT 1`).Scan(&globex))
	acmeAdmin := dbtest.NewPerson(t, d, "admin", "acme")

	r, err := retention.SetHold(t.Context(), acmeAdmin.Pool, append(ids, globex, 999999999), true, "litigation", "", nil)
	require.ErrorIs(t, err, audited.ErrNotFound)
	require.Contains(t, err.Error(), fmt.Sprintf("no operations %d, 999999999 (or not visible to %s): nothing held", globex, acmeAdmin.Role))
	require.Equal(t, []int64{globex, 999999999}, r.Missing)
	require.Zero(t, heldCount(t, d, ids))
}

// A batch that fails stops the hold, and the error says which records are
// held and which are not: here a record of the second batch is purged
// after the check.
func TestHoldStoppedPartWaySaysWhatItHeld(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	ids := stuckRecords(t, d, "held-", 10*retention.HoldBatch)
	b := retention.HoldBatch
	gone := ids[b] // the first of the second batch
	r, err := retention.SetHold(t.Context(), admin.Pool, ids, true, "litigation", "", func(p retention.HoldProgress) {
		if p.Done == b {
			_, err := d.Admin.Exec(context.WithoutCancel(t.Context()), `DELETE FROM opsdesk.operations WHERE id = $1`, gone)
			if err != nil {
				panic(err)
			}
		}
	})
	require.ErrorIs(t, err, audited.ErrNotFound)
	var partial *retention.PartialHoldError
	require.True(t, errors.As(err, &partial))
	require.Equal(t, ids[:b], partial.Done)
	require.Equal(t, ids[b:], partial.NotDone)
	require.Empty(t, partial.Unknown)
	require.NotEmpty(t, partial.Batch)
	require.Equal(t, ids[b:b+len(partial.Batch)], partial.Batch)
	require.Equal(t, retention.HoldResult{Changed: b, Missing: []int64{gone}}, r)
	require.Equal(t, fmt.Sprintf("hold records: stopped part way: held %d of the %d records named, "+
		"those with ids from %d to %d (%d changed, 0 already were); not held: %d, those with ids from %d to %d; the batch of those with ids from %d to %d failed: "+
		"failed: no operation %d (or not visible to %s): nothing held (audit record #1) "+
		"(the same command again finishes the job: records already held are left as they are)",
		b, len(ids), ids[0], ids[b-1], b, len(ids)-b, ids[b], ids[len(ids)-1], ids[b], partial.Batch[len(partial.Batch)-1],
		gone, admin.Role), err.Error())
	require.Equal(t, b, heldCount(t, d, ids))
	require.Equal(t, b, heldCount(t, d, ids[:b]))

	// The same hold again, less the record gone, finishes the job.
	rest := append(append([]int64{}, ids[:b]...), ids[b+1:]...)
	r, err = retention.SetHold(t.Context(), admin.Pool, rest, true, "litigation", "", nil)
	require.NoError(t, err)
	require.Equal(t, retention.HoldResult{Changed: len(rest) - b, Unchanged: b}, r)
	require.Equal(t, len(rest), heldCount(t, d, rest))
}
