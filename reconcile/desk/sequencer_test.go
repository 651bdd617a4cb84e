package desk_test

// Issue 18 §1: nobody's transaction holds what other people need. Audit
// entries are queued in the change's transaction and sealed into their
// chain after commit (migration 00023); a wait for one record's row lock is
// bounded and names its holder; nobody's session is ended. Each test
// connects as the attacking role; the superuser only sets up fixtures and
// inspects.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// quick runs f, which must succeed within 5 s: a person is never kept
// waiting by another's locks for longer than the functions' lock_timeout.
func quick(t *testing.T, what string, f func(ctx context.Context) error) {
	t.Helper()
	took := timed(t, what, f)
	require.Less(t, took, 5*time.Second, what)
}

// decideFailed is an operator's decision as the console makes it.
func decideFailed(pool *pgxpool.Pool, id int64) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := desk.Decide(ctx, pool, reconcile.DecideParams{
			OperationID: id, Decision: reconcile.Failed, ExpectVersion: 1, Reason: "card blocked"})
		return err
	}
}

// The exact stall of the issue: a login with no opsdesk role holds a
// shared advisory lock on a gate's badge and queues an exclusive one
// behind it. Nothing of opsdesk takes advisory locks any more: a decision
// and a grant finish at once, and the outsider's sessions are not ended.
func TestAdvisoryLocksOfAnyLoginStallNobody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	outsider := dbtest.NewPerson(t, b.db, "")
	newcomer := dbtest.NewPerson(t, b.db, "")
	ids := b.stuckRecords(t, "acme", 1)

	shared := b.beginAs(t, outsider)
	_, err := shared.Exec(b.ctx, `
SELECT pg_advisory_xact_lock_shared(c, k)
FROM generate_series(1869640540, 1869640570) c,
     unnest(ARRAY[hashint8($1::bigint) & 4095, hashtext('acme') & 4095, 4096]) k`, ids[0])
	require.NoError(t, err)
	exclusive := b.beginAs(t, outsider)
	queued := make(chan error, 1)
	go func() {
		_, err := exclusive.Exec(b.ctx, `SELECT pg_advisory_xact_lock(1869640549, hashint8($1::bigint) & 4095)`, ids[0])
		queued <- err
	}()
	b.waitFor(t, "the outsider's queued exclusive lock",
		`SELECT EXISTS (SELECT FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock')`, outsider.Role)

	quick(t, "an operator's decision behind the outsider's advisory locks", decideFailed(b.operator.Pool, ids[0]))
	quick(t, "a grant on the '' chain behind them", func(ctx context.Context) error {
		_, err := desk.GrantAccess(ctx, admin.Pool, newcomer.Role, "viewer", "acme", "joins", "")
		return err
	})
	require.NoError(t, shared.Commit(b.ctx), "the outsider's session was not ended")
	require.NoError(t, <-queued)
	require.NoError(t, exclusive.Commit(b.ctx))
	b.verify(t, admin.Pool)
}

// An operator's decision left open in a transaction delays only its own
// record: another decision in its tenant and a grant finish at once and
// are sealed into their chains; a decision on the held record is refused
// within seconds as busy, audited, naming the holder; the holder is not
// ended, and its decision, once committed, is sealed after the others.
func TestOpenDecisionDelaysOnlyItsRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	holder := dbtest.NewPerson(t, b.db, "operator", "*")
	newcomer := dbtest.NewPerson(t, b.db, "")
	ids := b.stuckRecords(t, "acme", 2)

	tx := b.beginAs(t, holder)
	var entry int64
	require.NoError(t, tx.QueryRow(b.ctx, `SELECT entry FROM opsdesk.decide(p_id => $1, p_decision => 'not-executed',
    p_expect_version => 1, p_reason => 'mine')`, ids[0]).Scan(&entry))
	require.Positive(t, entry, "the holder's entry is queued")

	var other reconcile.Result
	quick(t, "another record's decision in the holder's tenant", func(ctx context.Context) error {
		var err error
		other, err = desk.Decide(ctx, b.operator.Pool, reconcile.DecideParams{
			OperationID: ids[1], Decision: reconcile.Failed, ExpectVersion: 1, Reason: "card blocked"})
		return err
	})
	require.Positive(t, other.Seq, "sealed into the acme chain at once: %s", other.AuditRef())
	var grant reconcile.Result
	quick(t, "a grant on the '' chain", func(ctx context.Context) error {
		var err error
		grant, err = desk.GrantAccess(ctx, admin.Pool, newcomer.Role, "viewer", "acme", "joins", "")
		return err
	})
	require.Positive(t, grant.Seq)

	start := time.Now()
	res, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: ids[0], Decision: reconcile.Failed, ExpectVersion: 1, Reason: "card blocked"})
	require.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, err, reconcile.ErrBusy)
	require.Contains(t, res.Message, holder.Role, "the answer names who holds the record")
	require.Contains(t, res.Message, "pid ")
	require.Positive(t, res.Seq, "the busy refusal is audited")

	require.NoError(t, tx.Commit(b.ctx), "the holder was not ended")
	seal, err := auditlog.Seal(b.ctx, holder.Pool, "acme", entry)
	require.NoError(t, err)
	require.Greater(t, seal.Seq, other.Seq, "sealed in commit order, after the decision that committed first")
	state, _ := b.state(t, ids[0])
	require.Equal(t, "released", state, "the holder's decision stands")
	b.verify(t, admin.Pool)
}

// A viewer's statement that is refused twice and then sleeps holds
// nothing anyone needs, and is not ended.
func TestSleepingRefusalsStallNobody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	viewer := dbtest.NewPerson(t, b.db, "viewer", "*")
	newcomer := dbtest.NewPerson(t, b.db, "")
	ids := b.stuckRecords(t, "acme", 3)

	done := make(chan error, 1)
	go func() {
		_, err := viewer.Pool.Exec(b.ctx, `
SELECT opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => 1, p_reason => 'mine'),
       opsdesk.decide(p_id => $2, p_decision => 'failed', p_expect_version => 1, p_reason => 'mine'),
       pg_sleep(6)`, ids[0], ids[1])
		done <- err
	}()
	b.waitFor(t, "the viewer's sleep", `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE usename = $1 AND wait_event = 'PgSleep')`, viewer.Role)
	quick(t, "an operator's decision in the viewer's tenant", decideFailed(b.operator.Pool, ids[2]))
	quick(t, "a grant on the '' chain", func(ctx context.Context) error {
		_, err := desk.GrantAccess(ctx, admin.Pool, newcomer.Role, "viewer", "acme", "joins", "")
		return err
	})
	require.NoError(t, <-done, "the viewer's statement ran to its end")
	b.verify(t, admin.Pool)
}

// Three sessions of one admin, each holding a decision on a record of one
// tenant and then deciding the next one's record: a cycle of row locks.
// PostgreSQL's deadlock detection or the functions' lock_timeout ends it
// within seconds (refusing what waited), and an honest operator's decision
// in that tenant never waits for it.
func TestCycleOfOneAdminsSessionsResolves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	ids := b.stuckRecords(t, "acme", 4)
	txs := make([]pgx.Tx, 3)
	for i := range txs {
		txs[i] = b.beginAs(t, admin)
		_, err := txs[i].Exec(b.ctx, `SELECT opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => 1, p_reason => 'hold')`, ids[i])
		require.NoError(t, err)
	}
	start := time.Now()
	answers := make(chan string, 3)
	for i, tx := range txs {
		go func() {
			var code *string
			err := tx.QueryRow(b.ctx, `SELECT code FROM opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => 1,
    p_reason => 'next')`, ids[(i+1)%3]).Scan(&code)
			switch {
			case err != nil:
				answers <- err.Error()
			case code == nil:
				answers <- "succeeded"
			default:
				answers <- *code
			}
		}()
	}
	b.waitFor(t, "the admin's sessions waiting for each other",
		`SELECT count(*) >= 2 FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock'`, admin.Role)
	quick(t, "an honest operator's decision in the tenant", decideFailed(b.operator.Pool, ids[3]))
	var got []string
	for range 3 {
		select {
		case a := <-answers:
			got = append(got, a)
		case <-time.After(10 * time.Second):
			t.Fatalf("the cycle still waits after %s (answers so far: %v)", time.Since(start), got)
		}
	}
	t.Logf("the cycle ended in %s: %v", time.Since(start).Round(time.Millisecond), got)
	require.Contains(t, strings.Join(got, " "), "busy", "a wait in the cycle is refused as busy")
	for _, tx := range txs {
		require.NoError(t, tx.Rollback(b.ctx))
	}
}

// A one-tenant admin who holds a record with set_hold in a statement that
// then sleeps keeps its row lock: a decision on that record is refused
// within seconds, naming the admin; one on another record does not wait;
// the admin's statement is not ended.
func TestHoldInASleepingStatementDelaysOnlyItsRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	holder := dbtest.NewPerson(t, b.db, "admin", "acme")
	ids := b.stuckRecords(t, "acme", 3)

	done := make(chan error, 1)
	go func() {
		_, err := holder.Pool.Exec(b.ctx, `
SELECT (opsdesk.set_hold(ARRAY[$1::bigint], true, 'litigation')).outcome, pg_sleep(6)`, ids[0])
		done <- err
	}()
	b.waitFor(t, "the admin's sleep", `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE usename = $1 AND wait_event = 'PgSleep')`, holder.Role)
	quick(t, "a decision on another record", decideFailed(b.operator.Pool, ids[1]))
	start := time.Now()
	res, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: ids[0], Decision: reconcile.NotExecuted, ExpectVersion: 1, Reason: "nothing at the provider"})
	require.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, err, reconcile.ErrBusy)
	require.Contains(t, res.Message, holder.Role)
	require.NoError(t, <-done, "the admin's statement ran to its end")
	var held bool
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT held FROM opsdesk.operations WHERE id = $1`, ids[0]).Scan(&held))
	require.True(t, held, "the hold stands")

	// And the other way round: a hold of a record a decision holds open.
	tx := b.beginAs(t, b.operator)
	_, err = tx.Exec(b.ctx, `SELECT opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => 1, p_reason => 'mine')`, ids[2])
	require.NoError(t, err)
	var code, message string
	require.NoError(t, holder.Pool.QueryRow(b.ctx, `SELECT code, message FROM opsdesk.set_hold(ARRAY[$1::bigint], true, 'litigation')`, ids[2]).
		Scan(&code, &message))
	require.Equal(t, "busy", code)
	require.Contains(t, message, b.operator.Role)
	require.NoError(t, tx.Rollback(b.ctx))
}

// The library holding a record (a slow local effect) makes a decision on
// it wait at most the lock_timeout; the answer names the service login.
func TestDecisionBehindTheLibraryIsBusy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.stuckRecords(t, "acme", 1)
	lib, err := b.db.Service.Begin(b.ctx)
	require.NoError(t, err)
	defer lib.Rollback(context.WithoutCancel(b.ctx)) //nolint:errcheck
	_, err = lib.Exec(b.ctx, `SELECT id FROM opsdesk.operations WHERE id = $1 FOR UPDATE`, ids[0])
	require.NoError(t, err)
	var service string
	require.NoError(t, lib.QueryRow(b.ctx, `SELECT session_user`).Scan(&service))
	start := time.Now()
	res, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: ids[0], Decision: reconcile.NotExecuted, ExpectVersion: 1, Reason: "nothing at the provider"})
	took := time.Since(start)
	require.ErrorIs(t, err, reconcile.ErrBusy)
	require.GreaterOrEqual(t, took, time.Second, "it waited for the library first")
	require.Less(t, took, 5*time.Second)
	require.Contains(t, res.Message, service)
	require.NoError(t, lib.Commit(b.ctx))
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: ids[0], Decision: reconcile.NotExecuted, ExpectVersion: 1, Reason: "nothing at the provider"})
	require.NoError(t, err, "once the library is done")
}

// A viewer who seals and keeps its transaction open delays sealing only:
// decisions go on and their entries wait, queued and counted; the seal's
// answer names the holder; once it ends, the next seal takes them all and
// the chain verifies.
func TestHeldSealDelaysOnlySealing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	viewer := dbtest.NewPerson(t, b.db, "viewer", "acme")
	ids := b.stuckRecords(t, "acme", 3)
	quick(t, "a first decision, which makes the acme chain", decideFailed(b.operator.Pool, ids[0]))

	tx := b.beginAs(t, viewer)
	_, err := tx.Exec(b.ctx, `SELECT opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => 1, p_reason => 'x')`, ids[1])
	require.NoError(t, err, "a viewer's refusal")
	_, err = tx.Exec(b.ctx, `SELECT opsdesk.audit_seal()`)
	requireCode(t, err, "25000", "a seal in a transaction that wrote")
	require.NoError(t, tx.Rollback(b.ctx))

	// Sealing in a transaction of its own, which it then keeps open: it
	// holds the acme head. An entry must be queued for it to take it.
	blocker := b.beginAs(t, b.operator)
	_, err = blocker.Exec(b.ctx, `SELECT opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => 1, p_reason => 'x')`, ids[1])
	require.NoError(t, err)
	require.NoError(t, blocker.Commit(b.ctx))
	holding := b.beginAs(t, viewer)
	var sealed int
	require.NoError(t, holding.QueryRow(b.ctx, `SELECT sealed FROM opsdesk.audit_seal()`).Scan(&sealed))
	require.Equal(t, 1, sealed)

	var res reconcile.Result
	quick(t, "a decision while the viewer holds the acme head", func(ctx context.Context) error {
		var err error
		res, err = desk.Decide(ctx, b.operator.Pool, reconcile.DecideParams{
			OperationID: ids[2], Decision: reconcile.Failed, ExpectVersion: 1, Reason: "card blocked"})
		return err
	})
	require.Zero(t, res.Seq, "its entry waits, queued")
	require.Positive(t, res.Entry)
	require.Contains(t, res.AuditRef(), "queued")
	seal, err := auditlog.Seal(b.ctx, admin.Pool, "", 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, seal.Waiting, int64(1), "the decision's entry waits")
	require.Contains(t, seal.HeldBy, viewer.Role, "the seal names who holds the chain")
	q, err := auditlog.ReadQueued(b.ctx, viewer.Pool)
	require.NoError(t, err)
	// The entry the viewer's seal took is queued still for everyone else
	// until that seal commits, and the decision's waits behind it.
	require.EqualValues(t, 2, q.Entries, "the viewer sees the queued entries of its tenant")

	require.NoError(t, holding.Rollback(b.ctx))
	seal, err = auditlog.Seal(b.ctx, b.operator.Pool, "acme", res.Entry)
	require.NoError(t, err)
	require.Positive(t, seal.Seq)
	require.Zero(t, seal.Waiting)
	b.verify(t, admin.Pool)
}

// The queue is written by the functions only, and the sealer alone takes
// from it: no role edits, deletes or empties it, and no role but the
// functions' owner writes the trail.
func TestQueueIsTheFunctionsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	outsider := dbtest.NewPerson(t, b.db, "")
	ids := b.stuckRecords(t, "acme", 1)
	tx := b.beginAs(t, b.operator)
	_, err := tx.Exec(b.ctx, `SELECT opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => 1, p_reason => 'x')`, ids[0])
	require.NoError(t, err)
	require.NoError(t, tx.Commit(b.ctx))

	for _, p := range []*dbtest.Person{b.operator, admin} {
		for _, sql := range []string{
			`UPDATE opsdesk.audit_queue SET reason = 'forged'`,
			`DELETE FROM opsdesk.audit_queue`,
			`TRUNCATE opsdesk.audit_queue`,
			`INSERT INTO opsdesk.audit_queue (tenant, event_id, at, role, action, outcome, forced, override)
             VALUES ('acme', gen_random_uuid(), now(), 'someone', 'decide:completed', 'succeeded', false, false)`,
			`SELECT FROM opsdesk.audit_queue FOR UPDATE`,
			`UPDATE opsdesk.audit_heads SET seq = 0`,
			`SELECT FROM opsdesk.audit_heads FOR SHARE`,
		} {
			_, err := p.Pool.Exec(b.ctx, sql)
			requireCode(t, err, "42501", p.Role+": "+sql)
		}
	}
	_, err = outsider.Pool.Exec(b.ctx, `SELECT opsdesk.audit_seal()`)
	requireCode(t, err, "42501", "a login without opsdesk roles seals")
	_, err = b.db.Service.Exec(b.ctx, `SELECT opsdesk.audit_seal()`)
	requireCode(t, err, "42501", "the service seals")
	// The superuser's own UPDATE and TRUNCATE are refused too.
	_, err = b.db.Admin.Exec(b.ctx, `UPDATE opsdesk.audit_queue SET reason = 'forged'`)
	requireCode(t, err, "42501", "the superuser edits a queued entry")
	_, err = b.db.Admin.Exec(b.ctx, `TRUNCATE opsdesk.audit_queue`)
	requireCode(t, err, "42501", "the superuser empties the queue")

	var n int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.audit_queue`).Scan(&n))
	require.Equal(t, 1, n, "the queued entry is still there")
	seal, err := auditlog.Seal(b.ctx, b.operator.Pool, "", 0)
	require.NoError(t, err)
	require.Equal(t, 1, seal.Sealed)
	b.verify(t, admin.Pool)
}

// Sealing runs in READ COMMITTED only: a snapshot older than the commits
// it seals would seal out of order.
func TestSealRefusesOtherIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tx, err := b.operator.Pool.BeginTx(b.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer tx.Rollback(context.WithoutCancel(b.ctx)) //nolint:errcheck
	_, err = tx.Exec(b.ctx, `SELECT opsdesk.audit_seal()`)
	requireCode(t, err, "25000", "a seal in REPEATABLE READ")
}

// A one-tenant operator's refusal goes to the ” chain, which it does not
// see; it is still told its record's sequence number.
func TestRefusalOnTheEmptyChainIsNamed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	operator := dbtest.NewPerson(t, b.db, "operator", "acme")
	ids := b.stuckRecords(t, "globex", 1)
	res, err := desk.Decide(b.ctx, operator.Pool, reconcile.DecideParams{
		OperationID: ids[0], Decision: reconcile.Failed, ExpectVersion: 1, Reason: "not mine"})
	require.ErrorIs(t, err, reconcile.ErrNotFound)
	require.Empty(t, res.Tenant)
	require.Positive(t, res.Seq, res.AuditRef())
	var role string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT role FROM opsdesk.audit WHERE tenant = '' AND seq = $1`, res.Seq).Scan(&role))
	require.Equal(t, operator.Role, role)
}

// opsdesk ends nobody's session any more, and keeps no right to.
func TestOwnerCannotEndSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var can bool
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT pg_has_role('opsdesk_owner', 'pg_signal_backend', 'MEMBER')`).Scan(&can))
	require.False(t, can)
	var gates int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM pg_proc WHERE proname IN ('gate', 'end_stall', 'chain_lock')
    AND pronamespace = 'opsdesk'::regnamespace`).Scan(&gates))
	require.Zero(t, gates)
}

// No role but the tables' owner may lock a table of the store in any mode
// stronger than ACCESS SHARE (which only a migration's ACCESS EXCLUSIVE
// waits for): LOCK TABLE needs table-level UPDATE, DELETE or TRUNCATE (or
// INSERT, for ROW EXCLUSIVE), and the roles are granted columns or
// SELECT only.
func TestNoRoleLocksATable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	people := []*dbtest.Person{dbtest.NewPerson(t, b.db, "viewer", "*"), b.operator,
		dbtest.NewPerson(t, b.db, "admin", "acme"), dbtest.NewPerson(t, b.db, "admin", "*"), dbtest.NewPerson(t, b.db, "")}
	pools := []*pgxpool.Pool{b.db.Service}
	for _, p := range people {
		pools = append(pools, p.Pool)
	}
	tables := []string{"operations", "conflicts", "audit", "audit_queue", "audit_heads", "access", "tombstones",
		"record_conflicts", "refusal_windows", "refusal_summaries", "reveal_fetches", "purge_runs", "purge_batches"}
	for i, pool := range pools {
		for _, table := range tables {
			for _, mode := range []string{"ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE", "SHARE ROW EXCLUSIVE",
				"EXCLUSIVE", "ACCESS EXCLUSIVE"} {
				err := pgx.BeginFunc(b.ctx, pool, func(tx pgx.Tx) error {
					_, err := tx.Exec(b.ctx, "LOCK TABLE opsdesk."+table+" IN "+mode+" MODE NOWAIT")
					return err
				})
				requireCode(t, err, "42501", fmt.Sprintf("login %d locks %s in %s mode", i, table, mode))
			}
		}
	}
}

// audit_seal answers a sequence number only for the caller's own entry:
// another role's entry, another chain, a negative, zero or absurd entry,
// and a 1 MiB or control-character chain name get none, and seal as
// usual. The helper that names lock holders is the functions' own.
func TestSealAnswersOnlyOwnEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := dbtest.NewPerson(t, b.db, "operator", "*")
	ids := b.stuckRecords(t, "acme", 1)
	var entry int64
	require.NoError(t, other.Pool.QueryRow(b.ctx, `SELECT entry FROM opsdesk.decide(p_id => $1, p_decision => 'failed',
    p_expect_version => 1, p_reason => 'theirs')`, ids[0]).Scan(&entry))
	for _, c := range []struct {
		tenant any
		entry  any
	}{
		{"acme", entry}, {"globex", entry}, {"", entry}, {"acme", -entry}, {"acme", 0}, {"acme", int64(1) << 62},
		{strings.Repeat("a", 1<<20), entry}, {"acme\x1b[2J", entry}, {nil, entry}, {"acme", nil},
	} {
		var seq *int64
		require.NoError(t, b.operator.Pool.QueryRow(b.ctx, `SELECT seq FROM opsdesk.audit_seal($1, $2)`, c.tenant, c.entry).Scan(&seq))
		require.Nil(t, seq, "another role's entry, asked as %.20v/%v", c.tenant, c.entry)
	}
	var seq *int64
	require.NoError(t, other.Pool.QueryRow(b.ctx, `SELECT seq FROM opsdesk.audit_seal('acme', $1)`, entry).Scan(&seq))
	require.NotNil(t, seq, "its own")
	_, err := b.operator.Pool.Exec(b.ctx, `SELECT opsdesk.lock_holder('1'::xid, 'opsdesk.operations')`)
	requireCode(t, err, "42501", "an operator calls lock_holder")
}

// A chain that cannot be sealed (here a constraint the superuser added to
// the trail refuses one entry) keeps its entries queued and is named;
// every other chain is still sealed.
func TestOneChainThatCannotBeSealedStopsNoOther(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acme, globex := b.stuckRecords(t, "acme", 1), b.stuckRecords(t, "globex", 1)
	_, err := b.db.Admin.Exec(b.ctx, `ALTER TABLE opsdesk.audit ADD CONSTRAINT test_poison CHECK (reason IS DISTINCT FROM 'poison')`)
	require.NoError(t, err)
	for _, d := range []struct {
		id     int64
		reason string
	}{{globex[0], "poison"}, {acme[0], "fine"}} {
		_, err := b.operator.Pool.Exec(b.ctx, `SELECT opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => 1,
    p_reason => $2)`, d.id, d.reason)
		require.NoError(t, err)
	}
	seal, err := auditlog.Seal(b.ctx, b.operator.Pool, "", 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, seal.Sealed, 1, "acme's entry is sealed")
	require.Contains(t, seal.Problem, "chain 'globex' cannot be sealed")
	require.Contains(t, seal.Problem, "test_poison")
	require.EqualValues(t, 1, seal.Waiting)
	var queued string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT tenant FROM opsdesk.audit_queue`).Scan(&queued))
	require.Equal(t, "globex", queued)
	var sealed int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.audit WHERE tenant = 'acme'`).Scan(&sealed))
	require.Equal(t, 1, sealed)
}
