package ops_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmigrate"
)

// Fault injection: each statement of DoTx, DoExternal and Lookup is held in
// the database while the test terminates its backend, stops the server or
// cancels the call's context. The error must match exactly one of the
// library's sentinels, keep the driver's error (or the context's) in its
// chain, and the store must hold what that class says: nothing written, the
// record pending, or (for an unknown commit) all or nothing.
//
// How a statement is held: the superuser installs in the test's database a
// function fault.hold() that, when the statement running (current_query())
// matches the armed pattern, waits for an advisory lock the test holds.
// Restrictive row-level security policies on opsdesk.operations,
// opsdesk.conflicts and biz.tickets call it for each row a statement reads
// or writes (a trigger cannot hold a SELECT), and a deferred constraint trigger calls it during
// COMMIT. The test sees the statement wait in pg_locks, which also names the
// backend to terminate, injects the fault, then disarms and lets go. BEGIN
// touches no table: the service pool's PrepareConn hook injects the fault
// just before it instead.

// sentinels are the library's error classes: every error a call returns
// matches exactly one. ErrLeaseLost is left out: it is documented as the
// cause of a cancelled call context, not a class.
var sentinels = []error{
	ops.ErrInvalidRequest, ops.ErrUnknownTool, ops.ErrWrongEffect, ops.ErrIntentConflict, ops.ErrInProgress,
	ops.ErrNeedsReconciliation, ops.ErrRejected, ops.ErrLostOwnership, ops.ErrOutcomeUnknown, ops.ErrNotApplied,
	ops.ErrUnavailable, ops.ErrStoreRefused, ops.ErrNotRecorded, ops.ErrExpired,
}

// requireClass asserts that err matches want and no other sentinel.
func requireClass(t *testing.T, err, want error) {
	t.Helper()
	require.Error(t, err)
	var matched []string
	for _, s := range sentinels {
		if errors.Is(err, s) {
			matched = append(matched, s.Error())
		}
	}
	require.Equal(t, []string{want.Error()}, matched, "error: %v", err)
}

type fault string

const (
	terminate fault = "TerminateBackend"
	stop      fault = "StopServer"
	cancelCtx fault = "CancelContext"
)

// toolRenewing is an external tool whose lease is renewed every second.
const toolRenewing = "send-email-slowly"

// faultTools are the tools of a fault test's store: testTools and
// toolRenewing.
func faultTools() map[string]ops.Policy {
	tools := maps.Clone(testTools)
	tools[toolRenewing] = ops.Policy{Effect: ops.EffectIdempotentProvider, Lease: 3 * time.Second}
	return tools
}

// faultLock is the advisory lock a held statement waits for.
const faultLock = 0x0fa017

const installFaults = `
CREATE SCHEMA biz;
CREATE TABLE biz.tickets (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL, key text NOT NULL, title text NOT NULL);
GRANT USAGE ON SCHEMA biz TO opsdesk_service;
GRANT SELECT, INSERT ON biz.tickets TO opsdesk_service;

CREATE SCHEMA fault;
CREATE TABLE fault.arm (pattern text NOT NULL);
CREATE FUNCTION fault.hold(at text DEFAULT '') RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    -- Wait while armed: on the test's advisory lock, and if the test's
    -- session ends first (a stopping server ends them in any order), by
    -- polling until this session ends too.
    WHILE EXISTS (SELECT FROM fault.arm WHERE at || coalesce(current_query(), '') LIKE pattern) LOOP
        PERFORM pg_advisory_lock(` + "1023" + `);
        PERFORM pg_advisory_unlock(` + "1023" + `);
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN true;
END $$;
CREATE FUNCTION fault.hold_trigger() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM fault.hold('commit:');
    RETURN NULL;
END $$;
GRANT USAGE ON SCHEMA fault TO PUBLIC;
GRANT EXECUTE ON FUNCTION fault.hold(text), fault.hold_trigger() TO PUBLIC;

ALTER TABLE opsdesk.operations ENABLE ROW LEVEL SECURITY;
CREATE POLICY fault_hold ON opsdesk.operations AS RESTRICTIVE USING (fault.hold()) WITH CHECK (fault.hold());
ALTER TABLE opsdesk.conflicts ENABLE ROW LEVEL SECURITY;
CREATE POLICY fault_hold ON opsdesk.conflicts AS RESTRICTIVE USING (fault.hold()) WITH CHECK (fault.hold());
ALTER TABLE biz.tickets ENABLE ROW LEVEL SECURITY;
CREATE POLICY fault_allow ON biz.tickets USING (true) WITH CHECK (true);
CREATE POLICY fault_hold ON biz.tickets AS RESTRICTIVE USING (fault.hold()) WITH CHECK (fault.hold());
CREATE CONSTRAINT TRIGGER fault_hold_commit AFTER INSERT OR UPDATE ON opsdesk.operations
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fault.hold_trigger();`

// faultDB is a database with the fault hooks installed, a store over a
// service pool, and (for stopping the server) the cluster it runs on.
type faultDB struct {
	adminDSN string
	admin    *pgxpool.Pool
	service  *pgxpool.Pool
	store    *ops.Store
	cluster  *pgcluster.Cluster
	provider *provider

	mu     sync.Mutex
	holder *pgx.Conn // superuser session holding faultLock while armed
	// onAcquire runs once, on the next connection the service pool hands out.
	onAcquire atomic.Pointer[func(*pgx.Conn)]
}

func newFaultDB(t *testing.T, adminDSN, serviceDSN string, cluster *pgcluster.Cluster) *faultDB {
	t.Helper()
	f := &faultDB{adminDSN: adminDSN, cluster: cluster, provider: newProvider()}
	f.admin = dbtest.Pool(t, adminDSN)
	_, err := f.admin.Exec(t.Context(), strings.ReplaceAll(installFaults, "1023", fmt.Sprint(faultLock)))
	require.NoError(t, err)

	cfg, err := db.PoolConfig(serviceDSN, "opsdesk-fault-test")
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = ""
	cfg.PrepareConn = func(_ context.Context, conn *pgx.Conn) (bool, error) {
		if hook := f.onAcquire.Swap(nil); hook != nil {
			(*hook)(conn)
		}
		return true, nil
	}
	f.service, err = db.Open(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(f.service.Close)
	f.store = newStore(t, f.service, ops.Config{Owner: "worker-1", Tools: faultTools()})
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.holder != nil {
			f.holder.Close(context.Background())
		}
	})
	return f
}

// arm makes the next statement matching pattern (a LIKE pattern over the
// statement's text) wait until disarm.
func (f *faultDB) arm(t *testing.T, pattern string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder == nil {
		conn, err := pgx.Connect(t.Context(), f.adminDSN)
		require.NoError(t, err)
		f.holder = conn
	}
	_, err := f.holder.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, faultLock)
	require.NoError(t, err)
	_, err = f.admin.Exec(t.Context(), `INSERT INTO fault.arm VALUES ($1)`, pattern)
	require.NoError(t, err)
}

// disarm lets a held statement go on and holds no other.
func (f *faultDB) disarm(t *testing.T) {
	t.Helper()
	_, err := f.admin.Exec(t.Context(), `DELETE FROM fault.arm`)
	require.NoError(t, err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder == nil {
		return
	}
	if _, err := f.holder.Exec(t.Context(), `SELECT pg_advisory_unlock_all()`); err != nil {
		// The server stopped under it: its lock went with its session.
		f.holder.Close(context.Background())
		f.holder = nil
	}
}

// waitHeld waits until a backend waits for faultLock and returns its pid.
// A call that ends first fails the test: the fault must hit the statement.
func (f *faultDB) waitHeld(t *testing.T, done <-chan error) uint32 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pid uint32
		err := f.admin.QueryRow(t.Context(), `
SELECT pid FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND objid = $1
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, faultLock).Scan(&pid)
		if err == nil {
			return pid
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		select {
		case err := <-done:
			t.Fatalf("the call ended before its statement was held: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no statement was held")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until backend pid is gone or idle: a backend whose client
// went away finishes its statement, then notices and rolls back.
func (f *faultDB) settle(t *testing.T, pid uint32) {
	t.Helper()
	require.Eventually(t, func() bool {
		var busy bool
		err := f.admin.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND state <> 'idle')`, pid).Scan(&busy)
		return err == nil && !busy
	}, 20*time.Second, 5*time.Millisecond)
}

// restart starts the stopped server again and drops the pools' broken
// connections, so that the next case starts clean.
func (f *faultDB) restart(t *testing.T) {
	t.Helper()
	require.NoError(t, f.cluster.StartServer(t.Context()))
	f.admin.Reset()
	f.service.Reset()
}

// inject runs call, holds its statement matching pattern ("" : just before
// BEGIN), injects the fault and returns the call's error.
func (f *faultDB) inject(t *testing.T, pattern string, kind fault, call func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if pattern == "" {
		hook := func(conn *pgx.Conn) {
			switch kind {
			case terminate:
				f.terminate(t, conn.PgConn().PID())
			case stop:
				require.NoError(t, f.cluster.StopServer())
			case cancelCtx:
				cancel()
			}
		}
		f.onAcquire.Store(&hook)
		err := call(ctx)
		if kind == stop {
			f.restart(t)
		}
		return err
	}

	f.arm(t, pattern)
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	pid := f.waitHeld(t, done)
	var err error
	switch kind {
	case terminate:
		f.terminate(t, pid)
		f.disarm(t)
		err = <-done
	case cancelCtx:
		cancel()
		// A write the library shields from cancellation ends only once
		// its statement is let go.
		f.disarm(t)
		err = <-done
		f.settle(t, pid)
	case stop:
		require.NoError(t, f.cluster.StopServer())
		err = <-done
		f.restart(t)
		f.disarm(t)
	}
	return err
}

func (f *faultDB) terminate(t *testing.T, pid uint32) {
	t.Helper()
	var ok bool
	require.NoError(t, f.admin.QueryRow(t.Context(), `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok))
	require.True(t, ok, "terminate backend %d", pid)
}

// snapshot is what the store holds for one identity.
type snapshot struct {
	State     string
	Attempt   int
	Version   int64
	Conflicts int
	Tickets   int
}

func (f *faultDB) snapshot(t *testing.T, tool, key string) snapshot {
	t.Helper()
	s := snapshot{State: "absent"}
	err := f.admin.QueryRow(t.Context(), `SELECT state, attempt, version FROM opsdesk.operations WHERE tenant = 'acme' AND tool = $1 AND key = $2`,
		tool, key).Scan(&s.State, &s.Attempt, &s.Version)
	if !errors.Is(err, pgx.ErrNoRows) {
		require.NoError(t, err)
	}
	require.NoError(t, f.admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.conflicts WHERE key = $1`, key).Scan(&s.Conflicts))
	require.NoError(t, f.admin.QueryRow(t.Context(), `SELECT count(*) FROM biz.tickets WHERE key = $1`, key).Scan(&s.Tickets))
	return s
}

// What the store must hold after the call, given what it held before.
type stateCheck func(t *testing.T, before, after snapshot)

func unchanged(t *testing.T, before, after snapshot) {
	require.Equal(t, before, after, "nothing may have been written")
}

func inState(state string) stateCheck {
	return func(t *testing.T, before, after snapshot) {
		require.Equal(t, state, after.State, "after %+v", before)
		require.Equal(t, before.Conflicts, after.Conflicts)
	}
}

// committedOnce: a DoTx that completed: the record with its one ticket,
// inserted completed (version 1), or a released record taken over and
// completed (the next attempt, two versions on).
func committedOnce(t *testing.T, before, after snapshot) {
	want := snapshot{State: "completed", Attempt: 1, Version: 1, Conflicts: before.Conflicts, Tickets: before.Tickets + 1}
	if before.State == "released" {
		want.Attempt, want.Version = before.Attempt+1, before.Version+2
	}
	require.Equal(t, want, after)
}

// allOrNothing: a DoTx commit whose answer was lost committed the record
// with its ticket, or neither.
func allOrNothing(t *testing.T, before, after snapshot) {
	if after != before {
		committedOnce(t, before, after)
	}
}

func conflictRecorded(t *testing.T, before, after snapshot) {
	before.Conflicts++
	require.Equal(t, before, after)
}

// want is a call's expected answer to one fault.
type want struct {
	class error // nil: the call succeeds
	state stateCheck
	calls int // provider calls the attempt made (DoExternal)
	// cause is in the error's chain; nil: a server error 57P01 for
	// terminate and stop, context.Canceled for a cancellation.
	cause error
	step  ops.Step // for ErrOutcomeUnknown
}

// faultStep is a statement to hold and what each fault there must give.
type faultStep struct {
	name    string
	pattern string
	tool    string
	// fixture prepares the record the call meets.
	fixture func(t *testing.T, f *faultDB, key string)
	call    func(ctx context.Context, f *faultDB, key string) error
	want    map[fault]want
}

func (s faultStep) run(t *testing.T, f *faultDB, kind fault, key string) {
	if s.fixture != nil {
		s.fixture(t, f, key)
	}
	before := f.snapshot(t, s.tool, key)
	callsBefore := len(f.provider.attempts(key))
	err := f.inject(t, s.pattern, kind, func(ctx context.Context) error { return s.call(ctx, f, key) })
	w := s.want[kind]
	if w.class == nil {
		require.NoError(t, err)
	} else {
		requireClass(t, err, w.class)
		switch {
		case w.cause != nil:
			require.ErrorIs(t, err, w.cause)
		case kind == cancelCtx:
			require.ErrorIs(t, err, context.Canceled)
		default:
			// The server's admin_shutdown, or (before BEGIN) the broken
			// socket of a connection it closed.
			var pgErr *pgconn.PgError
			var netErr *net.OpError
			require.True(t, errors.As(err, &pgErr) && pgErr.Code == "57P01" || errors.As(err, &netErr),
				"the driver's error stays in the chain: %v", err)
		}
		if w.step != "" {
			var unknown *ops.OutcomeUnknownError
			require.ErrorAs(t, err, &unknown)
			require.Equal(t, w.step, unknown.Step)
		}
	}
	w.state(t, before, f.snapshot(t, s.tool, key))
	require.Len(t, f.provider.attempts(key), callsBefore+w.calls, "provider calls")
}

// same is the answer when the call's fault leaves nothing written.
func same(class error) map[fault]want {
	return map[fault]want{
		terminate: {class: class, state: unchanged},
		stop:      {class: class, state: unchanged},
		cancelCtx: {class: class, state: unchanged},
	}
}

func doTxSteps() []faultStep {
	ticket := func(ctx context.Context, f *faultDB, key string) error {
		_, err := ops.DoTx(ctx, f.store, ticketReq("acme", key, printer), createTicket("acme", key, printer.Title))
		return err
	}
	conflicting := func(ctx context.Context, f *faultDB, key string) error {
		other := ticketIntent{Title: "Printer on fire", Priority: 1}
		_, err := ops.DoTx(ctx, f.store, ticketReq("acme", key, other), createTicket("acme", key, other.Title))
		return err
	}
	completed := func(t *testing.T, f *faultDB, key string) {
		require.NoError(t, ticket(t.Context(), f, key))
	}
	// A released record (an operator found the effect did not happen)
	// takes DoTx's other path: reserve, take over and complete in one
	// transaction.
	released := func(t *testing.T, f *faultDB, key string) {
		completed(t, f, key)
		_, err := f.admin.Exec(t.Context(), `UPDATE opsdesk.operations
SET state = 'released', outcome = NULL, result = NULL, completed_at = NULL, version = version + 1
WHERE tenant = 'acme' AND tool = $1 AND key = $2`, toolTicket, key)
		require.NoError(t, err)
	}
	commitFaults := map[fault]want{
		terminate: {class: ops.ErrOutcomeUnknown, step: ops.StepCommit, state: allOrNothing},
		stop:      {class: ops.ErrOutcomeUnknown, step: ops.StepCommit, state: allOrNothing},
		// Once sent, the commit is not cut short: it happens.
		cancelCtx: {state: committedOnce},
	}
	return []faultStep{
		// The fast path: one read, then fn's writes and the record
		// inserted completed in one transaction.
		// (A read that finds no row cannot be held: the policy runs per
		// row. Acquire fails the connection just before it.)
		{name: "Acquire", call: ticket, want: same(ops.ErrUnavailable)},
		{name: "ReadToReplay", pattern: "%now() AS db_now%", fixture: completed, call: ticket, want: same(ops.ErrUnavailable)},
		{name: "BusinessWrite", pattern: "%INSERT INTO biz.tickets%", call: ticket, want: same(ops.ErrUnavailable)},
		// The record's insert goes with the COMMIT, in one round trip:
		// once sent, the pair is not cut short; a session ended during the
		// insert ran no COMMIT, and the server's error says so.
		{name: "InsertCompleted", pattern: "%INSERT INTO opsdesk.operations%'completed'%", call: ticket, want: map[fault]want{
			terminate: {class: ops.ErrUnavailable, state: unchanged},
			stop:      {class: ops.ErrUnavailable, state: unchanged},
			cancelCtx: {state: committedOnce},
		}},
		{name: "Commit", pattern: "commit:commit", call: ticket, want: commitFaults},
		// The other path.
		{name: "RecordConflict", pattern: "%INSERT INTO opsdesk.conflicts%", fixture: completed, call: conflicting, want: same(ops.ErrUnavailable)},
		{name: "Reserve", pattern: "%INSERT INTO opsdesk.operations%'pending'%", fixture: released, call: ticket, want: same(ops.ErrUnavailable)},
		{name: "TakeOver", pattern: "%SET state = 'pending', owner%", fixture: released, call: ticket, want: same(ops.ErrUnavailable)},
		{name: "BusinessWriteAfterTakeOver", pattern: "%INSERT INTO biz.tickets%", fixture: released, call: ticket, want: same(ops.ErrUnavailable)},
		{name: "Complete", pattern: "%SET state = 'completed'%", fixture: released, call: ticket, want: same(ops.ErrUnavailable)},
		{name: "CommitAfterTakeOver", pattern: "commit:commit", fixture: released, call: ticket, want: commitFaults},
	}
}

func doExternalSteps() []faultStep {
	send := func(ctx context.Context, f *faultDB, key string) error {
		_, err := ops.DoExternal(ctx, f.store, emailReq(key), f.provider.send)
		return err
	}
	completed := func(t *testing.T, f *faultDB, key string) {
		require.NoError(t, send(t.Context(), f, key))
	}
	released := func(t *testing.T, f *faultDB, key string) {
		_, err := ops.DoExternal(t.Context(), f.store, emailReq(key), f.provider.failWith(ops.NotApplied(errors.New("declined"))))
		require.ErrorIs(t, err, ops.ErrNotApplied)
	}
	long := func(ctx context.Context, f *faultDB, key string) error {
		return callUntilRenewed(ctx, f, f.store, key)
	}
	return []faultStep{
		{name: "Reserve", pattern: "%INSERT INTO opsdesk.operations%", call: send, want: map[fault]want{
			terminate: {class: ops.ErrUnavailable, state: unchanged},
			stop:      {class: ops.ErrUnavailable, state: unchanged},
			// The reservation, once sent, is written; the call then hands
			// it back instead of calling the provider.
			cancelCtx: {class: ops.ErrUnavailable, state: inState("released")},
		}},
		{name: "ReserveCommit", pattern: "commit:", call: send, want: map[fault]want{
			// The row was sent, then the session ended before the commit:
			// the library cannot tell that it did not commit.
			terminate: {class: ops.ErrOutcomeUnknown, step: ops.StepReserve, state: unchanged},
			stop:      {class: ops.ErrOutcomeUnknown, step: ops.StepReserve, state: unchanged},
			cancelCtx: {class: ops.ErrUnavailable, state: inState("released")},
		}},
		{name: "ReadExisting", pattern: "%now() AS db_now%", fixture: completed, call: send, want: same(ops.ErrUnavailable)},
		{name: "TakeOver", pattern: "%SET state = 'pending', owner%", fixture: released, call: send, want: map[fault]want{
			terminate: {class: ops.ErrUnavailable, state: unchanged},
			stop:      {class: ops.ErrUnavailable, state: unchanged},
			cancelCtx: {class: ops.ErrUnavailable, state: func(t *testing.T, before, after snapshot) {
				require.Equal(t, snapshot{State: "released", Attempt: before.Attempt + 1, Version: before.Version + 2}, after)
			}},
		}},
		{name: "RecordConflict", pattern: "%INSERT INTO opsdesk.conflicts%", fixture: completed,
			call: func(ctx context.Context, f *faultDB, key string) error {
				_, err := ops.DoExternal(ctx, f.store, externalReq(toolEmail, key, emailIntent{To: "x@acme.example", Subject: "other"}), f.provider.send)
				return err
			}, want: map[fault]want{
				terminate: {class: ops.ErrUnavailable, state: unchanged},
				stop:      {class: ops.ErrUnavailable, state: unchanged},
				cancelCtx: {class: ops.ErrIntentConflict, state: conflictRecorded, cause: ops.ErrIntentConflict},
			}},
		{name: "Complete", pattern: "%SET state = 'completed'%", call: send, want: map[fault]want{
			terminate: {class: ops.ErrNotRecorded, state: inState("pending"), calls: 1},
			stop:      {class: ops.ErrNotRecorded, state: inState("pending"), calls: 1},
			cancelCtx: {state: inState("completed"), calls: 1},
		}},
		{name: "Release", pattern: "%SET state = 'released'%",
			call: func(ctx context.Context, f *faultDB, key string) error {
				_, err := ops.DoExternal(ctx, f.store, emailReq(key), f.provider.failWith(ops.NotApplied(errors.New("declined"))))
				return err
			}, want: map[fault]want{
				terminate: {class: ops.ErrNotRecorded, state: inState("pending"), calls: 1},
				stop:      {class: ops.ErrNotRecorded, state: inState("pending"), calls: 1},
				cancelCtx: {class: ops.ErrNotApplied, state: inState("released"), calls: 1, cause: ops.ErrNotApplied},
			}},
		{name: "LeaseRenewal", pattern: "%SET lease_expires_at = clock_timestamp() +%", tool: toolRenewing, call: long, want: map[fault]want{
			// One failed renewal does not lose the lease: the next renews it.
			terminate: {state: inState("completed"), calls: 1},
			stop:      {class: ops.ErrOutcomeUnknown, step: ops.StepCall, state: inState("pending"), calls: 1, cause: ops.ErrLeaseLost},
			cancelCtx: {class: ops.ErrOutcomeUnknown, step: ops.StepCall, state: inState("pending"), calls: 1},
		}},
	}
}

func lookupSteps() []faultStep {
	return []faultStep{{
		name: "Read", pattern: "%now() AS db_now%", tool: toolTicket,
		fixture: func(t *testing.T, f *faultDB, key string) {
			_, err := ops.DoTx(t.Context(), f.store, ticketReq("acme", key, printer), createTicket("acme", key, printer.Title))
			require.NoError(t, err)
		},
		call: func(ctx context.Context, f *faultDB, key string) error {
			_, err := f.store.Read(ctx, ops.Identity{Tenant: "acme", Tool: toolTicket, Key: key})
			return err
		},
		want: same(ops.ErrUnavailable),
	}}
}

// callUntilRenewed makes a toolRenewing call through store whose provider
// call lasts until a renewal after the held one has moved the lease on, or
// until the lease is lost. Its tool's lease is long enough (a renewal every
// second) for the test to hit the held renewal before the renewal's own
// timeout, even on a loaded machine.
func callUntilRenewed(ctx context.Context, f *faultDB, store *ops.Store, key string) error {
	req := externalReq(toolRenewing, key, diskFull)
	_, err := ops.DoExternal(ctx, store, req, func(ctx context.Context, a ops.Attempt) (receipt, error) {
		r := f.provider.record(a)
		var first time.Time
		for {
			var expires time.Time
			err := f.admin.QueryRow(ctx, `SELECT lease_expires_at FROM opsdesk.operations WHERE id = $1`, a.OperationID).Scan(&expires)
			switch {
			case err != nil: // the server is away, or ctx ended
			case first.IsZero():
				first = expires
			case expires.After(first):
				return r, nil
			}
			select {
			case <-ctx.Done():
				return receipt{}, context.Cause(ctx)
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return err
}

// faultCall is a call of the library and its statements.
type faultCall struct {
	name  string
	steps []faultStep
}

func faultCalls() []faultCall {
	calls := []faultCall{{"DoTx", doTxSteps()}, {"DoExternal", doExternalSteps()}, {"Lookup", lookupSteps()}}
	for _, c := range calls {
		for i := range c.steps {
			if c.steps[i].tool == "" {
				c.steps[i].tool = map[string]string{"DoTx": toolTicket, "DoExternal": toolEmail}[c.name]
			}
		}
	}
	return calls
}

// runFaults injects kind at every statement of every call, one after the
// other on f's database, each case under its own key.
func runFaults(t *testing.T, f *faultDB, kind fault) {
	for _, c := range faultCalls() {
		for _, s := range c.steps {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				s.run(t, f, kind, c.name+"-"+s.name)
			})
		}
	}
}

// TestFaultAtEveryStatement terminates the backend, or cancels the
// context, at each statement.
func TestFaultAtEveryStatement(t *testing.T) {
	t.Parallel()
	for _, kind := range []fault{terminate, cancelCtx} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			d := dbtest.New(t)
			runFaults(t, newFaultDB(t, d.AdminDSN, d.ServiceDSN, nil), kind)
		})
	}
}

// faultCluster starts a cluster of the test's own, which it may stop and
// start, with one migrated database, and returns its superuser's and a
// service login's DSNs.
func faultCluster(t *testing.T) (c *pgcluster.Cluster, adminDSN, serviceDSN string) {
	t.Helper()
	ctx := t.Context()
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 40})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop()) })
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `CREATE DATABASE opsdesk`)
	require.NoError(t, err)
	adminDSN = c.DSN("opsdesk")
	admin, err := pgxpool.New(ctx, adminDSN)
	require.NoError(t, err)
	_, err = opsmigrate.Migrate(ctx, admin, nil)
	admin.Close()
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE ROLE fault_service LOGIN IN ROLE opsdesk_service`)
	require.NoError(t, err)
	serviceDSN, err = dbtest.WithDatabase(adminDSN, "opsdesk", "fault_service", "")
	require.NoError(t, err)
	return c, adminDSN, serviceDSN
}

// TestServerStopAtEveryStatement stops the server while each statement
// runs, on a cluster of its own, one case after the other.
func TestServerStopAtEveryStatement(t *testing.T) {
	t.Parallel()
	c, adminDSN, serviceDSN := faultCluster(t)
	f := newFaultDB(t, adminDSN, serviceDSN, c)
	runFaults(t, f, stop)

	t.Run("RestartUnderIdlePooledConnections", func(t *testing.T) {
		// The pool hands out a connection the restart broke, as it does
		// for one idle for less than a second (it pings only older ones).
		cfg, err := db.PoolConfig(serviceDSN, "opsdesk-fault-test")
		require.NoError(t, err)
		cfg.ConnConfig.RuntimeParams["search_path"] = ""
		cfg.MaxConns = 1
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		pool, err := db.Open(t.Context(), cfg)
		require.NoError(t, err)
		defer pool.Close()
		store := newStore(t, pool, ops.Config{Owner: "worker-2"})
		call := func(key string) error {
			_, err := ops.DoTx(t.Context(), store, ticketReq("acme", key, printer), createTicket("acme", key, printer.Title))
			return err
		}
		require.NoError(t, call("warm-up"))
		require.NoError(t, c.Restart(t.Context()))
		f.admin.Reset()
		f.service.Reset()

		err = call("after-restart")
		requireClass(t, err, ops.ErrUnavailable)
		require.Equal(t, snapshot{State: "absent"}, f.snapshot(t, toolTicket, "after-restart"))
		require.NoError(t, call("after-restart"), "the broken connection is gone from the pool")
	})
}
