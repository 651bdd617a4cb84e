package ops_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

// The database enforces the state machine for every writer (issue 10): a
// login granted opsdesk_service, writing plain SQL, may take the library's
// steps and no others. Each attack below is one the issue reproduced with
// success; each is now refused and leaves the record as it was.

// rowText is the whole record as the superuser reads it (inspection only).
func (b *bundle) rowText(t *testing.T, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT o::text FROM opsdesk.operations o WHERE id = $1`, id).Scan(&s))
	return s
}

// requireRefused runs each statement (with $1 the record's id) on pool
// and requires the state machine to refuse it, naming a rule containing
// rule, with the record unchanged.
func (b *bundle) requireRefused(t *testing.T, pool *pgxpool.Pool, id int64, rule string, stmts ...string) {
	t.Helper()
	before := b.rowText(t, id)
	for _, stmt := range stmts {
		_, err := pool.Exec(b.ctx, stmt, id)
		requireStateMachine(t, err, rule, stmt)
		require.Equal(t, before, b.rowText(t, id), "the record changed: %s", stmt)
	}
}

func requireStateMachine(t *testing.T, err error, rule, stmt string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "not refused: %s", stmt)
	require.Equal(t, "23514", pgErr.Code, "%s: %s", stmt, pgErr.Message)
	require.Equal(t, "operations_state_machine", pgErr.ConstraintName, stmt)
	require.Contains(t, pgErr.Message, rule, stmt)
}

// idOf is the id of a record the test made.
func (b *bundle) idOf(t *testing.T, tool, key string) int64 {
	t.Helper()
	rec := b.lookup(t, tool, "acme", key)
	require.NotZero(t, rec.ID, "no record %s/%s", tool, key)
	return rec.ID
}

// longLeaseStore runs send-email with a lease no renewal touches while a
// test compares the record before and after an attack.
func longLeaseStore(t *testing.T, b *bundle) *ops.Store {
	t.Helper()
	return newStore(t, b.db.Service, ops.Config{Owner: "worker-1", Tools: map[string]ops.Policy{
		toolEmail: {Effect: ops.EffectIdempotentProvider, Lease: time.Hour}}})
}

// startCall starts an email call whose provider answers once finish is
// called; finish returns the call's result. A test that fails before
// lets the call end as it ends.
func (b *bundle) startCall(t *testing.T, store *ops.Store, key string) (finish func() externalResult) {
	t.Helper()
	started, answer := make(chan struct{}), make(chan struct{})
	done := make(chan externalResult, 1)
	go func() {
		out, err := ops.DoExternal(b.ctx, store, emailReq(key), func(context.Context, ops.Attempt) (receipt, error) {
			close(started)
			<-answer
			return receipt{ID: "ref-" + key}, nil
		})
		done <- externalResult{out, err}
	}()
	release := sync.OnceFunc(func() { close(answer) })
	t.Cleanup(release)
	receive(t, started, "the call to start")
	return func() externalResult {
		release()
		return receive(t, done, "the call to end")
	}
}

const completeAgainSQL = `UPDATE opsdesk.operations
SET state = 'completed', outcome = 'succeeded', result = '{"id": "forged"}', result_ref = 'forged',
    completed_at = now(), expires_at = now() + interval '7 days', updated_at = now(), version = version + 1
WHERE id = $1`

func TestCompletedRecordIsFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	printer := ticketIntent{Title: "Printer on fire", Priority: 2}
	first, err := b.doTicket(t, "acme", "k1", printer)
	require.NoError(t, err)
	id := first.OperationID

	final := "a completed record is final"
	// The same login that completed it, which holds every privilege the
	// library uses.
	b.requireRefused(t, b.db.Service, id, final,
		`UPDATE opsdesk.operations SET result_ref = 'T-forged', expires_at = now() + interval '100 years' WHERE id = $1`,
		`UPDATE opsdesk.operations SET result_ref = 'T-forged', updated_at = now(), version = version + 1 WHERE id = $1`,
		`UPDATE opsdesk.operations SET result = '{"ticket_id": 666}' WHERE id = $1`,
		`UPDATE opsdesk.operations SET expires_at = NULL WHERE id = $1`,
		`UPDATE opsdesk.operations SET outcome = 'rejected', version = version + 1, updated_at = now() WHERE id = $1`,
		`UPDATE opsdesk.operations SET state = 'released', outcome = NULL, version = version + 1, updated_at = now() WHERE id = $1`,
		completeAgainSQL,
		// Pushed back to pending with another owner, as the same attempt...
		`UPDATE opsdesk.operations SET state = 'pending', outcome = NULL, result = NULL, result_ref = NULL,
    completed_at = NULL, expires_at = NULL, owner = 'thief', leased_at = now(),
    lease_expires_at = now() + interval '1 hour', updated_at = now(), version = version + 1
WHERE id = $1`,
		// ... through an upsert...
		`INSERT INTO opsdesk.operations AS o (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt,
    leased_at, lease_expires_at)
SELECT tenant, tool, key, tool_version, fingerprint, effect, 'pending', 'thief', 1, now(), now() + interval '1 hour'
FROM opsdesk.operations WHERE id = $1
ON CONFLICT (tenant, tool, key) DO UPDATE SET state = 'pending', outcome = NULL, result = NULL, result_ref = NULL,
    completed_at = NULL, expires_at = NULL, owner = 'thief', updated_at = now(), version = o.version + 1`,
	)
	// ... or as a takeover's next attempt.
	b.requireRefused(t, b.db.Service, id, "only a released record",
		`UPDATE opsdesk.operations SET state = 'pending', outcome = NULL, result = NULL, result_ref = NULL,
    completed_at = NULL, expires_at = NULL, owner = 'thief', attempt = attempt + 1, leased_at = now(),
    lease_expires_at = now() + interval '1 hour', updated_at = now(), version = version + 1
WHERE id = $1`)

	// The retry still replays what happened.
	again, err := b.doTicket(t, "acme", "k1", printer)
	require.NoError(t, err)
	require.Equal(t, ops.Replayed, again.Disposition)
	require.Equal(t, first.Result, again.Result)
	require.Equal(t, 1, b.tickets(t))
}

func TestVersionAndConflictCountOnlyGoUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.doTicket(t, "acme", "k1", ticketIntent{Title: "Printer on fire", Priority: 2})
	require.NoError(t, err)
	_, err = b.doTicket(t, "acme", "k1", ticketIntent{Title: "Printer on fire", Priority: 5})
	require.ErrorIs(t, err, ops.ErrIntentConflict)
	id := b.idOf(t, toolTicket, "k1")

	b.requireRefused(t, b.db.Service, id, "final",
		`UPDATE opsdesk.operations SET version = version - 1 WHERE id = $1`,
		`UPDATE opsdesk.operations SET version = version + 1 WHERE id = $1`,
	)
	b.requireRefused(t, b.db.Service, id, "a conflict is counted one at a time, now",
		`UPDATE opsdesk.operations SET version = 1, conflict_count = 0 WHERE id = $1`,
		`UPDATE opsdesk.operations SET conflict_count = 0 WHERE id = $1`,
		`UPDATE opsdesk.operations SET last_conflict_at = NULL WHERE id = $1`,
		`UPDATE opsdesk.operations SET conflict_count = conflict_count + 2, last_conflict_at = now() WHERE id = $1`,
		`UPDATE opsdesk.operations SET conflict_count = conflict_count + 1, last_conflict_at = now() - interval '1 day' WHERE id = $1`,
	)

	// The library still counts the next conflict, on a completed record.
	_, err = b.doTicket(t, "acme", "k1", ticketIntent{Title: "Printer on fire", Priority: 4})
	require.ErrorIs(t, err, ops.ErrIntentConflict)
	require.Equal(t, 2, b.count(t, `SELECT conflict_count FROM opsdesk.operations WHERE id = $1`, id))
	require.Equal(t, 1, b.count(t, `SELECT version FROM opsdesk.operations WHERE id = $1`, id),
		"conflicts leave the version alone (DoTx inserted the record completed, version 1)")
}

// A stuck record of a tool with an unknown outcome waits for a person: no
// other service login completes or takes it over, and its own login
// neither takes it over nor completes it under another name or time.
func TestStuckRecordIsNotCompletedWithoutItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := ops.DoExternal(b.ctx, b.store, chargeReq("k1"), newProvider().failWith(errors.New("timeout")))
	require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
	b.waitStuck(t, toolCharge, "acme", "k1")
	id := b.idOf(t, toolCharge, "k1")
	other := dbtest.NewService(t, b.db)

	b.requireRefused(t, other.Pool, id, "the lease is held by login",
		completeAgainSQL,
		`UPDATE opsdesk.operations SET state = 'released', updated_at = now(), version = version + 1 WHERE id = $1`,
	)
	for _, pool := range []*pgxpool.Pool{other.Pool, b.db.Service} {
		b.requireRefused(t, pool, id, "a pending external_unknown record is not",
			`UPDATE opsdesk.operations SET owner = 'thief', attempt = attempt + 1, leased_at = now(),
    lease_expires_at = now() + interval '1 hour', updated_at = now(), version = version + 1 WHERE id = $1`,
			`UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{}', result_ref = 'forged',
    owner = 'thief', attempt = attempt + 1, completed_at = now(), updated_at = now(), version = version + 1 WHERE id = $1`,
		)
	}
	b.requireRefused(t, b.db.Service, id, "a lease is renewed while it is live",
		`UPDATE opsdesk.operations SET lease_expires_at = now() + interval '1 hour' WHERE id = $1`)
	b.requireRefused(t, b.db.Service, id, "changes what its step may not",
		`UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{}', result_ref = 'forged',
    owner = 'thief', completed_at = now(), updated_at = now(), version = version + 1 WHERE id = $1`,
		`UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{}', result_ref = 'forged',
    completed_at = now(), updated_at = now(), version = version + 1, effect = 'external_idempotent' WHERE id = $1`,
		`UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{}', result_ref = 'forged',
    completed_at = now(), updated_at = now(), version = version + 1, leased_at = leased_at - interval '1 day' WHERE id = $1`,
	)
	b.requireRefused(t, b.db.Service, id, "a record is completed now",
		`UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{}', result_ref = 'forged',
    completed_at = now() - interval '1 day', updated_at = now(), version = version + 1 WHERE id = $1`,
		`UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{}', result_ref = 'forged',
    completed_at = now(), expires_at = now() - interval '1 day', updated_at = now(), version = version + 1 WHERE id = $1`,
	)
	b.requireRefused(t, b.db.Service, id, "raises its version by one",
		`UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{}', result_ref = 'forged',
    completed_at = now(), updated_at = now() WHERE id = $1`)

	_, err = ops.DoExternal(b.ctx, b.store, chargeReq("k1"), neverCalled[receipt](t))
	require.ErrorIs(t, err, ops.ErrNeedsReconciliation)
}

// A live lease is its login's: another login neither renews, ends,
// releases nor completes it; its own login does not move it into the past.
func TestLeaseBelongsToItsLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := longLeaseStore(t, b)
	finish := b.startCall(t, store, "k1")
	id := b.idOf(t, toolEmail, "k1")
	other := dbtest.NewService(t, b.db)

	b.requireRefused(t, other.Pool, id, "the lease is held by login",
		`UPDATE opsdesk.operations SET lease_expires_at = now() + interval '1 hour' WHERE id = $1`,
		`UPDATE opsdesk.operations SET lease_expires_at = least(lease_expires_at, now()) WHERE id = $1`,
		`UPDATE opsdesk.operations SET state = 'released', updated_at = now(), version = version + 1 WHERE id = $1`,
		completeAgainSQL,
	)
	b.requireRefused(t, other.Pool, id, "only a released record",
		`UPDATE opsdesk.operations SET owner = 'thief', attempt = attempt + 1, leased_at = now(),
    lease_expires_at = now() + interval '1 hour', updated_at = now(), version = version + 1 WHERE id = $1`)
	b.requireRefused(t, b.db.Service, id, "never ends in the past",
		`UPDATE opsdesk.operations SET lease_expires_at = now() - interval '1 hour' WHERE id = $1`)
	b.requireRefused(t, b.db.Service, id, "changes what its step may not",
		`UPDATE opsdesk.operations SET lease_expires_at = now() + interval '1 hour', version = version + 1 WHERE id = $1`,
		`UPDATE opsdesk.operations SET leased_at = now() - interval '1 hour' WHERE id = $1`,
		`UPDATE opsdesk.operations SET owner = 'thief' WHERE id = $1`,
	)

	res := finish()
	require.NoError(t, res.err)
	require.Equal(t, ops.Created, res.out.Disposition)
	require.Equal(t, "ref-k1", b.lookup(t, toolEmail, "acme", "k1").ResultRef)
}

// A record under legal hold is frozen: not rewritten, not backdated, not
// taken over. What its lease holder records about the attempt running now
// is not a rewrite, and conflicts are still counted.
func TestHeldRecordIsFrozen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	hold := func(t *testing.T, id int64) {
		t.Helper()
		_, err := admin.Pool.Exec(b.ctx, `SELECT * FROM opsdesk.set_hold(ARRAY[$1::bigint], true, 'litigation')`, id)
		require.NoError(t, err)
	}

	t.Run("Completed", func(t *testing.T) {
		_, err := b.doTicket(t, "acme", "held-1", ticketIntent{Title: "Printer on fire", Priority: 2})
		require.NoError(t, err)
		id := b.idOf(t, toolTicket, "held-1")
		hold(t, id)
		b.requireRefused(t, b.db.Service, id, "final",
			`UPDATE opsdesk.operations SET result_ref = 'rewritten', completed_at = completed_at - interval '1 year' WHERE id = $1`,
			`UPDATE opsdesk.operations SET completed_at = completed_at - interval '1 year', updated_at = now(),
    version = version + 1 WHERE id = $1`,
			`UPDATE opsdesk.operations SET expires_at = now() - interval '1 day' WHERE id = $1`,
		)
		_, err = b.db.Service.Exec(b.ctx, `UPDATE opsdesk.operations SET held = false WHERE id = $1`, id)
		require.ErrorContains(t, err, "permission denied")
		_, err = b.doTicket(t, "acme", "held-1", ticketIntent{Title: "Printer on fire", Priority: 3})
		require.ErrorIs(t, err, ops.ErrIntentConflict)
		require.Equal(t, 1, b.count(t, `SELECT conflict_count FROM opsdesk.operations WHERE id = $1`, id))
	})

	t.Run("ReleasedIsNotTakenOver", func(t *testing.T) {
		_, err := ops.DoExternal(b.ctx, b.store, emailReq("held-2"), newProvider().failWith(ops.NotApplied(errors.New("declined"))))
		require.ErrorIs(t, err, ops.ErrNotApplied)
		id := b.idOf(t, toolEmail, "held-2")
		hold(t, id)
		before := b.rowText(t, id)
		_, err = ops.DoExternal(b.ctx, b.store, emailReq("held-2"), neverCalled[receipt](t))
		requireStateMachine(t, err, "a record under legal hold is not taken over", "takeover")
		require.Equal(t, before, b.rowText(t, id))
	})

	t.Run("PendingIsCompletedByItsHolder", func(t *testing.T) {
		store := longLeaseStore(t, b)
		finish := b.startCall(t, store, "held-3")
		id := b.idOf(t, toolEmail, "held-3")
		hold(t, id)
		b.requireRefused(t, b.db.Service, id, "a record under legal hold is frozen",
			`UPDATE opsdesk.operations SET owner = 'thief' WHERE id = $1`)
		res := finish()
		require.NoError(t, res.err)
		rec := b.lookup(t, toolEmail, "acme", "held-3")
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, "ref-held-3", rec.ResultRef)
	})
}

// A new record starts pending, at its first attempt, leased from now.
func TestReservationStartsPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Every value as SQL, so that now() is the inserting statement's own.
	const insert = `INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner,
    attempt, leased_at, lease_expires_at)
VALUES ('acme', 'create-ticket', 'forged', '1', decode(repeat('01', 32), 'hex'), 'local', '%s', 'thief', %d, %s, %s)`
	for _, c := range []struct {
		state            string
		attempt          int
		leased, expiring string
	}{
		{"released", 1, "now()", "now() + interval '1 minute'"},
		{"completed", 1, "now()", "now() + interval '1 minute'"},
		{"pending", 7, "now()", "now() + interval '1 minute'"},
		{"pending", 1, "now() - interval '1 day'", "now() + interval '1 minute'"},
		{"pending", 1, "now()", "now() - interval '1 minute'"},
	} {
		stmt := fmt.Sprintf(insert, c.state, c.attempt, c.leased, c.expiring)
		_, err := b.db.Service.Exec(b.ctx, stmt)
		requireStateMachine(t, err, "a new record ", stmt)
	}
	// The library's own reservation passes.
	_, err := b.db.Service.Exec(b.ctx, fmt.Sprintf(insert, "pending", 1, "now()", "now() + interval '1 minute'"))
	require.NoError(t, err)
	_, err = b.db.Service.Exec(b.ctx, `INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect,
    state, owner, leased_at, lease_expires_at, owner_role)
VALUES ('acme', 'create-ticket', 'other', '1', decode(repeat('01', 32), 'hex'), 'local', 'pending', 'w', now(), now(), 'someone')`)
	require.ErrorContains(t, err, "permission denied")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations`))
}

// The library's own steps pass, and the lease goes to the login that
// reserved or took over the record.
func TestLeaseFollowsTheLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var service string
	require.NoError(t, b.db.Service.QueryRow(b.ctx, `SELECT session_user`).Scan(&service))
	loginOf := func(t *testing.T, key string) string {
		t.Helper()
		var role string
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT owner_role FROM opsdesk.operations WHERE key = $1`, key).Scan(&role))
		return role
	}

	_, err := ops.DoExternal(b.ctx, b.store, emailReq("k1"), newProvider().failWith(ops.NotApplied(errors.New("declined"))))
	require.ErrorIs(t, err, ops.ErrNotApplied)
	require.Equal(t, service, loginOf(t, "k1"))

	// Another service, with its own login, takes the released record over.
	other := dbtest.NewService(t, b.db)
	otherStore := newStore(t, other.Pool, ops.Config{Owner: "worker-2"})
	out, err := ops.DoExternal(b.ctx, otherStore, emailReq("k1"), newProvider().send)
	require.NoError(t, err)
	require.Equal(t, 2, out.Attempt)
	require.Equal(t, other.Role, loginOf(t, "k1"))

	// A record reserved before the migration names no login: any service
	// login may complete it (README, known limits).
	_, err = b.db.Admin.Exec(b.ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
VALUES ('acme', 'send-email', 'old-1', '1', decode(repeat('01', 32), 'hex'), 'external_idempotent', 'pending', 'w',
    now(), now() + interval '1 hour')`)
	require.NoError(t, err)
	_, err = other.Pool.Exec(b.ctx, completeAgainSQL, b.idOf(t, toolEmail, "old-1"))
	require.NoError(t, err)
}

// The people's functions, running as opsdesk_owner, keep identity and
// the version's order too.
// DoTx inserts its record completed (migration 00018): the service may
// do that only as a local transaction's first attempt, completed now, and
// a pending record it inserts carries no outcome.
func TestInsertedCompletedOnlyAsALocalTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const insert = `INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner,
    attempt, leased_at, lease_expires_at, outcome, result, result_ref, completed_at, expires_at)
VALUES ('acme', 'create-ticket', '%s', '1', decode(repeat('01', 32), 'hex'), '%s', '%s', 'thief', %d, now(), now(),
    %s, '{"forged":true}', 'REF', %s, %s)`
	for _, c := range []struct {
		effect, state       string
		attempt             int
		outcome             string
		completed, expiring string
		rule                string
	}{
		{"external_unknown", "completed", 1, "'succeeded'", "now()", "NULL", "only by a local transaction"},
		{"external_idempotent", "completed", 1, "'succeeded'", "now()", "NULL", "only by a local transaction"},
		{"local", "completed", 1, "'succeeded'", "now() - interval '1 day'", "NULL", "completed now"},
		{"local", "completed", 1, "'succeeded'", "now()", "now() - interval '1 second'", "no earlier than now"},
		{"local", "completed", 2, "'succeeded'", "now()", "NULL", "attempt 1"},
		{"local", "pending", 1, "NULL", "NULL", "NULL", "pending has no outcome"},
		{"external_unknown", "pending", 1, "NULL", "NULL", "now() + interval '1 day'", "pending has no outcome"},
	} {
		stmt := fmt.Sprintf(insert, "forged", c.effect, c.state, c.attempt, c.outcome, c.completed, c.expiring)
		_, err := b.db.Service.Exec(b.ctx, stmt)
		requireStateMachine(t, err, c.rule, stmt)
	}
	require.Zero(t, b.count(t, `SELECT count(*) FROM opsdesk.operations`))

	// What DoTx inserts passes, and is final at once.
	_, err := b.db.Service.Exec(b.ctx, fmt.Sprintf(insert, "local-tx", "local", "completed", 1, "'succeeded'", "now()",
		"now() + interval '1 day'"))
	require.NoError(t, err)
	id := b.idOf(t, toolTicket, "local-tx")
	b.requireRefused(t, b.db.Service, id, "final",
		`UPDATE opsdesk.operations SET result = '{"forged":false}' WHERE id = $1`,
		`UPDATE opsdesk.operations SET state = 'pending', outcome = NULL WHERE id = $1`)
}

func TestOwnerKeepsImmutables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.doTicket(t, "acme", "k1", ticketIntent{Title: "Printer on fire", Priority: 2})
	require.NoError(t, err)
	id := b.idOf(t, toolTicket, "k1")
	before := b.rowText(t, id)
	for stmt, rule := range map[string]string{
		`UPDATE opsdesk.operations SET key = 'other' WHERE id = $1`:                                 "identity",
		`UPDATE opsdesk.operations SET fingerprint = decode(repeat('02', 32), 'hex') WHERE id = $1`: "identity, fingerprint",
		`UPDATE opsdesk.operations SET created_at = now() - interval '1 year' WHERE id = $1`:        "created_at",
		`UPDATE opsdesk.operations SET version = version - 1 WHERE id = $1`:                         "never down",
		`UPDATE opsdesk.operations SET state = 'released', outcome = NULL WHERE id = $1`:            "goes up with every change",
		`UPDATE opsdesk.operations SET result_ref = 'rewritten' WHERE id = $1`:                      "goes up with every change",
	} {
		err := pgx.BeginFunc(b.ctx, b.db.Admin, func(tx pgx.Tx) error {
			if _, err := tx.Exec(b.ctx, `SET LOCAL ROLE opsdesk_owner`); err != nil {
				return err
			}
			_, err := tx.Exec(b.ctx, stmt, id)
			return err
		})
		requireStateMachine(t, err, rule, stmt)
	}
	require.Equal(t, before, b.rowText(t, id))
}
