package storeview

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// The overview's pulse: the stuck records by tool, the longest stuck
// first, as the stuck list has them (a deferred record is not stuck), and
// the day's last decisions that were made, newest first, without the
// refused ones or other actions. A one-tenant viewer sees its tenant's.
func TestOverviewPulse(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	ctx := t.Context()
	operator := dbtest.NewPerson(t, d, "operator", "*")
	s := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})

	o, err := s.Overview(ctx)
	require.NoError(t, err)
	require.Empty(t, o.RecentDecisions)
	require.NotNil(t, o.RecentDecisions, "[] in JSON, not null")
	requireStuckByTool(t, s, o)
	require.Len(t, o.StuckByTool, 3)
	require.Equal(t, "create-ticket", o.StuckByTool[0].Tool, "run-42's lease expired first")
	require.False(t, o.StuckByToolCut)

	// Defer run-42, release deploy-7, and try a decision that is refused.
	get := func(tenant, tool, key string) readmodel.Detail {
		r, err := s.GetByIdentity(ctx, tenant, tool, key)
		require.NoError(t, err)
		return r
	}
	run42, deploy7 := get("acme", "create-ticket", "run-42:create-ticket"), get("initech", "deploy-service", "deploy-7")
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: run42.ID, Decision: reconcile.Defer,
		ExpectVersion: run42.Version, Reason: "the provider answers tomorrow", SnoozeUntil: run42.DBTime.Add(time.Hour)})
	require.NoError(t, err)
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: deploy7.ID, Decision: reconcile.NotExecuted,
		ExpectVersion: deploy7.Version, Reason: "never deployed"})
	require.NoError(t, err)
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: deploy7.ID, Decision: reconcile.NotExecuted,
		ExpectVersion: deploy7.Version, Reason: "again"})
	require.Error(t, err, "released already: refused, and audited as refused")

	o, err = s.Overview(ctx)
	require.NoError(t, err)
	requireStuckByTool(t, s, o)
	require.Equal(t, []readmodel.ToolStuck{{Tool: "charge-card", Stuck: 1, Oldest: o.StuckByTool[0].Oldest}}, o.StuckByTool,
		"run-42 deferred, deploy-7 released")
	require.Len(t, o.RecentDecisions, 2, "the refused attempt is no decision")
	require.Equal(t, deploy7.ID, o.RecentDecisions[0].OperationID, "the newest first")
	require.Equal(t, "decide:not-executed", o.RecentDecisions[0].Action)
	require.Equal(t, operator.Role, o.RecentDecisions[0].Role)
	require.Equal(t, run42.ID, o.RecentDecisions[1].OperationID)
	require.Equal(t, readmodel.ActionDefer, o.RecentDecisions[1].Action)

	// A decision older than a day is not recent.
	// (The trail is append-only: a superuser moves it back past the
	// trigger that says so.)
	_, err = d.Admin.Exec(ctx, fmt.Sprintf(`ALTER TABLE opsdesk.audit DISABLE TRIGGER audit_no_change;
UPDATE opsdesk.audit SET at = at - interval '25 hours' WHERE operation_id = %d;
ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_change`, run42.ID))
	require.NoError(t, err)
	o, err = s.Overview(ctx)
	require.NoError(t, err)
	require.Len(t, o.RecentDecisions, 1)
	require.Equal(t, deploy7.ID, o.RecentDecisions[0].OperationID)

	// A viewer of acme sees acme's stuck charge and none of initech's
	// decisions.
	acme, err := New(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{}).Overview(ctx)
	require.NoError(t, err)
	require.Len(t, acme.StuckByTool, 1)
	require.Equal(t, "charge-card", acme.StuckByTool[0].Tool)
	require.Empty(t, acme.RecentDecisions)
}

// requireStuckByTool checks o's stuck records by tool against the stuck
// list's.
func requireStuckByTool(t *testing.T, s *Store, o readmodel.Overview) {
	t.Helper()
	page, err := s.List(t.Context(), readmodel.Query{Filter: readmodel.Filter{States: []readmodel.State{readmodel.StateStuck}},
		Sort: readmodel.SortLease, Limit: 100})
	require.NoError(t, err)
	want := map[string]readmodel.ToolStuck{}
	var order []string
	for _, r := range page.Rows {
		w, ok := want[r.Tool]
		if !ok {
			order = append(order, r.Tool)
			w = readmodel.ToolStuck{Tool: r.Tool, Oldest: r.LeaseExpiresAt}
		}
		w.Stuck++
		want[r.Tool] = w
	}
	require.Len(t, o.StuckByTool, len(order))
	for i, tool := range order {
		got := o.StuckByTool[i]
		require.Equal(t, tool, got.Tool, "by the oldest lease")
		require.Equal(t, want[tool].Stuck, got.Stuck, tool)
		require.WithinDuration(t, want[tool].Oldest, got.Oldest, time.Microsecond, tool)
	}
}

// A reconciler's decision is marked as a machine's wherever decisions are
// read: the record's timeline, the audit list and the pulse; a person's
// is not.
func TestMachineDecisionsAreMarked(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	ctx := t.Context()
	admin := dbtest.NewPerson(t, d, "admin", "*")
	rec := dbtest.NewPerson(t, d, "reconciler", "*")
	operator := dbtest.NewPerson(t, d, "operator", "*")
	_, err := desk.SetAutoReconcile(ctx, admin.Pool, "charge-card", []string{"found", "not_found"}, "the payments team agreed", "")
	require.NoError(t, err)
	s := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})
	get := func(tenant, tool, key string) readmodel.Detail {
		r, err := s.GetByIdentity(ctx, tenant, tool, key)
		require.NoError(t, err)
		return r
	}
	ord2, deploy7 := get("acme", "charge-card", "ord-2"), get("initech", "deploy-service", "deploy-7")
	_, err = desk.Decide(ctx, rec.Pool, reconcile.DecideParams{OperationID: ord2.ID, Decision: reconcile.NotExecuted,
		ExpectVersion: ord2.Version, Reason: "auto_reconcile charge-card: lookup not found",
		Evidence: reconcile.Evidence{Lookup: reconcile.LookupNotFound, Digest: "sha256:def", Summary: "not found"}})
	require.NoError(t, err)
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: deploy7.ID, Decision: reconcile.NotExecuted,
		ExpectVersion: deploy7.Version, Reason: "never deployed"})
	require.NoError(t, err)

	machine, person := get("acme", "charge-card", "ord-2"), get("initech", "deploy-service", "deploy-7")
	require.Len(t, machine.Decisions, 1)
	require.True(t, machine.Decisions[0].Machine)
	require.Equal(t, rec.Role, machine.Decisions[0].Role)
	require.Len(t, person.Decisions, 1)
	require.False(t, person.Decisions[0].Machine)

	page, err := s.AuditList(ctx, readmodel.AuditQuery{Filter: readmodel.AuditFilter{Actions: []string{"decide:*"}}})
	require.NoError(t, err)
	marked := map[int64]bool{}
	for _, r := range page.Rows {
		marked[r.OperationID] = r.Machine
	}
	require.Equal(t, map[int64]bool{ord2.ID: true, deploy7.ID: false}, marked)

	o, err := s.Overview(ctx)
	require.NoError(t, err)
	require.Len(t, o.RecentDecisions, 2)
	for _, r := range o.RecentDecisions {
		require.Equal(t, r.OperationID == ord2.ID, r.Machine, r.OperationID)
	}
}
