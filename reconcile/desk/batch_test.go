package desk_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
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
	batch, err := desk.StartBatch(b.ctx, b.operator.Pool, "state:stuck tool:charge-card", "")
	require.NoError(t, err)
	require.True(t, reconcile.IsUUID(batch), batch)

	one, v1 := b.stuck(t, "acme", "batch-1")
	two, v2 := b.stuck(t, "acme", "batch-2")
	three, v3 := b.stuck(t, "acme", "batch-3")
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: one, Decision: reconcile.NotExecuted,
		ExpectVersion: v1, Reason: "nothing at the provider", Batch: batch})
	require.NoError(t, err)
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: two, Decision: reconcile.NotExecuted,
		ExpectVersion: v2 + 1, Reason: "nothing at the provider", Batch: batch})
	require.ErrorIs(t, err, reconcile.ErrChanged)
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: three, Decision: reconcile.NotExecuted,
		ExpectVersion: v3, Reason: "nothing at the provider"})
	require.NoError(t, err)
	// A viewer's refusal under the operator's batch is refused for the
	// batch first: it counts in no run.
	_, err = desk.Decide(b.ctx, viewer.Pool, reconcile.DecideParams{OperationID: two, Decision: reconcile.NotExecuted,
		ExpectVersion: v2, Reason: "mine", Batch: batch})
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)

	before := len(b.audits(t))
	for _, bad := range []string{"x", "00000000-0000-0000-0000-00000000000g", " " + batch, batch + "\x00", "{" + batch + "}"} {
		_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: two, Decision: reconcile.NotExecuted,
			ExpectVersion: v2, Reason: "x", Batch: bad})
		require.ErrorIs(t, err, reconcile.ErrInvalid, "%q", bad)
	}
	require.Len(t, b.audits(t), before, "a bad batch id is refused before the database")

	rows, err := b.db.Admin.Query(b.ctx, `SELECT coalesce(operation_id, 0), outcome, coalesce(details->>'batch', ''),
    coalesce(details->>'claimed_batch', '') FROM opsdesk.audit ORDER BY tenant, seq`)
	require.NoError(t, err)
	type rec struct {
		id                      int64
		outcome, batch, claimed string
	}
	var got []rec
	for rows.Next() {
		var r rec
		require.NoError(t, rows.Scan(&r.id, &r.outcome, &r.batch, &r.claimed))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, []rec{{one, "succeeded", batch, ""}, {two, "failed", batch, ""}, {three, "succeeded", "", ""},
		{two, "denied", "", batch}}, got)
}

// Who may start a run, and whose run a decision may join: a run's id is
// the database's, its starter the session's login, and decide refuses
// (audited, on the ” chain, with the id as claimed_batch, never as
// batch) a run another login started, an id no run has and a run from
// before runs were recorded. Each role connects as itself.
func TestBatchesAreTheirStartersOwn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	opAcme := dbtest.NewPerson(t, b.db, "operator", "acme")
	reconciler := dbtest.NewPerson(t, b.db, "reconciler", "*")
	viewer := dbtest.NewPerson(t, b.db, "viewer", "*")
	viewerAcme := dbtest.NewPerson(t, b.db, "viewer", "acme")
	service := dbtest.NewService(t, b.db)
	nobody := dbtest.NewPerson(t, b.db, "")

	const filter = "state:stuck tool:charge-card tenant:acme"
	starts := map[string]string{}
	for _, c := range []struct {
		name string
		p    *dbtest.Person
		may  bool
	}{
		{"OperatorOfOneTenant", opAcme, true}, {"OperatorOfEveryTenant", b.operator, true}, {"Reconciler", reconciler, true},
		{"Viewer", viewer, false}, {"ViewerOfOneTenant", viewerAcme, false}, {"Service", service, false}, {"NoOpsdeskRole", nobody, false},
	} {
		t.Run("Start"+c.name, func(t *testing.T) {
			id, err := desk.StartBatch(b.ctx, c.p.Pool, filter, "Pat")
			if !c.may {
				require.ErrorIs(t, err, reconcile.ErrNotPermitted)
				require.Empty(t, id)
				return
			}
			require.NoError(t, err)
			starts[c.name] = id
			var role, got, name string
			require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT role, filter, display_name FROM opsdesk.batches WHERE id = $1`, id).
				Scan(&role, &got, &name))
			require.Equal(t, []string{c.p.Role, filter, "Pat"}, []string{role, got, name}, "the run is the session's login's")
		})
	}
	var n int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.batches`).Scan(&n))
	require.Equal(t, 3, n, "a refused start leaves nothing")

	// Nobody but the migrator writes the table itself.
	for _, p := range []*dbtest.Person{opAcme, reconciler, viewer} {
		_, err := p.Pool.Exec(b.ctx, `INSERT INTO opsdesk.batches (role, filter) VALUES (session_user, 'mine')`)
		require.ErrorContains(t, err, "permission denied", p.Role)
		_, err = p.Pool.Exec(b.ctx, `UPDATE opsdesk.batches SET role = session_user`)
		require.ErrorContains(t, err, "permission denied", p.Role)
		_, err = p.Pool.Exec(b.ctx, `DELETE FROM opsdesk.batches`)
		require.ErrorContains(t, err, "permission denied", p.Role)
	}

	// A legacy run: one from before migration 00029 (no filter).
	legacy := "0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b"
	_, err := b.db.Admin.Exec(b.ctx, `INSERT INTO opsdesk.batches (id, role, filter, started_at) VALUES ($1, $2, NULL, now() - interval '1 day')`,
		legacy, b.operator.Role)
	require.NoError(t, err)

	mine, theirs := starts["OperatorOfOneTenant"], starts["OperatorOfEveryTenant"]
	for _, c := range []struct {
		name    string
		p       *dbtest.Person
		batch   string
		want    error
		message string
	}{
		{"OperatorJoinsAnothersRun", b.operator, mine, reconcile.ErrNotPermitted, "is another login's run"},
		{"OperatorOfOneTenantJoinsAnothersRun", opAcme, theirs, reconcile.ErrNotPermitted, "is another login's run"},
		{"ReconcilerJoinsAPersonsRun", reconciler, theirs, reconcile.ErrNotPermitted, "is another login's run"},
		{"ViewerJoinsARun", viewer, theirs, reconcile.ErrNotPermitted, "is another login's run"},
		{"RunNobodyStarted", b.operator, "11111111-2222-4333-8444-555555555555", reconcile.ErrInvalid, "no run has batch id"},
		{"RunFromBeforeRunsWereRecorded", b.operator, legacy, reconcile.ErrInvalid, "recorded before runs were started"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, v := b.stuck(t, "acme", "join-"+c.name)
			_, err := desk.Decide(b.ctx, c.p.Pool, reconcile.DecideParams{OperationID: id, Decision: reconcile.NotExecuted,
				ExpectVersion: v, Reason: "join", Batch: c.batch})
			require.ErrorIs(t, err, c.want)
			require.ErrorContains(t, err, c.message)
			state, after := b.state(t, id)
			require.Equal(t, "stuck", state, "nothing decided")
			require.Equal(t, v, after)
			var batch, claimed *string
			var outcome string
			require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT outcome, details->>'batch', details->>'claimed_batch' FROM (
    SELECT outcome, details, at FROM opsdesk.audit WHERE role = $1 AND action = 'decide:not-executed'
    UNION ALL SELECT outcome, details, at FROM opsdesk.audit_queue WHERE role = $1 AND action = 'decide:not-executed') x
WHERE details->>'claimed_batch' = $2`, c.p.Role, c.batch).Scan(&outcome, &batch, &claimed))
			require.Nil(t, batch, "the refusal counts in no run")
			require.Equal(t, c.batch, *claimed)
			require.NotEqual(t, "succeeded", outcome)
		})
	}

	t.Run("OwnRun", func(t *testing.T) {
		id, v := b.stuck(t, "acme", "own")
		_, err := desk.Decide(b.ctx, opAcme.Pool, reconcile.DecideParams{OperationID: id, Decision: reconcile.NotExecuted,
			ExpectVersion: v, Reason: "not at the provider", Batch: mine})
		require.NoError(t, err)
		state, _ := b.state(t, id)
		require.Equal(t, "released", state)
	})
}

// start_batch refuses, with a clear message and nothing written, a filter
// that is missing, blank, too long or holds control characters, and a
// display name too long: called as an operator straight through SQL, and
// through StartBatch, which refuses what it cannot send (NUL) itself.
func TestStartBatchRefusesHostileInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	huge := strings.Repeat("tool:charge-card ", 2<<20) // 34 MiB
	for _, c := range []struct {
		name, filter, displayName string
		null                      bool
		message                   string
	}{
		{name: "Null", null: true, message: "NULL is empty"},
		{name: "Empty", filter: "", message: "the filter is empty"},
		{name: "Blank", filter: " \t\u00a0\u3000 ", message: "the filter is empty"},
		{name: "Escape", filter: "state:stuck \x1b[31mtool:x", message: "control characters"},
		{name: "Newline", filter: "state:stuck\ntool:x", message: "control characters"},
		{name: "Huge", filter: huge, message: "limited to 1000 bytes, not 35651584"},
		{name: "JustTooLong", filter: strings.Repeat("é", 501), message: "limited to 1000 bytes, not 1002"},
		{name: "LongDisplayName", filter: "state:stuck tool:x", displayName: strings.Repeat("n", 201), message: "display name is limited to 200 bytes"},
		{name: "DisplayNameEscape", filter: "state:stuck tool:x", displayName: "a\x07b", message: "control characters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var arg any = c.filter
			if c.null {
				arg = nil
			}
			var name any
			if c.displayName != "" {
				name = c.displayName
			}
			var id *string
			err := b.operator.Pool.QueryRow(b.ctx, `SELECT opsdesk.start_batch($1, $2)`, arg, name).Scan(&id)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, "22023", pgErr.Code, pgErr.Message)
			require.Contains(t, pgErr.Message, c.message)
			if !c.null {
				_, err = desk.StartBatch(b.ctx, b.operator.Pool, c.filter, c.displayName)
				require.ErrorIs(t, err, reconcile.ErrInvalid)
			}
		})
	}
	t.Run("NUL", func(t *testing.T) {
		_, err := desk.StartBatch(b.ctx, b.operator.Pool, "state:stuck\x00tool:x", "")
		require.ErrorIs(t, err, reconcile.ErrInvalid)
		require.ErrorContains(t, err, "control characters")
		var id *string
		err = b.operator.Pool.QueryRow(b.ctx, `SELECT opsdesk.start_batch($1)`, "state:stuck\x00tool:x").Scan(&id)
		require.Error(t, err, "PostgreSQL's text holds no NUL")
	})
	var n int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.batches`).Scan(&n))
	require.Zero(t, n, "nothing refused was recorded")

	// The longest filter is taken whole, trimmed of blanks around it.
	id, err := desk.StartBatch(b.ctx, b.operator.Pool, "  "+strings.Repeat("f", 998), "")
	require.NoError(t, err)
	var got string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT filter FROM opsdesk.batches WHERE id = $1`, id).Scan(&got))
	require.Equal(t, strings.Repeat("f", 998), got)
}
