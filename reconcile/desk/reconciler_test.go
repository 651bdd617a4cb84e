package desk_test

// Issue 23 §1: a reconciler's login decides what the allowlist lets a
// lookup settle, and nothing else. Each test connects as the role under
// attack; the superuser only sets up fixtures and inspects.

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/retention"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// machine is a bundle with an admin of every tenant and a reconciler's
// login, charge-card allowed on both definite lookup answers.
type machine struct {
	*bundle
	admin, rec *dbtest.Person
}

func setupMachine(t *testing.T, tenants ...string) *machine {
	t.Helper()
	b := setup(t)
	if len(tenants) == 0 {
		tenants = []string{"*"}
	}
	m := &machine{bundle: b, admin: dbtest.NewPerson(t, b.db, "admin", "*"), rec: dbtest.NewPerson(t, b.db, "reconciler", tenants...)}
	_, err := desk.SetAutoReconcile(b.ctx, m.admin.Pool, toolCharge, []string{"found", "not_found"}, "the payments team agreed", "")
	require.NoError(t, err)
	return m
}

// found and notFound are what a decide by lookup sends.
func found(id, v int64) reconcile.DecideParams {
	return reconcile.DecideParams{OperationID: id, Decision: reconcile.Completed, ExpectVersion: v, ResultRef: "CH-1",
		Reason:   "auto_reconcile charge-card: lookup found CH-1",
		Evidence: reconcile.Evidence{Lookup: reconcile.LookupFound, Ref: "CH-1", Digest: "sha256:abc", Summary: "found, reference CH-1"}}
}

func notFound(id, v int64) reconcile.DecideParams {
	return reconcile.DecideParams{OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v,
		Reason:   "auto_reconcile charge-card: lookup not found",
		Evidence: reconcile.Evidence{Lookup: reconcile.LookupNotFound, Digest: "sha256:def", Summary: "not found"}}
}

func TestReconcilerDecidesWhatTheAllowlistLets(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	id, v := m.stuck(t, "acme", "ord-1")
	res, err := desk.Decide(m.ctx, m.rec.Pool, found(id, v))
	require.NoError(t, err)
	require.Equal(t, reconcile.Succeeded, res.Outcome)
	state, _ := m.state(t, id)
	require.Equal(t, "completed", state)
	var role, marked string
	require.NoError(t, m.db.Admin.QueryRow(m.ctx, `SELECT role, details->>'reconciler' FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
		res.Tenant, res.Seq).Scan(&role, &marked))
	require.Equal(t, m.rec.Role, role, "the decision is the reconciler login's own")
	require.Equal(t, "true", marked, "a machine's decision is marked")

	id2, v2 := m.stuck(t, "acme", "ord-2")
	_, err = desk.Decide(m.ctx, m.rec.Pool, notFound(id2, v2))
	require.NoError(t, err)
	state, _ = m.state(t, id2)
	require.Equal(t, "released", state)
}

func TestReconcilerRefusals(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	id, v := m.stuck(t, "acme", "ord-1")
	cases := []struct {
		name string
		p    reconcile.DecideParams
		want error
	}{
		{"Force", func() reconcile.DecideParams { p := found(id, v); p.Force = true; return p }(), reconcile.ErrNotPermitted},
		{"Override", func() reconcile.DecideParams { p := notFound(id, v); p.Override = true; return p }(), reconcile.ErrNotPermitted},
		{"Defer", reconcile.DecideParams{OperationID: id, Decision: reconcile.Defer, ExpectVersion: v, Reason: "later",
			SnoozeUntil: time.Now().Add(time.Hour), Evidence: notFound(id, v).Evidence}, reconcile.ErrNotPermitted},
		{"Failed", func() reconcile.DecideParams { p := found(id, v); p.Decision = reconcile.Failed; return p }(), reconcile.ErrNotPermitted},
		{"NoLookup", func() reconcile.DecideParams { p := notFound(id, v); p.Evidence = reconcile.Evidence{}; return p }(), reconcile.ErrNotPermitted},
		{"ContradictedLookup", func() reconcile.DecideParams { p := notFound(id, v); p.Evidence = found(id, v).Evidence; return p }(), reconcile.ErrNotPermitted},
		{"NoDigest", func() reconcile.DecideParams { p := found(id, v); p.Evidence.Digest = " \t"; return p }(), reconcile.ErrNotPermitted},
		{"FoundWithoutReference", func() reconcile.DecideParams { p := found(id, v); p.Evidence.Ref = ""; return p }(), reconcile.ErrNotPermitted},
		{"OtherReference", func() reconcile.DecideParams { p := found(id, v); p.ResultRef = "CH-OTHER"; return p }(), reconcile.ErrContradictsLookup},
		{"StoredResult", func() reconcile.DecideParams { p := found(id, v); p.Result = []byte(`{"charge_id":"CH-1"}`); return p }(), reconcile.ErrNotPermitted},
		{"BlankReason", func() reconcile.DecideParams { p := found(id, v); p.Reason = " \u3000\t"; return p }(), reconcile.ErrInvalid},
		{"OldVersion", found(id, v+1), reconcile.ErrChanged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := desk.Decide(m.ctx, m.rec.Pool, c.p)
			require.ErrorIs(t, err, c.want)
		})
	}
	t.Run("NULInReason", func(t *testing.T) {
		p := found(id, v)
		p.Reason = "found\x00"
		_, err := desk.Decide(m.ctx, m.rec.Pool, p)
		require.Error(t, err, "PostgreSQL text takes no NUL: an error, never a decision")
	})
	state, got := m.state(t, id)
	require.Equal(t, "stuck", state, "no refused attempt changed the record")
	require.Equal(t, v, got)
	var refused int
	require.NoError(t, m.db.Admin.QueryRow(m.ctx, `SELECT count(*) FROM opsdesk.audit_queue q WHERE role = $1 AND outcome <> 'succeeded'`,
		m.rec.Role).Scan(&refused))
	var sealed int
	require.NoError(t, m.db.Admin.QueryRow(m.ctx, `SELECT count(*) FROM opsdesk.audit WHERE role = $1 AND outcome <> 'succeeded'`,
		m.rec.Role).Scan(&sealed))
	require.Equal(t, len(cases), refused+sealed, "every refusal is audited")
}

func TestReconcilerAllowlistPerToolAndVerdict(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	id, v := m.stuck(t, "acme", "ord-1")
	_, err := desk.SetAutoReconcile(m.ctx, m.admin.Pool, toolCharge, []string{"found"}, "only found for now", "")
	require.NoError(t, err)
	_, err = desk.Decide(m.ctx, m.rec.Pool, notFound(id, v))
	require.ErrorIs(t, err, reconcile.ErrNotPermitted, "not_found is no longer allowed")

	_, err = desk.SetAutoReconcile(m.ctx, m.admin.Pool, toolCharge, nil, "the owners withdrew", "")
	require.NoError(t, err)
	_, err = desk.Decide(m.ctx, m.rec.Pool, found(id, v))
	require.ErrorIs(t, err, reconcile.ErrNotPermitted, "a tool off the allowlist")

	for _, bad := range [][]string{{"failed"}, {"found", "found", "not_found"}, {"defer"}, {""}} {
		_, err = desk.SetAutoReconcile(m.ctx, m.admin.Pool, toolCharge, bad, "typo", "")
		require.ErrorIs(t, err, reconcile.ErrInvalid, "%q", bad)
	}
	_, err = desk.SetAutoReconcile(m.ctx, m.admin.Pool, "tool\x01", []string{"found"}, "control", "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	_, err = desk.SetAutoReconcile(m.ctx, m.admin.Pool, toolCharge, []string{"found"}, "  ", "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	s, err := desk.ReadReconcilerState(m.ctx, m.rec.Pool)
	require.NoError(t, err)
	require.Empty(t, s.Allow, "refused writes changed nothing")
}

func TestReconcilerLeavesRecordsToPeople(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)

	t.Run("Held", func(t *testing.T) {
		id, v := m.stuck(t, "acme", "held-1")
		_, err := retention.SetHold(m.ctx, m.admin.Pool, []int64{id}, true, "litigation", "", nil)
		require.NoError(t, err)
		_, v = m.state(t, id)
		_, err = desk.Decide(m.ctx, m.rec.Pool, found(id, v))
		require.ErrorIs(t, err, reconcile.ErrForPeople)
	})
	t.Run("UnreviewedConflicts", func(t *testing.T) {
		id, v := m.stuck(t, "acme", "conflicted-1")
		_, _, err := m.retry(t, "acme", "conflicted-1", 500) // another intent
		require.Error(t, err)
		_, v = m.state(t, id)
		_, err = desk.Decide(m.ctx, m.rec.Pool, notFound(id, v))
		require.ErrorIs(t, err, reconcile.ErrForPeople)
	})
	t.Run("DeferredByAPerson", func(t *testing.T) {
		id, v := m.stuck(t, "acme", "deferred-1")
		_, err := desk.Decide(m.ctx, m.operator.Pool, reconcile.DecideParams{OperationID: id, Decision: reconcile.Defer,
			ExpectVersion: v, Reason: "asking the provider", SnoozeUntil: time.Now().Add(time.Hour), SealLater: true})
		require.NoError(t, err)
		_, err = desk.Decide(m.ctx, m.rec.Pool, notFound(id, v))
		require.ErrorIs(t, err, reconcile.ErrForPeople, "a deferral still queued, unsealed, counts")
	})
	t.Run("LiveLease", func(t *testing.T) {
		id, v := m.stuck(t, "acme", "live-1")
		_, err := m.db.Admin.Exec(m.ctx, `UPDATE opsdesk.operations SET lease_expires_at = now() + interval '1 hour' WHERE id = $1`, id)
		require.NoError(t, err)
		_, err = desk.Decide(m.ctx, m.rec.Pool, found(id, v))
		require.ErrorIs(t, err, reconcile.ErrLeaseLive)
	})
}

func TestReconcilerPause(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	id, v := m.stuck(t, "acme", "ord-1")
	_, err := desk.SetReconcilerPause(m.ctx, m.admin.Pool, true, "provider incident INC-7", "")
	require.NoError(t, err)
	_, err = desk.Decide(m.ctx, m.rec.Pool, found(id, v))
	require.ErrorIs(t, err, reconcile.ErrPaused)
	s, err := desk.ReadReconcilerState(m.ctx, m.rec.Pool)
	require.NoError(t, err)
	require.True(t, s.Paused)
	require.Equal(t, "provider incident INC-7", s.Reason)
	require.Equal(t, m.admin.Role, s.By)

	// A person still decides while machines are paused.
	_, err = desk.Decide(m.ctx, m.operator.Pool, found(id, v))
	require.NoError(t, err)

	id2, v2 := m.stuck(t, "acme", "ord-2")
	_, err = desk.SetReconcilerPause(m.ctx, m.admin.Pool, false, "INC-7 closed", "")
	require.NoError(t, err)
	_, err = desk.Decide(m.ctx, m.rec.Pool, notFound(id2, v2))
	require.NoError(t, err)
}

// Nobody but an admin writes the allowlist or the pause, through the
// functions or around them.
func TestOnlyAdminsSetTheReconciler(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	viewer := dbtest.NewPerson(t, m.db, "viewer", "*")
	tenantAdmin := dbtest.NewPerson(t, m.db, "admin", "acme")
	service := dbtest.NewService(t, m.db)
	for name, p := range map[string]*dbtest.Person{"Viewer": viewer, "Operator": m.operator, "Reconciler": m.rec} {
		t.Run(name, func(t *testing.T) {
			_, err := desk.SetAutoReconcile(m.ctx, p.Pool, "send-mail", []string{"found", "not_found"}, "let me", "")
			require.ErrorIs(t, err, reconcile.ErrNotPermitted)
			_, err = desk.SetReconcilerPause(m.ctx, p.Pool, false, "let me", "")
			require.ErrorIs(t, err, reconcile.ErrNotPermitted)
			_, err = desk.SetReconcilerPause(m.ctx, p.Pool, true, "let me", "")
			require.ErrorIs(t, err, reconcile.ErrNotPermitted)
		})
	}
	// One tenant's admin neither stops nor starts every tenant's
	// reconcilers (holding the pause row's lock open, it could otherwise
	// keep every other admin from either), nor widens what they decide.
	_, err := desk.SetAutoReconcile(m.ctx, tenantAdmin.Pool, "send-mail", []string{"found"}, "let me", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	_, err = desk.SetReconcilerPause(m.ctx, tenantAdmin.Pool, true, "acme sees wrong releases", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	_, err = desk.SetReconcilerPause(m.ctx, tenantAdmin.Pool, false, "fine again", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	// An admin of no tenant neither.
	_, err = desk.SetReconcilerPause(m.ctx, dbtest.NewPerson(t, m.db, "admin").Pool, true, "no tenant", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)

	for _, p := range []*dbtest.Person{viewer, m.operator, m.rec, tenantAdmin} {
		for _, sql := range []string{
			`SELECT opsdesk.set_auto_reconcile('send-mail', ARRAY['found'], 'direct')`,
			`INSERT INTO opsdesk.auto_reconcile VALUES ('send-mail', ARRAY['found'], 'direct', 'me', now())`,
			`UPDATE opsdesk.auto_reconcile SET verdicts = ARRAY['found', 'not_found']`,
			`DELETE FROM opsdesk.auto_reconcile`,
			`UPDATE opsdesk.reconciler_pause SET paused = false`,
		} {
			_, err := p.Pool.Exec(m.ctx, sql)
			if sql[0] == 'S' {
				require.NoError(t, err, "the call is answered (refused inside): %s", sql)
				continue
			}
			requireCode(t, err, "42501", sql)
		}
	}
	for _, sql := range []string{
		`SELECT opsdesk.set_auto_reconcile('send-mail', ARRAY['found'], 'direct')`,
		`SELECT opsdesk.set_reconciler_pause(false, 'direct')`,
		`SELECT * FROM opsdesk.auto_reconcile`,
		`INSERT INTO opsdesk.auto_reconcile VALUES ('send-mail', ARRAY['found'], 'direct', 'me', now())`,
		`UPDATE opsdesk.reconciler_pause SET paused = false`,
	} {
		for _, pool := range []*dbtest.Person{service, {Pool: m.db.Service}} {
			_, err := pool.Pool.Exec(m.ctx, sql)
			requireCode(t, err, "42501", "a service: "+sql)
		}
	}
	s, err := desk.ReadReconcilerState(m.ctx, m.admin.Pool)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{toolCharge: {"found", "not_found"}}, s.Allow)
	require.False(t, s.Paused, "nobody here could pause it")
}

// A one-tenant reconciler sees and decides its tenant only.
func TestTenantScopedReconciler(t *testing.T) {
	t.Parallel()
	m := setupMachine(t, "acme")
	acme, va := m.stuck(t, "acme", "ord-1")
	globex, vg := m.stuck(t, "globex", "ord-1")
	_, err := desk.Decide(m.ctx, m.rec.Pool, found(globex, vg))
	require.ErrorIs(t, err, reconcile.ErrNotFound)
	state, _ := m.state(t, globex)
	require.Equal(t, "stuck", state)
	_, err = desk.Decide(m.ctx, m.rec.Pool, found(acme, va))
	require.NoError(t, err)
}

// A reconciler may call none of people's other functions.
func TestReconcilerMayDoNothingElse(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	id, v := m.stuck(t, "acme", "ord-1")
	_, err := desk.AckConflicts(m.ctx, m.rec.Pool, id, []int64{1}, "seen", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	_, _, err = desk.Reveal(m.ctx, m.rec.Pool, id, reconcile.FieldIntent, "curious", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	_, err = retention.SetHold(m.ctx, m.rec.Pool, []int64{id}, true, "hold it", "", nil)
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	_, err = desk.GrantAccess(m.ctx, m.rec.Pool, m.rec.Role, "admin", "*", "promote myself", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	var purge *string
	err = m.rec.Pool.QueryRow(m.ctx, `SELECT code FROM opsdesk.purge_start(NULL, NULL, '{"*": 3600}', 'purge', 100)`).Scan(&purge)
	require.NoError(t, err)
	require.Equal(t, "not_permitted", *purge)
	state, got := m.state(t, id)
	require.Equal(t, "stuck", state)
	require.Equal(t, v, got)
}

// grant_access knows the level, and moves a login to and from it.
func TestGrantReconcilerLevel(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	login := dbtest.NewPerson(t, m.db, "")
	_, err := desk.GrantAccess(m.ctx, m.admin.Pool, login.Role, "reconciler", "*", "automation", "")
	require.NoError(t, err)
	id, v := m.stuck(t, "acme", "ord-1")
	p := found(id, v)
	p.Force = true
	_, err = desk.Decide(m.ctx, login.Pool, p)
	require.ErrorIs(t, err, reconcile.ErrNotPermitted, "granted as a reconciler, it is one")
	_, err = desk.GrantAccess(m.ctx, m.admin.Pool, login.Role, "operator", "*", "a person now", "")
	require.NoError(t, err)
	var member bool
	require.NoError(t, m.db.Admin.QueryRow(m.ctx, `SELECT pg_has_role($1, 'opsdesk_reconciler', 'MEMBER')`, login.Role).Scan(&member))
	require.False(t, member, "another level replaces the reconciler's")
	_, err = desk.GrantAccess(m.ctx, m.admin.Pool, login.Role, "robot", "*", "typo", "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)
}

// A superuser is no reconciler, though PostgreSQL's pg_has_role says it
// is a member of every role: its decision by hand (a stored result, no
// lookup) is made as before, and is not marked a machine's. Neither
// the allowlist nor the pause binds it.
func TestSuperuserIsNoReconciler(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	_, err := desk.SetReconcilerPause(m.ctx, m.admin.Pool, true, "nothing automatic today", "")
	require.NoError(t, err)
	id, v := m.stuck(t, "acme", "ord-1")
	res, err := desk.Decide(m.ctx, m.db.Admin, reconcile.DecideParams{OperationID: id, Decision: reconcile.Completed,
		ExpectVersion: v, ResultRef: "CH-9", Reason: "seen in the provider's dashboard"})
	require.NoError(t, err)
	require.Equal(t, reconcile.Succeeded, res.Outcome)
	var marked *string
	require.NoError(t, m.db.Admin.QueryRow(m.ctx, `SELECT details->>'reconciler' FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
		res.Tenant, res.Seq).Scan(&marked))
	require.Nil(t, marked, "a superuser's decision is no machine's")
}

// A reconciler's short retention is raised to the tool's recorded one (7
// days when none is), not refused: a catalog behind the service's would
// otherwise stop every decision of the tool.
func TestReconcilerRetentionIsRaisedToTheTools(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	id, v := m.stuck(t, "acme", "ord-1")
	p := found(id, v)
	p.Retention = time.Hour
	res, err := desk.Decide(m.ctx, m.rec.Pool, p)
	require.NoError(t, err)
	var kept, recorded bool
	require.NoError(t, m.db.Admin.QueryRow(m.ctx, `
SELECT o.expires_at > now() + interval '6 days 23 hours', (a.details->>'retention')::interval = interval '7 days'
FROM opsdesk.operations o, opsdesk.audit a WHERE o.id = $1 AND a.tenant = $2 AND a.seq = $3`, id, res.Tenant, res.Seq).Scan(&kept, &recorded))
	require.True(t, kept, "kept 7 days, not an hour")
	require.True(t, recorded, "the audit says the retention applied")
}

// Without its pause row (which only the tables' owner can delete), a
// reconciler decides nothing: it cannot tell it may.
func TestNoPauseRowIsPaused(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	id, v := m.stuck(t, "acme", "ord-1")
	_, err := m.db.Admin.Exec(m.ctx, `DELETE FROM opsdesk.reconciler_pause`)
	require.NoError(t, err)
	_, err = desk.Decide(m.ctx, m.rec.Pool, found(id, v))
	require.ErrorIs(t, err, reconcile.ErrPaused)
	state, _ := m.state(t, id)
	require.Equal(t, "stuck", state)
}

// A reconciler's refusal whose details are too long to keep whole (its
// references, say) keeps the mark and the batch that say whose and which
// run it is.
func TestAReconcilersLongRefusalKeepsItsMark(t *testing.T) {
	t.Parallel()
	m := setupMachine(t)
	id, v := m.stuck(t, "acme", "ord-1")
	p := found(id, v)
	long := strings.Repeat("😀", 600)
	p.ResultRef, p.Evidence.Ref = long, long+"x" // contradicts: refused
	run, err := desk.StartBatch(m.ctx, m.rec.Pool, "auto_reconcile pass: stuck records of charge-card", "")
	require.NoError(t, err)
	p.Batch = run
	_, err = desk.Decide(m.ctx, m.rec.Pool, p)
	require.Error(t, err)
	var marked, batch, cut *string
	require.NoError(t, m.db.Admin.QueryRow(m.ctx, `
SELECT details->>'reconciler', details->>'batch', details->>'cut' FROM (
    SELECT details, at FROM opsdesk.audit WHERE role = $1 UNION ALL SELECT details, at FROM opsdesk.audit_queue WHERE role = $1) r
ORDER BY at DESC LIMIT 1`, m.rec.Role).Scan(&marked, &batch, &cut))
	require.NotNil(t, cut, "the details were cut")
	require.NotNil(t, marked)
	require.Equal(t, "true", *marked)
	require.NotNil(t, batch)
	require.Equal(t, p.Batch, *batch)

	// Another login's run, claimed with the same long references: the
	// refusal keeps the id it claimed, and no batch.
	other, err := desk.StartBatch(m.ctx, dbtest.NewPerson(t, m.db, "operator", "acme").Pool, "state:stuck", "")
	require.NoError(t, err)
	p.Batch = other
	_, err = desk.Decide(m.ctx, m.rec.Pool, p)
	require.Error(t, err)
	var claimed *string
	require.NoError(t, m.db.Admin.QueryRow(m.ctx, `
SELECT details->>'batch', details->>'claimed_batch', details->>'cut' FROM (
    SELECT details, at FROM opsdesk.audit WHERE role = $1 UNION ALL SELECT details, at FROM opsdesk.audit_queue WHERE role = $1) r
ORDER BY at DESC LIMIT 1`, m.rec.Role).Scan(&batch, &claimed, &cut))
	require.NotNil(t, cut, "the details were cut")
	require.Nil(t, batch, "a refused claim counts in no run")
	require.NotNil(t, claimed)
	require.Equal(t, other, *claimed)
}
