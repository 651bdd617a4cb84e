package bulk_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/lookuptest"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// A found answer's reference is what the provider sent: a run proposes and
// records a number's text byte for byte, and the audit record's lookup
// reference, which the database checks the decision against, is that text
// too. An answer naming a member twice (anywhere, escapes decoded), or
// whose reference a decision cannot record as sent, lands in the error
// group: no proposal, never decided, with a short note saying why.
func TestBulkReferenceIsTheProvidersText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.spec = reconcile.LookupSpec{URL: lookuptest.Serve(t), ResultRef: lookuptest.Pointer, Timeout: 5 * time.Second}
	t.Cleanup(b.client.CloseIdleConnections) // before the provider closes
	var keys []string
	for _, a := range lookuptest.Answers {
		keys = append(keys, a.Key)
	}
	b.stuckKeys(t, "acme", keys...)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	r := b.reconciler(t, operator, bulk.Config{})
	p := plan(t, b.ctx, r, "state:stuck tool:charge-card")

	items := map[string]bulk.Item{}
	for _, g := range p.Groups {
		for _, item := range g.Items {
			items[item.Key] = item
		}
	}
	found := 0
	for _, a := range lookuptest.Answers {
		item := items[a.Key]
		if a.Ref != "" {
			found++
			require.Equal(t, bulk.Found, item.Verdict, "%s: %s", a.Key, item.Note)
			require.Equal(t, a.Ref, item.Ref, a.Key)
			continue
		}
		require.Equal(t, bulk.Error, item.Verdict, "%s: %s", a.Key, item.Note)
		require.Empty(t, item.Ref, a.Key)
		require.Contains(t, item.Note, "the provider has it, but ", a.Key)
		require.Contains(t, item.Note, a.Says, a.Key)
		require.LessOrEqual(t, len(item.Note), 300, a.Key)
	}
	_, err := r.Accept(b.ctx, p, bulk.Error, bulk.AcceptParams{Reason: "outage", Confirm: p.Group(bulk.Error).Count()}, nil)
	require.ErrorIs(t, err, bulk.ErrNoProposal, "the error group is decided one by one")

	res, err := r.Accept(b.ctx, p, bulk.Found, bulk.AcceptParams{Reason: "outage", Confirm: found}, nil)
	require.NoError(t, err)
	require.Equal(t, found, res.Counts[bulk.Decided])
	rows, err := b.db.Admin.Query(b.ctx, `
SELECT o.key, opsdesk.view_state(o), coalesce(o.result_ref, ''),
    (SELECT count(*) || ':' || coalesce(string_agg(a.details->>'lookup_ref', ','), '') FROM opsdesk.audit a WHERE a.operation_id = o.id)
FROM opsdesk.operations o`)
	require.NoError(t, err)
	stored, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (st [4]string, err error) {
		return st, row.Scan(&st[0], &st[1], &st[2], &st[3])
	})
	require.NoError(t, err)
	require.Len(t, stored, len(lookuptest.Answers))
	want := map[string][4]string{}
	for _, a := range lookuptest.Answers {
		// One audit record, the decision's, with the lookup's reference; or none.
		want[a.Key] = [4]string{a.Key, "completed", a.Ref, "1:" + a.Ref}
		if a.Ref == "" {
			want[a.Key] = [4]string{a.Key, "stuck", "", "0:"}
		}
	}
	for _, st := range stored {
		require.Equal(t, want[st[0]], st, "the provider's text exactly, or nothing decided")
	}
}
