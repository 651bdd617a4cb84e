package ui

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// decideFixtures are two stuck records: run-42 of an external effect
// whose outcome is unknown, run-43 of a local one.
const decideFixtures = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt,
    leased_at, lease_expires_at, created_at)
VALUES
 ('acme', 'create-ticket', 'run-42', '1', decode(repeat('03', 32), 'hex'), 'external_unknown', 'pending', 'worker-3', 1,
  now() - interval '42m', now() - interval '41m', now() - interval '42m'),
 ('acme', 'create-ticket', 'run-43', '1', decode(repeat('04', 32), 'hex'), 'local', 'pending', 'worker-4', 1,
  now() - interval '12m', now() - interval '11m', now() - interval '12m')`

// auditRow is what the test reads back from opsdesk.audit.
type auditRow struct {
	role, displayName, action, outcome, reason, stateBefore, stateAfter string
	versionBefore, versionAfter                                         int64
	forced, override                                                    bool
}

func lastAudit(t *testing.T, d *dbtest.DB, key string) auditRow {
	t.Helper()
	var a auditRow
	err := d.Admin.QueryRow(context.Background(), `
SELECT role, coalesce(display_name, ''), action, outcome, coalesce(reason, ''), state_before, state_after,
    version_before, version_after, forced, override
FROM opsdesk.audit WHERE key = $1 ORDER BY seq DESC LIMIT 1`, key).Scan(&a.role, &a.displayName, &a.action, &a.outcome,
		&a.reason, &a.stateBefore, &a.stateAfter, &a.versionBefore, &a.versionAfter, &a.forced, &a.override)
	require.NoError(t, err, "read the audit record of %s: %v", key, err)
	return a
}

// TestDecideRealDatabase drives the flow end to end on a real PostgreSQL,
// connected as an operator's own login role through storeview and
// desk.Desk: releasing a stuck record changes it and appends the
// audit record the database function writes; a record changed after the
// operator read it is refused, audited, and the flow shows what changed.
func TestDecideRealDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(ctx, decideFixtures)
	require.NoError(t, err, "fixtures: %v", err)
	person := dbtest.NewPerson(t, d, "operator", "*")
	store := storeview.New(person.Pool, storeview.Config{StatementTimeout: 5 * time.Second})
	desk := &desk.Desk{Pool: person.Pool, DisplayName: "Test Operator",
		Tools: map[string]reconcile.Tool{"create-ticket": {Runbook: "Check the ticket queue first."}}}
	h := newSourceHarness(t, store, Config{Context: "db", Decider: desk}, 120, 40)
	require.True(t, h.m.canDecide(), "the role's capabilities: %+v (known %v)", h.m.caps, h.m.capsKnown)
	require.Equal(t, person.Role, h.m.caps.Role, "the role's capabilities: %+v (known %v)", h.m.caps, h.m.capsKnown)
	require.Equal(t, "operator", roleLabel(h.m.caps), "the role's capabilities: %+v (known %v)", h.m.caps, h.m.capsKnown)

	// Release run-42: an external effect of unknown outcome that no
	// lookup answers for, so its operation id confirms it.
	h.keys(":key acme/create-ticket/run-42<enter>")
	require.NotNil(t, h.m.detail().d, "the stuck record does not offer reconcile:\n%s", h.view())
	require.Contains(t, h.view(), "r reconcile", "the stuck record does not offer reconcile:\n%s", h.view())
	id, version := h.m.detail().d.ID, h.m.detail().d.Version
	h.keys("r")
	v := flat(h.view())
	require.Contains(t, v, "⚠ no evidence gathered: the catalog has no lookup for create-ticket.", "the decision step:\n%s", h.view())
	h.keys("<pgdown><pgdown>")
	require.Contains(t, flat(h.view()), "Check the ticket queue first.", "the runbook:\n%s", h.view())
	h.keys("2<enter>no ticket in the queue<enter>")
	h.keys("n-42<enter>")                          // wrong: the key's end, not the record's id
	h.keys(strconv.FormatInt(id, 10) + "0<enter>") // wrong too
	var state string
	var after int64
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT state, version FROM opsdesk.operations WHERE id = $1`, id).Scan(&state, &after))
	require.Equal(t, "pending", state, "a wrong confirmation changed the record: %s, version %d", state, after)
	require.Equal(t, version, after, "a wrong confirmation changed the record: %s, version %d", state, after)
	h.keys(strconv.FormatInt(id, 10) + "<enter>")
	v = h.view()
	require.Contains(t, v, "✓ Done: confirmed not executed: released", "the result step:\n%s", v)
	require.Contains(t, v, "now ○ released · version "+strconv.FormatInt(version+1, 10), "the result step:\n%s", v)
	require.Contains(t, v, "record acme#1, committed", "the result step:\n%s", v)
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT state, version FROM opsdesk.operations WHERE id = $1`, id).Scan(&state, &after))
	require.Equal(t, "released", state, "the record is %s at version %d, want released at %d", state, after, version+1)
	require.Equal(t, version+1, after, "the record is %s at version %d, want released at %d", state, after, version+1)
	a := lastAudit(t, d, "run-42")
	want := auditRow{role: person.Role, displayName: "Test Operator", action: "decide:not-executed", outcome: "succeeded",
		reason: "no ticket in the queue", stateBefore: "stuck", stateAfter: "released", versionBefore: version, versionAfter: version + 1}
	require.Equal(t, want, a, "audit record\n%+v\nwant\n%+v", a, want)
	// The audit record says no evidence was gathered, in the command's words.
	var summary string
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT evidence_summary FROM opsdesk.audit WHERE key = 'run-42' ORDER BY seq DESC LIMIT 1`).
		Scan(&summary))
	require.Equal(t, reconcile.NoLookupEvidence("create-ticket").Summary, summary, "the evidence summary")
	// Back on the detail, the record explains who released it and why.
	h.keys("<enter>")
	v = flat(h.view())
	require.Contains(t, v, "○ released", "the detail does not say released:\n%s", h.view())
	require.Contains(t, v, "○ confirmed not executed: released by role "+person.Role+
		" (claims to be \"Test Operator\") · audit acme#1 · reason: no ticket in the queue", "the detail does not explain the release:\n%s", h.view())
	require.NotContains(t, v, "r reconcile", "a released record still offers reconcile:\n%s", h.view())

	// run-43 completes behind the operator's back, between reading and
	// confirming: refused as changed, and audited.
	h.keys(":key acme/create-ticket/run-43<enter>r3<enter>the queue is closed<enter>")
	_, err = d.Admin.Exec(ctx, `
UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{"id": 9}', result_ref = 'T-9',
    completed_at = now(), expires_at = now() + interval '1 day', updated_at = now(), version = version + 1
WHERE key = 'run-43'`)
	require.NoError(t, err)
	h.keys("y")
	v = h.view()
	for _, want := range []string{"✗ Refused: changed since you looked", "record acme#2: the refusal is audited",
		"state        ⚠ stuck → ✓ completed", "result ref   - → T-9"} {
		require.Contains(t, v, want, "the refusal lacks %q:\n%s", want, v)
	}
	a = lastAudit(t, d, "run-43")
	require.Equal(t, person.Role, a.role, "the refusal's audit record: %+v", a)
	require.Equal(t, "decide:failed", a.action, "the refusal's audit record: %+v", a)
	require.Equal(t, "failed", a.outcome, "the refusal's audit record: %+v", a)
	require.Equal(t, "completed", a.stateAfter, "the refusal's audit record: %+v", a)
	h.keys("<enter>")
	require.Equal(t, readmodel.StateCompleted, h.m.detail().d.State, "back on the detail, the record is not the completed one:\n%s", h.view())
	require.NotContains(t, h.view(), "r reconcile", "back on the detail, the record is not the completed one:\n%s", h.view())
}
