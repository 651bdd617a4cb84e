package storeview

import (
	"testing"

	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// Bulk runs the batches tests make, and a decision of no run.
const (
	runA = "0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b"
	runB = "11111111-2222-4333-8444-555555555555"
)

// batchesDB is a store where an operator of every tenant decided as two
// bulk runs do: run A over acme and globex (acme's f1 completed, f2
// refused as changed, globex's g1 not executed), then run B (acme's f3),
// and f4 by hand. It returns the ids by key.
func batchesDB(t *testing.T) (*dbtest.DB, map[string]int64) {
	t.Helper()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT t, 'charge-card', k, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM (VALUES ('acme', 'f1'), ('acme', 'f2'), ('acme', 'f3'), ('acme', 'f4'), ('globex', 'g1')) v(t, k)`)
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
	decide("f1", runA, reconcile.Completed, 1, reconcile.LookupFound)
	decide("f2", runA, reconcile.Completed, 7, reconcile.LookupFound)
	decide("g1", runA, reconcile.NotExecuted, 1, reconcile.LookupNotFound)
	decide("f3", runB, reconcile.Completed, 1, reconcile.LookupFound)
	decide("f4", "", reconcile.Completed, 1, reconcile.LookupFound)
	_, err = auditlog.Seal(t.Context(), d.Admin, "", 0)
	require.NoError(t, err)
	return d, ids
}

// The runs newest first, each with when, by whom, what and its groups'
// counts; one page at a time by the cursor; and as row-level security
// lets a one-tenant viewer see them: only its tenant's part of a run.
func TestAuditBatches(t *testing.T) {
	t.Parallel()
	d, _ := batchesDB(t)
	operator := dbtest.NewPerson(t, d, "viewer", "*")
	s := New(operator.Pool, Config{})

	page, err := s.AuditBatches(t.Context(), readmodel.BatchQuery{})
	require.NoError(t, err)
	require.Nil(t, page.Next)
	require.False(t, page.DBTime.IsZero())
	require.Len(t, page.Batches, 2, "the decision of no run is no run")
	b, a := page.Batches[0], page.Batches[1]
	require.Equal(t, runB, b.ID, "newest first")
	require.Equal(t, runA, a.ID)
	require.Equal(t, []string{"acme", "globex"}, a.Tenants)
	require.Equal(t, []string{"charge-card"}, a.Tools)
	require.Len(t, a.Roles, 1)
	require.Equal(t, 3, a.Records)
	require.Equal(t, 3, a.Operations)
	require.Nil(t, a.Filter, "the audit records do not hold the filter")
	require.False(t, a.FirstAt.After(a.LastAt))
	require.Equal(t, a.LastAt.Sub(a.FirstAt), a.Span)
	require.Equal(t, []readmodel.BatchGroup{
		{Lookup: "found", Decision: "completed", Decided: 1, Skipped: 1},
		{Lookup: "not_found", Decision: "not-executed", Decided: 1},
	}, a.Groups)
	require.Equal(t, []readmodel.BatchGroup{{Lookup: "found", Decision: "completed", Decided: 1}}, b.Groups)

	// A page at a time.
	first, err := s.AuditBatches(t.Context(), readmodel.BatchQuery{Limit: 1})
	require.NoError(t, err)
	require.Len(t, first.Batches, 1)
	require.NotNil(t, first.Next)
	c, err := readmodel.ParseBatchCursor(first.Next.String())
	require.NoError(t, err)
	second, err := s.AuditBatches(t.Context(), readmodel.BatchQuery{Limit: 1, After: &c})
	require.NoError(t, err)
	require.Equal(t, []string{runB, runA}, []string{first.Batches[0].ID, second.Batches[0].ID})
	require.Nil(t, second.Next)

	// One tenant's viewers.
	for _, c := range []struct {
		tenant string
		want   map[string][]readmodel.BatchGroup
	}{
		{"acme", map[string][]readmodel.BatchGroup{
			runA: {{Lookup: "found", Decision: "completed", Decided: 1, Skipped: 1}},
			runB: {{Lookup: "found", Decision: "completed", Decided: 1}},
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
