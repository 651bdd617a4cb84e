package bulk_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// conflictedFixtures inserts stuck charges in acme keyed by the map's
// keys, each with that many unreviewed and reviewed conflicting attempts
// (the superuser sets up; the tests act as people).
func (b *bundle) conflictedFixtures(t *testing.T, conflicts map[string][2]int) {
	t.Helper()
	for k, n := range conflicts {
		_, err := b.db.Admin.Exec(b.ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at,
    conflict_count, last_conflict_at)
VALUES ('acme', 'charge-card', $1, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute', $2::int + $3::int, CASE WHEN $2::int + $3::int > 0 THEN now() END)`,
			k, n[0], n[1])
		require.NoError(t, err)
		b.conflicts(t, k, n[0], false)
		b.conflicts(t, k, n[1], true)
	}
}

// conflicts adds n conflicting attempts to acme's charge key, reviewed
// or not.
func (b *bundle) conflicts(t *testing.T, key string, n int, reviewed bool) {
	t.Helper()
	_, err := b.db.Admin.Exec(b.ctx, `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, reviewed_at, reviewed_by)
SELECT o.tenant, o.tool, o.key, o.id, '2', decode(repeat('ff', 32), 'hex'), o.fingerprint, 'worker-9',
    CASE WHEN $3 THEN now() END, CASE WHEN $3 THEN 'alice' END
FROM opsdesk.operations o, generate_series(1, $2) WHERE o.tenant = 'acme' AND o.key = $1`, key, n, reviewed)
	require.NoError(t, err)
}

// A record with conflicting attempts nobody reviewed (issue 22 §2: #222
// was decided completed with one, unmarked) is planned in a group of its
// own, never accepted with the clean records: accepting the found group
// leaves it stuck, and accepting its own group, with its own count,
// decides it. A record whose attempts were all reviewed is clean, and a
// clean record that gains a conflict after the lookup is skipped.
func TestBulkConflictedRecordsGroupApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakeProvider(t, time.Second, found)
	b.conflictedFixtures(t, map[string][2]int{
		"f-clean-1": {0, 0}, "f-clean-2": {0, 0}, "f-late": {0, 0},
		"f-reviewed": {0, 2}, // every attempt reviewed: clean
		"f-conflict": {1, 2}, // one of three unreviewed
		"n-conflict": {2, 0},
	})
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	r := b.reconciler(t, operator, bulk.Config{})
	p := plan(t, b.ctx, r, "state:stuck tool:charge-card")

	var verdicts []bulk.Verdict
	for _, g := range p.Groups {
		verdicts = append(verdicts, g.Verdict)
	}
	require.Equal(t, []bulk.Verdict{bulk.Found, bulk.NotFound, bulk.FoundConflicted, bulk.NotFoundConflicted, bulk.NoAnswer, bulk.Error},
		verdicts, "the conflicted groups come after the clean definite ones")
	keys := func(g *bulk.Group) []string {
		var out []string
		for _, it := range g.Items {
			out = append(out, it.Key)
		}
		return out
	}
	require.ElementsMatch(t, []string{"f-clean-1", "f-clean-2", "f-late", "f-reviewed"}, keys(p.Group(bulk.Found)))
	require.Empty(t, p.Group(bulk.NotFound).Items)
	fc := p.Group(bulk.FoundConflicted)
	require.Equal(t, []string{"f-conflict"}, keys(fc))
	require.Equal(t, bulk.FoundConflicted, fc.Items[0].Verdict)
	require.Equal(t, "CH-f-conflict", fc.Items[0].Ref)
	require.Equal(t, fc.Proposal, bulk.Found.Proposal(), "the evidence proposes what it proposes for clean records")
	records, conflicts := fc.Conflicted()
	require.Equal(t, [2]int{1, 3}, [2]int{records, conflicts})
	require.Equal(t, []string{"n-conflict"}, keys(p.Group(bulk.NotFoundConflicted)))
	require.Equal(t, "found, conflicted", bulk.FoundConflicted.Label())
	require.Equal(t, "not-found-conflicted", bulk.NotFoundConflicted.Flag())

	// A conflicting attempt on a clean record after the lookup.
	b.conflicts(t, "f-late", 1, false)
	_, err := b.db.Admin.Exec(b.ctx, `UPDATE opsdesk.operations SET conflict_count = conflict_count + 1 WHERE key = 'f-late'`)
	require.NoError(t, err)

	res, err := r.Accept(b.ctx, p, bulk.Found, bulk.AcceptParams{Reason: "outage", Confirm: 4}, nil)
	require.NoError(t, err)
	require.Equal(t, 3, res.Counts[bulk.Decided])
	require.Equal(t, 1, res.Counts[bulk.Skipped])
	skipped := res.Only(bulk.Skipped)[0]
	require.Equal(t, "f-late", skipped.Key)
	require.Contains(t, skipped.Message, "a conflicting attempt was recorded since the lookup")
	recs := b.records(t, p.BatchID)
	require.Equal(t, "stuck", recs["acme/f-conflict"].State, "accepting the clean group leaves the conflicted record")
	require.Equal(t, "stuck", recs["acme/f-late"].State)
	require.Equal(t, "completed", recs["acme/f-reviewed"].State)

	// Its own count, not the clean group's.
	_, err = r.Accept(b.ctx, p, bulk.FoundConflicted, bulk.AcceptParams{Reason: "outage", Confirm: 4}, nil)
	require.ErrorIs(t, err, bulk.ErrNotConfirmed)
	res, err = r.Accept(b.ctx, p, bulk.FoundConflicted, bulk.AcceptParams{Reason: "outage, conflicts seen", Confirm: 1}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts[bulk.Decided])
	recs = b.records(t, p.BatchID)
	require.Equal(t, "completed", recs["acme/f-conflict"].State)
	require.Equal(t, "CH-f-conflict", *recs["acme/f-conflict"].ResultRef)
	require.Equal(t, "stuck", recs["acme/n-conflict"].State)
}
