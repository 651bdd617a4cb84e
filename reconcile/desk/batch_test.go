package desk_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// A decision of a bulk run carries the run's batch id into its audit
// record, refused or not (migration 00020); a decision of its own has
// none; a batch id that is not a UUID is refused before anything is
// audited.
func TestDecisionsCarryTheirBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	viewer := dbtest.NewPerson(t, b.db, "viewer", "*")
	batch := reconcile.NewBatchID()
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`), batch)
	require.NotEqual(t, batch, reconcile.NewBatchID())

	one, v1 := b.stuck(t, "acme", "batch-1")
	two, v2 := b.stuck(t, "acme", "batch-2")
	three, v3 := b.stuck(t, "acme", "batch-3")
	_, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: one, Decision: reconcile.NotExecuted,
		ExpectVersion: v1, Reason: "nothing at the provider", Batch: batch})
	require.NoError(t, err)
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: two, Decision: reconcile.NotExecuted,
		ExpectVersion: v2 + 1, Reason: "nothing at the provider", Batch: batch})
	require.ErrorIs(t, err, reconcile.ErrChanged)
	_, err = desk.Decide(b.ctx, viewer.Pool, reconcile.DecideParams{OperationID: two, Decision: reconcile.NotExecuted,
		ExpectVersion: v2, Reason: "mine", Batch: batch})
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: three, Decision: reconcile.NotExecuted,
		ExpectVersion: v3, Reason: "nothing at the provider"})
	require.NoError(t, err)

	before := len(b.audits(t))
	for _, bad := range []string{"x", "00000000-0000-0000-0000-00000000000g", " " + batch, batch + "\x00", "{" + batch + "}"} {
		_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: two, Decision: reconcile.NotExecuted,
			ExpectVersion: v2, Reason: "x", Batch: bad})
		require.ErrorIs(t, err, reconcile.ErrInvalid, "%q", bad)
	}
	require.Len(t, b.audits(t), before, "a bad batch id is refused before the database")

	rows, err := b.db.Admin.Query(b.ctx, `SELECT operation_id, outcome, coalesce(details->>'batch', '') FROM opsdesk.audit ORDER BY tenant, seq`)
	require.NoError(t, err)
	type rec struct {
		id             int64
		outcome, batch string
	}
	var got []rec
	for rows.Next() {
		var r rec
		require.NoError(t, rows.Scan(&r.id, &r.outcome, &r.batch))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, []rec{{one, "succeeded", batch}, {two, "failed", batch}, {two, "denied", batch}, {three, "succeeded", ""}}, got)
}
