package storeview

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// A deferred record leaves the queue: not stuck, not counted as stuck,
// not the oldest; it is listed as deferred, with when and by whom, and
// counted on its own. Once its reminder passes it is stuck again, and
// due. A viewer reads all of it.
func TestDeferredLeavesTheQueueUntilDue(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	ctx := t.Context()
	operator := dbtest.NewPerson(t, d, "operator", "*")
	s := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})

	before, err := s.Overview(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, before.Stuck)
	require.Zero(t, before.Deferred)
	require.Equal(t, "run-42:create-ticket", before.OldestStuck.Key)

	// Defer the oldest stuck record for an hour.
	oldest, err := s.GetByIdentity(ctx, "acme", "create-ticket", "run-42:create-ticket")
	require.NoError(t, err)
	until := oldest.DBTime.Add(time.Hour)
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: oldest.ID, Decision: reconcile.Defer,
		ExpectVersion: oldest.Version, Reason: "the provider answers tomorrow", SnoozeUntil: until})
	require.NoError(t, err)

	o, err := s.Overview(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, o.Stuck, "a deferred record is not stuck")
	require.EqualValues(t, 1, o.Deferred)
	require.False(t, o.DeferredAtLeast)
	require.Equal(t, "ord-2", o.OldestStuck.Key, "the oldest stuck record is the next one")
	require.NotNil(t, o.NextDue)
	require.Equal(t, oldest.ID, o.NextDue.ID)
	require.Equal(t, []string{"deploy-7", "ord-2"}, list(t, s, "state:stuck"))
	require.Equal(t, []string{"run-42:create-ticket"}, list(t, s, "state:deferred"))
	require.Equal(t, []string{"deploy-7", "ord-2", "run-42:create-ticket"}, list(t, s, "state:stuck,deferred"))

	page, err := s.List(ctx, readmodel.Query{Filter: readmodel.Filter{States: []readmodel.State{readmodel.StateDeferred}}})
	require.NoError(t, err)
	r := page.Rows[0]
	require.Equal(t, readmodel.StateDeferred, r.State)
	require.True(t, r.Deferred())
	require.True(t, r.Pending(), "a deferred record may still be decided")
	require.WithinDuration(t, until, r.DeferredUntil, time.Millisecond)
	require.Equal(t, operator.Role, r.DeferredBy)
	det, err := s.Get(ctx, oldest.ID)
	require.NoError(t, err)
	require.Equal(t, readmodel.StateDeferred, det.State)
	require.Equal(t, operator.Role, det.DeferredBy)

	// A second, shorter deferral replaces the first: a second from now.
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: oldest.ID, Decision: reconcile.Defer,
		ExpectVersion: oldest.Version, Reason: "sooner", SnoozeUntil: time.Now().Add(time.Second)})
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	o, err = s.Overview(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, o.Stuck, "due again: back in the queue")
	require.Zero(t, o.Deferred)
	require.Nil(t, o.NextDue)
	require.Equal(t, "run-42:create-ticket", o.OldestStuck.Key)
	require.True(t, o.OldestStuck.Due())
	require.Equal(t, operator.Role, o.OldestStuck.DeferredBy)
}

// deferred is the fixtures with acme's stuck ord-2 deferred n times for
// an hour by an operator, read by a viewer of every tenant.
func deferred(t *testing.T, n int) (*dbtest.DB, *Store, readmodel.Detail) {
	t.Helper()
	d := fixtureDB(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	s := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})
	rec, err := s.GetByIdentity(t.Context(), "acme", "charge-card", "ord-2")
	require.NoError(t, err)
	for range n {
		_, err = desk.Decide(t.Context(), operator.Pool, reconcile.DecideParams{OperationID: rec.ID, Decision: reconcile.Defer,
			ExpectVersion: rec.Version, Reason: "later", SnoozeUntil: rec.DBTime.Add(time.Hour)})
		require.NoError(t, err)
	}
	return d, s, rec
}

// A deferral holds for the version it was made on: a record taken over
// since is the new attempt's, and its old deferral says nothing.
func TestDeferralEndsWithItsVersion(t *testing.T) {
	t.Parallel()
	d, s, rec := deferred(t, 1)
	ctx := t.Context()
	require.Equal(t, []string{"ord-2"}, list(t, s, "state:deferred"))

	// A takeover: the next attempt, leased from now, then abandoned
	// (its lease already over by the time it is read).
	_, err := d.Admin.Exec(ctx, `UPDATE opsdesk.operations SET attempt = attempt + 1, version = version + 1,
    owner = 'worker-9', leased_at = now(), lease_expires_at = now() + interval '1 millisecond', updated_at = now()
WHERE id = $1`, rec.ID)
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)
	require.Empty(t, list(t, s, "state:deferred"))
	require.Contains(t, list(t, s, "state:stuck"), "ord-2")
	got, err := s.Get(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, readmodel.StateStuck, got.State)
	require.True(t, got.DeferredUntil.IsZero(), "the old version's deferral is not this one's")
	require.False(t, got.Due())
}

// Lists say how many records match (Total): exactly up to the cap,
// estimated above it for a role that sees every tenant, a lower bound
// for one that sees some.
func TestListTotals(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	ctx := t.Context()
	s := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})
	for filter, want := range map[string]int64{"": 11, "state:stuck": 3, "state:completed tenant:globex": 2, "tenant:nobody": 0} {
		f, err := readmodel.ParseFilter(filter)
		require.NoError(t, err)
		total, err := s.Total(ctx, f)
		require.NoError(t, err)
		require.Equal(t, readmodel.Count{N: want}, total, filter)
	}

	_, err := d.Admin.Exec(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at)
SELECT 'acme', 'charge-card', 'bulk-' || i, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'completed', 'rejected', 'w',
    now(), now(), now(), now() + interval '7 days'
FROM generate_series(1, 1500) i;
ANALYZE opsdesk.operations`)
	require.NoError(t, err)
	total, err := s.Total(ctx, readmodel.Filter{States: []readmodel.State{readmodel.StateRejected}})
	require.NoError(t, err)
	require.True(t, total.Estimated)
	require.InDelta(t, 1501, total.N, 150)
	scoped := New(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{})
	total, err = scoped.Total(ctx, readmodel.Filter{States: []readmodel.State{readmodel.StateRejected}})
	require.NoError(t, err)
	require.Equal(t, readmodel.Count{N: readmodel.CountCap, AtLeast: true}, total)
}

// A record changed after it was written is flagged wherever it shows: in
// the audit trail's list and in its operation's decisions, to a viewer;
// the records around it are not.
func TestChangedAuditRecordsFlagged(t *testing.T) {
	t.Parallel()
	d, s, rec := deferred(t, 3)
	ctx := t.Context()
	tx, err := d.Admin.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `ALTER TABLE opsdesk.audit DISABLE TRIGGER audit_no_change;
UPDATE opsdesk.audit SET reason = 'nothing to see' WHERE tenant = 'acme' AND seq = 2;
ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_change`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	page, err := s.AuditList(ctx, readmodel.AuditQuery{Filter: readmodel.OperationAuditFilter("acme", rec.ID)})
	require.NoError(t, err)
	require.Len(t, page.Rows, 3)
	for _, r := range page.Rows {
		require.Equal(t, r.Seq == 2, r.HashBroken, "seq %d", r.Seq)
	}
	det, err := s.Get(ctx, rec.ID)
	require.NoError(t, err)
	require.Len(t, det.Decisions, 3)
	for _, dec := range det.Decisions {
		require.Equal(t, dec.AuditSeq == 2, dec.HashBroken, "seq %d", dec.AuditSeq)
	}
	require.Equal(t, "nothing to see", det.Decisions[1].Reason)
	require.WithinDuration(t, rec.DBTime.Add(time.Hour), det.Decisions[0].SnoozeUntil, time.Millisecond)
	one, err := s.AuditRecord(ctx, "acme", 2)
	require.NoError(t, err)
	require.True(t, one.HashBroken)
	require.False(t, one.Check.HashMatches)
}
