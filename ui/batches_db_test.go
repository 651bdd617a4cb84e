package ui

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// TestBatchesRealDatabase: a run over acme and globex, on a real store,
// as :batches shows it to a viewer of acme alone: acme's part of the run
// only, and enter lists acme's records of it in the audit trail.
func TestBatchesRealDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT t, 'charge-card', k, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM (VALUES ('acme', 'f1'), ('acme', 'n1'), ('globex', 'g1')) v(t, k)`)
	require.NoError(t, err)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	batch, err := desk.StartBatch(ctx, operator.Pool, "state:stuck tool:charge-card", "Olga")
	require.NoError(t, err)
	for _, c := range []struct {
		key string
		d   reconcile.Decision
	}{{"f1", reconcile.Completed}, {"n1", reconcile.NotExecuted}, {"g1", reconcile.Completed}} {
		var id int64
		require.NoError(t, d.Admin.QueryRow(ctx, `SELECT id FROM opsdesk.operations WHERE key = $1`, c.key).Scan(&id))
		p := reconcile.DecideParams{OperationID: id, Decision: c.d, ExpectVersion: 1, Reason: "outage", Batch: batch,
			Evidence: reconcile.Evidence{Lookup: reconcile.LookupNotFound, Summary: "not found"}}
		if c.d == reconcile.Completed {
			p.ResultRef = "CH-" + c.key
			p.Evidence = reconcile.Evidence{Lookup: reconcile.LookupFound, Ref: p.ResultRef, Summary: "found"}
		}
		_, err := desk.Decide(ctx, operator.Pool, p)
		require.NoError(t, err, c.key)
	}
	_, err = auditlog.Seal(ctx, d.Admin, "", 0)
	require.NoError(t, err)

	viewer := dbtest.NewPerson(t, d, "viewer", "acme")
	h := newSourceHarness(t, storeview.New(viewer.Pool, storeview.Config{StatementTimeout: 5 * time.Second}), Config{Context: "db"}, 120, 40)
	h.keys(":batches<enter>")
	v := flat(h.view())
	require.Contains(t, v, "2 records · charge-card · acme ", "the runs:\n%s", h.view())
	require.NotContains(t, v, "globex", "the runs:\n%s", h.view())
	require.Contains(t, v, "found → completed 1 decided · not found → not-executed 1 decided", "the runs:\n%s", h.view())
	require.Contains(t, v, "batch "+batch, "the runs:\n%s", h.view())
	require.Contains(t, v, "filter state:stuck tool:charge-card", "the runs:\n%s", h.view())

	h.keys("<enter>")
	require.Equal(t, screenAudit, h.m.active().id())
	v = flat(h.view())
	require.Contains(t, v, "filter: batch:"+batch, "the trail:\n%s", h.view())
	require.Contains(t, v, "decide:completed", "the trail:\n%s", h.view())
	require.Contains(t, v, "decide:not-executed", "the trail:\n%s", h.view())
	require.NotContains(t, v, "g1", "the trail:\n%s", h.view())
}
