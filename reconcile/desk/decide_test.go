package desk_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const toolCharge = "charge-card" // external, unknown outcome after a timeout

var tools = map[string]ops.Policy{toolCharge: {Effect: ops.EffectUnknownOutcome, Lease: time.Second}}

type charge struct {
	Amount int    `json:"amount"`
	Card   string `json:"card"`
}

type receipt struct {
	ChargeID string `json:"charge_id"`
}

func (r receipt) ResultRef() string { return r.ChargeID }

// bundle is what a test works with: a store the service uses, and people.
type bundle struct {
	ctx      context.Context
	db       *dbtest.DB
	store    *ops.Store
	operator *dbtest.Person
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d := dbtest.New(t)
	store, err := ops.New(d.Service, ops.Config{Tools: tools, Owner: "worker-1"})
	require.NoError(t, err)
	return &bundle{ctx: t.Context(), db: d, store: store, operator: dbtest.NewPerson(t, d, "operator", "*")}
}

func chargeReq(tenant, key string, amount int) ops.Request {
	return ops.Request{Identity: ops.Identity{Tenant: tenant, Tool: toolCharge, Key: key}, Version: "1",
		Intent: charge{Amount: amount, Card: "4242"}}
}

// stuck runs a charge whose provider call times out, so nobody knows
// whether it happened, and lets its lease run out (the clock moved as the
// superuser: the test does not wait a lease). It returns the record's id
// and version.
func (b *bundle) stuck(t *testing.T, tenant, key string) (int64, int64) {
	t.Helper()
	_, err := ops.DoExternal(b.ctx, b.store, chargeReq(tenant, key, 100), func(context.Context, ops.Attempt) (receipt, error) {
		return receipt{}, errors.New("provider timed out")
	})
	require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
	var id, version int64
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
UPDATE opsdesk.operations SET lease_expires_at = now() - interval '1 minute'
WHERE tenant = $1 AND tool = $2 AND key = $3 RETURNING id, version`, tenant, toolCharge, key).Scan(&id, &version))
	return id, version
}

// retry is the service retrying the charge; ran tells whether the
// provider was called.
func (b *bundle) retry(t *testing.T, tenant, key string, amount int) (out ops.Reply[receipt], ran bool, err error) {
	t.Helper()
	out, err = ops.DoExternal(b.ctx, b.store, chargeReq(tenant, key, amount), func(_ context.Context, a ops.Attempt) (receipt, error) {
		ran = true
		return receipt{ChargeID: fmt.Sprintf("ch_%s_%d", a.Key, a.Number)}, nil
	})
	return out, ran, err
}

// audit is one audit row as the superuser reads it (inspection only).
type audit struct {
	Tenant, Role, Action, Outcome     string
	DisplayName, StateBefore, Refusal *string
	StateAfter                        *string
	Forced, Override                  bool
	Seq                               int64
}

func (b *bundle) audits(t *testing.T) []audit {
	t.Helper()
	rows, err := b.db.Admin.Query(b.ctx, `
SELECT tenant, role, action, outcome, display_name, state_before, details->>'refusal', state_after, forced, override, seq
FROM opsdesk.audit ORDER BY tenant, seq`)
	require.NoError(t, err)
	defer rows.Close()
	var out []audit
	for rows.Next() {
		var a audit
		require.NoError(t, rows.Scan(&a.Tenant, &a.Role, &a.Action, &a.Outcome, &a.DisplayName, &a.StateBefore,
			&a.Refusal, &a.StateAfter, &a.Forced, &a.Override, &a.Seq))
		out = append(out, a)
	}
	require.NoError(t, rows.Err())
	return out
}

func (b *bundle) state(t *testing.T, id int64) (state string, version int64) {
	t.Helper()
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT opsdesk.view_state(o), version FROM opsdesk.operations o WHERE id = $1`, id).
		Scan(&state, &version))
	return state, version
}

// Each decision leaves the library behaving as specified.
func TestDecisionsDriveTheLibrary(t *testing.T) {
	t.Parallel()

	t.Run("CompletedReplaysTheConfirmedResult", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, v := b.stuck(t, "acme", "ord-1")
		res, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
			OperationID: id, Decision: reconcile.Completed, ExpectVersion: v, Reason: "provider dashboard shows the charge",
			ResultRef: "ch_123", Result: json.RawMessage(`{"charge_id":"ch_123"}`),
			Evidence: reconcile.Evidence{Digest: "sha256:ab", Summary: "found ch_123", Lookup: reconcile.LookupFound},
		})
		require.NoError(t, err)
		require.Equal(t, reconcile.Succeeded, res.Outcome)
		require.Equal(t, "completed", res.State)
		require.Equal(t, v+1, res.Version)
		require.Equal(t, "acme", res.Tenant)
		require.EqualValues(t, 1, res.Seq)

		out, ran, err := b.retry(t, "acme", "ord-1", 100)
		require.NoError(t, err)
		require.False(t, ran, "a confirmed effect must not run again")
		require.Equal(t, ops.Replayed, out.Disposition)
		require.Equal(t, "ch_123", out.Result.ChargeID)
		require.Equal(t, "ch_123", out.ResultRef)
	})

	t.Run("NotExecutedRunsTheNextRetryAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, v := b.stuck(t, "acme", "ord-1")
		_, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
			OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: "no charge at the provider",
			Evidence: reconcile.Evidence{Lookup: reconcile.LookupNotFound},
		})
		require.NoError(t, err)
		state, _ := b.state(t, id)
		require.Equal(t, "released", state)

		// A different intent is still a conflict.
		_, ran, err := b.retry(t, "acme", "ord-1", 999)
		require.ErrorIs(t, err, ops.ErrIntentConflict)
		require.False(t, ran)

		out, ran, err := b.retry(t, "acme", "ord-1", 100)
		require.NoError(t, err)
		require.True(t, ran, "the released effect runs again")
		require.Equal(t, ops.Created, out.Disposition)
		require.Equal(t, 2, out.Attempt)
	})

	t.Run("FailedReplaysTheRejection", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, v := b.stuck(t, "acme", "ord-1")
		_, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
			OperationID: id, Decision: reconcile.Failed, ExpectVersion: v, Reason: "card blocked",
			Result: json.RawMessage(`{"error":"card blocked"}`),
		})
		require.NoError(t, err)
		_, ran, err := b.retry(t, "acme", "ord-1", 100)
		require.False(t, ran)
		var rej *ops.RejectedError
		require.ErrorAs(t, err, &rej)
		require.True(t, rej.Replayed)
		require.JSONEq(t, `{"error":"card blocked"}`, string(rej.Payload))
	})

	t.Run("DeferChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, v := b.stuck(t, "acme", "ord-1")
		res, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
			OperationID: id, Decision: reconcile.Defer, ExpectVersion: v, Reason: "asked the provider, answer tomorrow",
			SnoozeUntil: time.Now().Add(time.Hour),
		})
		require.NoError(t, err)
		require.Equal(t, "stuck", res.State)
		require.Equal(t, v, res.Version)
		_, _, err = b.retry(t, "acme", "ord-1", 100)
		require.ErrorIs(t, err, ops.ErrNeedsReconciliation)
	})

	t.Run("ZombieCompletionIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A worker is still in the provider call when the operator,
		// forcing over its live lease, confirms the effect did not happen.
		entered, decided := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := ops.DoExternal(b.ctx, b.store, chargeReq("acme", "ord-1", 100), func(context.Context, ops.Attempt) (receipt, error) {
				close(entered)
				<-decided
				return receipt{ChargeID: "ch_zombie"}, nil
			})
			done <- err
		}()
		<-entered
		var id, v int64
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT id, version FROM opsdesk.operations WHERE key = 'ord-1'`).Scan(&id, &v))
		_, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
			OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: "worker hung; provider has nothing", Force: true,
		})
		require.NoError(t, err)
		close(decided)
		require.ErrorIs(t, <-done, ops.ErrLostOwnership)
		state, _ := b.state(t, id)
		require.Equal(t, "released", state, "the zombie's completion must not overwrite the decision")
		require.True(t, b.audits(t)[0].Forced)
	})
}

// Every guard refuses, audits the refusal, and changes nothing.
func TestGuards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-1")
	base := reconcile.DecideParams{OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: "checked"}
	for _, tc := range []struct {
		name    string
		change  func(p *reconcile.DecideParams)
		want    error
		outcome reconcile.AuditOutcome
	}{
		{"ReasonRequired", func(p *reconcile.DecideParams) { p.Reason = "  " }, reconcile.ErrInvalid, reconcile.FailedOut},
		// Version 0 is no version (invalid): a version the record no longer
		// (or never) had is a change.
		{"ChangedSinceYouLooked", func(p *reconcile.DecideParams) { p.ExpectVersion = v + 1 }, reconcile.ErrChanged, reconcile.FailedOut},
		{"LookupContradicts", func(p *reconcile.DecideParams) { p.Evidence.Lookup = reconcile.LookupFound }, reconcile.ErrContradictsLookup, reconcile.Denied},
		{"CompletedNeedsAReference", func(p *reconcile.DecideParams) { p.Decision = reconcile.Completed }, reconcile.ErrInvalid, reconcile.FailedOut},
		{"UnknownDecision", func(p *reconcile.DecideParams) { p.Decision = "maybe" }, reconcile.ErrInvalid, reconcile.FailedOut},
		{"DeferNeedsAFutureTime", func(p *reconcile.DecideParams) { p.Decision = reconcile.Defer }, reconcile.ErrInvalid, reconcile.FailedOut},
		{"NoSuchRecord", func(p *reconcile.DecideParams) { p.OperationID = id + 1000 }, reconcile.ErrNotFound, reconcile.FailedOut},
	} {
		p := base
		tc.change(&p)
		res, err := desk.Decide(b.ctx, b.operator.Pool, p)
		require.ErrorIs(t, err, tc.want, tc.name)
		var refused *reconcile.RefusedError
		require.ErrorAs(t, err, &refused, tc.name)
		require.Equal(t, tc.outcome, res.Outcome, tc.name)
		require.NotZero(t, res.Seq, "%s: the refusal is audited", tc.name)
	}
	state, version := b.state(t, id)
	require.Equal(t, "stuck", state)
	require.Equal(t, v, version)
	audits := b.audits(t)
	require.Len(t, audits, 7)
	for _, a := range audits {
		require.NotEqual(t, "succeeded", a.Outcome)
		require.Equal(t, b.operator.Role, a.Role)
	}
	require.Equal(t, "", audits[0].Tenant, "a refusal on an unknown record goes to the '' chain")

	// The override is explicit and recorded.
	res, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: "lookup is stale: the provider refunded",
		Evidence: reconcile.Evidence{Lookup: reconcile.LookupFound}, Override: true,
	})
	require.NoError(t, err)
	audits = b.audits(t)
	last := audits[len(audits)-1]
	require.Equal(t, res.Seq, last.Seq)
	require.True(t, last.Override)
	require.Equal(t, "succeeded", last.Outcome)

	// Nothing left to decide.
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.Failed, ExpectVersion: res.Version, Reason: "again",
	})
	require.ErrorIs(t, err, reconcile.ErrNotPending)
}

func TestLiveLeaseNeedsForce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-1")
	_, err := b.db.Admin.Exec(b.ctx, `UPDATE opsdesk.operations SET lease_expires_at = now() + interval '1 hour' WHERE id = $1`, id)
	require.NoError(t, err)
	p := reconcile.DecideParams{OperationID: id, Decision: reconcile.Completed, ExpectVersion: v, Reason: "seen at provider", ResultRef: "ch_1"}
	res, err := desk.Decide(b.ctx, b.operator.Pool, p)
	require.ErrorIs(t, err, reconcile.ErrLeaseLive)
	require.Equal(t, reconcile.Denied, res.Outcome)
	require.Contains(t, res.Message, "held by worker-1")

	p.Force = true
	_, err = desk.Decide(b.ctx, b.operator.Pool, p)
	require.NoError(t, err)
	audits := b.audits(t)
	require.False(t, audits[0].Forced)
	require.True(t, audits[1].Forced)
	require.Equal(t, "pending", *audits[1].StateBefore)
	require.Equal(t, "completed", *audits[1].StateAfter)
}

// Two operators decide the same record at once: one wins, the other is
// told it changed, and there is one audit record of success.
func TestConcurrentDecisionsOnOneRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := dbtest.NewPerson(t, b.db, "operator", "*")
	id, v := b.stuck(t, "acme", "ord-1")
	errs := make(chan error, 2)
	var start sync.WaitGroup
	start.Add(1)
	for i, p := range []*dbtest.Person{b.operator, other} {
		go func() {
			start.Wait()
			_, err := desk.Decide(b.ctx, p.Pool, reconcile.DecideParams{
				OperationID: id, Decision: []reconcile.Decision{reconcile.NotExecuted, reconcile.Failed}[i],
				ExpectVersion: v, Reason: "racing"})
			errs <- err
		}()
	}
	start.Done()
	var won, changed int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			won++
		case errors.Is(err, reconcile.ErrChanged):
			changed++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 1, won)
	require.Equal(t, 1, changed)
	var successes int
	for _, a := range b.audits(t) {
		if a.Outcome == "succeeded" {
			successes++
		}
	}
	require.Equal(t, 1, successes)
}

// 50 deciders making 20 decisions each on one tenant: the chain has no gap
// and every hash links and recomputes.
func TestManyConcurrentDecidersKeepOneChain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const deciders, each = 50, 20
	// Stuck records, made as fixtures: 1,000 library calls would only
	// slow the test down.
	_, err := b.db.Admin.Exec(b.ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT 'acme', 'charge-card', 'ord-' || i, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM generate_series(1, $1) i`, deciders*each)
	require.NoError(t, err)
	people := make([]*dbtest.Person, 5)
	for i := range people {
		people[i] = dbtest.NewPerson(t, b.db, "operator", "acme")
	}
	var wg sync.WaitGroup
	errs := make(chan error, deciders*each)
	for d := range deciders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool := people[d%len(people)].Pool
			for i := range each {
				n := d*each + i + 1
				var id, v int64
				if err := pool.QueryRow(b.ctx, `SELECT id, version FROM opsdesk.operations WHERE key = $1`, fmt.Sprintf("ord-%d", n)).Scan(&id, &v); err != nil {
					errs <- err
					return
				}
				p := reconcile.DecideParams{OperationID: id, ExpectVersion: v, Reason: "bulk review",
					Decision: reconcile.Decisions[n%len(reconcile.Decisions)], ResultRef: "ch", SnoozeUntil: time.Now().Add(time.Hour)}
				if _, err := desk.Decide(b.ctx, pool, p); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var n, maxSeq, badHash, badLink int64
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT count(*), max((s.a).seq),
    count(*) FILTER (WHERE opsdesk.audit_hash(s.a) <> (s.a).hash),
    count(*) FILTER (WHERE (s.a).prev_hash IS DISTINCT FROM s.prev)
FROM (SELECT a, lag(a.hash) OVER (ORDER BY a.seq) AS prev FROM opsdesk.audit a WHERE a.tenant = 'acme') s`).
		Scan(&n, &maxSeq, &badHash, &badLink))
	require.EqualValues(t, deciders*each, n)
	require.Equal(t, n, maxSeq, "the sequence has a gap")
	require.Zero(t, badHash)
	require.Zero(t, badLink)
}

// People reach the tables only through the functions, and the audit trail
// refuses change even to its owner.
func TestTablesRefuseDirectWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-1")
	_, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.Defer, ExpectVersion: v, Reason: "later", SnoozeUntil: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	for _, p := range []*dbtest.Person{b.operator, admin} {
		for _, sql := range []string{
			`UPDATE opsdesk.operations SET state = 'released'`,
			`DELETE FROM opsdesk.operations`,
			`TRUNCATE opsdesk.operations`,
			`INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state) VALUES ('a', 'b', 'c', '1', '\x00', 'local', 'released')`,
			`UPDATE opsdesk.conflicts SET reviewed_at = now(), reviewed_by = 'me'`,
			`UPDATE opsdesk.audit SET reason = 'nothing to see'`,
			`DELETE FROM opsdesk.audit`,
			`TRUNCATE opsdesk.audit`,
			`INSERT INTO opsdesk.audit SELECT * FROM opsdesk.audit`,
			`UPDATE opsdesk.audit_heads SET seq = 0`,
			`SELECT opsdesk.audit_append(NULL::opsdesk.audit)`,
		} {
			_, err := p.Pool.Exec(b.ctx, sql)
			requireCode(t, err, "42501", sql)
		}
	}
	// The table owner (here the superuser) is stopped by the triggers,
	// even with replication's trigger setting.
	for _, sql := range []string{
		`UPDATE opsdesk.audit SET reason = 'nothing to see'`,
		`DELETE FROM opsdesk.audit`,
		`TRUNCATE opsdesk.audit`,
		`SET LOCAL session_replication_role = replica; UPDATE opsdesk.audit SET reason = 'nothing to see'`,
		`SET LOCAL session_replication_role = replica; DELETE FROM opsdesk.audit`,
	} {
		tx, err := b.db.Admin.Begin(b.ctx)
		require.NoError(t, err)
		_, err = tx.Exec(b.ctx, sql)
		requireCode(t, err, "42501", sql)
		require.Contains(t, err.Error(), "append-only")
		require.NoError(t, tx.Rollback(b.ctx))
	}
	require.Len(t, b.audits(t), 1)
}

func requireCode(t *testing.T, err error, code, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, what)
	require.Equal(t, code, pgErr.Code, "%s: %s", what, pgErr.Message)
}

// A decision whose audit record cannot be written changes nothing.
func TestDecisionWithoutAuditChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-1")
	// The superuser makes one reason unwritable to the audit trail: the
	// queue, where the decision's transaction writes its entry.
	_, err := b.db.Admin.Exec(b.ctx, `ALTER TABLE opsdesk.audit_queue ADD CONSTRAINT test_refuse CHECK (reason <> 'the audit refuses this')`)
	require.NoError(t, err)
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: "the audit refuses this"})
	requireCode(t, err, "23514", "audit check constraint")
	state, version := b.state(t, id)
	require.Equal(t, "stuck", state)
	require.Equal(t, v, version)
	require.Empty(t, b.audits(t))
}

// Text too long for the audit trail is refused, and the refusal is
// audited with the text cut short.
func TestOverlongTextIsRefusedAndAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-1")
	long := strings.Repeat("é", 1001) // 2002 bytes
	_, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: long})
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: "ok",
		Evidence: reconcile.Evidence{Summary: long}})
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	_, err = desk.AckConflicts(b.ctx, b.operator.Pool, id, nil, long, "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	_, _, err = desk.Reveal(b.ctx, b.operator.Pool, id, reconcile.FieldResult, long, "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	var n, cut int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT count(*), count(*) FILTER (WHERE reason LIKE '%… (cut)' OR evidence_summary LIKE '%… (cut)')
FROM opsdesk.audit WHERE outcome = 'failed'`).Scan(&n, &cut))
	require.Equal(t, 4, n)
	require.Equal(t, 4, cut)
	state, _ := b.state(t, id)
	require.Equal(t, "stuck", state)
}

func TestViewerMayNeitherDecideNorReveal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	viewer := dbtest.NewPerson(t, b.db, "viewer", "*")
	id, v := b.stuck(t, "acme", "ord-1")
	_, err := desk.Decide(b.ctx, viewer.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: "let me"})
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	_, err = desk.AckConflicts(b.ctx, viewer.Pool, id, nil, "seen", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	_, _, err = desk.Reveal(b.ctx, viewer.Pool, id, reconcile.FieldResult, "curious", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	// Nor read stored results directly.
	_, err = viewer.Pool.Exec(b.ctx, `SELECT result FROM opsdesk.operations`)
	requireCode(t, err, "42501", "viewer reads results")
	// It reads states.
	var n int
	require.NoError(t, viewer.Pool.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.operations WHERE state = 'pending'`).Scan(&n))
	require.Equal(t, 1, n)
	audits := b.audits(t)
	require.Len(t, audits, 3)
	for _, a := range audits {
		require.Equal(t, "denied", a.Outcome)
		require.Equal(t, viewer.Role, a.Role)
	}
	state, version := b.state(t, id)
	require.Equal(t, "stuck", state)
	require.Equal(t, v, version)
}

func TestRevealIsAuditedBeforeItIsShown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-1")
	_, _, err := desk.Reveal(b.ctx, b.operator.Pool, id, reconcile.FieldResult, "what did it return?", "")
	require.ErrorIs(t, err, reconcile.ErrNoValue)
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.Completed, ExpectVersion: v, Reason: "seen", ResultRef: "ch_9",
		Result: json.RawMessage(`{"charge_id":"ch_9"}`)})
	require.NoError(t, err)
	_, _, err = desk.Reveal(b.ctx, b.operator.Pool, id, reconcile.FieldResult, "", "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	value, res, err := desk.Reveal(b.ctx, b.operator.Pool, id, reconcile.FieldResult, "customer asks for the charge id", "Alice")
	require.NoError(t, err)
	require.JSONEq(t, `{"charge_id":"ch_9"}`, string(value))
	audits := b.audits(t)
	last := audits[len(audits)-1]
	require.Equal(t, res.Seq, last.Seq)
	require.Equal(t, "reveal:result", last.Action)
	require.Equal(t, "succeeded", last.Outcome)
	require.Equal(t, "Alice", *last.DisplayName)

	// The intent the library stored: the canonical request.
	value, _, err = desk.Reveal(b.ctx, b.operator.Pool, id, reconcile.FieldIntent, "which card?", "")
	require.NoError(t, err)
	require.JSONEq(t, `{"intent":{"amount":100,"card":"4242"},"tool":"charge-card","version":"1"}`, string(value))
	audits = b.audits(t)
	require.Equal(t, "reveal:intent", audits[len(audits)-1].Action)
	_, _, err = desk.Reveal(b.ctx, b.operator.Pool, id, "fingerprint", "curious", "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)
}

// largeResult has the library complete a charge of acme's whose stored
// result is 4 MiB of two-byte characters after 15 bytes ({"charge_id":"x),
// so that a cut can fall inside one. (32 MiB took more than the library's
// 15 s write timeout to encode and send under the race detector on a
// loaded machine; the size makes no difference to what is tested.)
func largeResult(t *testing.T, b *bundle) (ops.Reply[receipt], receipt) {
	t.Helper()
	big, err := ops.New(b.db.Service, ops.Config{Tools: tools, Owner: "worker-big", MaxResultBytes: 8 << 20})
	require.NoError(t, err)
	huge := receipt{ChargeID: "x" + strings.Repeat("é", 2<<20)}
	out, err := ops.DoExternal(b.ctx, big, chargeReq("acme", "ord-big", 100), func(context.Context, ops.Attempt) (receipt, error) {
		return huge, nil
	})
	require.NoError(t, err)
	require.Nil(t, out.NotStored)
	return out, huge
}

// TestRevealStartOfALargeValue: a screen's reveal fetches the start of a
// value of any size and its size, cut by the database at a character
// boundary, and is audited like any reveal.
func TestRevealStartOfALargeValue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out, _ := largeResult(t, b)

	// 15 bytes of {"charge_id":"x then é: the limit falls inside one.
	const limit = 64 << 10
	got, res, err := desk.RevealStart(b.ctx, b.operator.Pool, out.OperationID, reconcile.FieldResult, "how large is it?", "", limit)
	require.NoError(t, err)
	require.True(t, got.Truncated())
	require.Equal(t, int64(len(`{"charge_id":"x"}`)+4<<20), got.Size, "the stored text, whole")
	require.Equal(t, limit-1, len(got.Text), "cut before the character the limit splits")
	require.True(t, utf8.Valid(got.Text))
	require.True(t, strings.HasPrefix(string(got.Text), `{"charge_id":"xéé`), "as the library stored it")
	audits := b.audits(t)
	require.Equal(t, res.Seq, audits[len(audits)-1].Seq)
	require.Equal(t, "reveal:result", audits[len(audits)-1].Action)

	// A small value comes whole; no stored value is no text.
	got, _, err = desk.RevealStart(b.ctx, b.operator.Pool, out.OperationID, reconcile.FieldIntent, "which card?", "", limit)
	require.NoError(t, err)
	require.False(t, got.Truncated())
	require.Equal(t, `{"intent":{"amount":100,"card":"4242"},"tool":"charge-card","version":"1"}`, string(got.Text),
		"the canonical request exactly as fingerprinted")
	req := chargeReq("acme", "ord-big", 100)
	_, fp, err := ops.Canonical(req.Tool, req.Version, req.Intent)
	require.NoError(t, err)
	require.Equal(t, fp, ops.Fingerprint(sha256.Sum256(got.Text)), "the revealed intent hashes to the record's fingerprint")
	id, _ := b.stuck(t, "acme", "ord-none")
	_, _, err = desk.RevealStart(b.ctx, b.operator.Pool, id, reconcile.FieldResult, "anything?", "", limit)
	require.ErrorIs(t, err, reconcile.ErrNoValue)
}

// TestRevealToStreamsALargeValue: a command's reveal writes the value as
// the database reads it out, in slices that each end on a character
// boundary, never holding it whole, and is audited like any reveal.
func TestRevealToStreamsALargeValue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The slices' ends fall inside characters.
	out, huge := largeResult(t, b)

	var w slicesWriter
	res, err := desk.RevealTo(b.ctx, b.operator.Pool, out.OperationID, reconcile.FieldResult, "the whole receipt", "", &w)
	require.NoError(t, err)
	require.Equal(t, `{"charge_id":"`+huge.ChargeID+`"}`, w.text.String(), "the stored text, exactly")
	require.GreaterOrEqual(t, len(w.sizes), 4, "in slices")
	for i, n := range w.sizes {
		require.LessOrEqual(t, n, 1<<20+utf8.UTFMax, "slice %d", i)
	}
	require.Equal(t, w.text.Len(), w.valid, "every slice ends on a character boundary")
	audits := b.audits(t)
	require.Equal(t, res.Seq, audits[len(audits)-1].Seq)
	require.Equal(t, "reveal:result", audits[len(audits)-1].Action)

	id, _ := b.stuck(t, "acme", "ord-none")
	w = slicesWriter{}
	_, err = desk.RevealTo(b.ctx, b.operator.Pool, id, reconcile.FieldResult, "anything?", "", &w)
	require.ErrorIs(t, err, reconcile.ErrNoValue)
	require.Zero(t, w.text.Len())
}

// slicesWriter keeps what is written to it, how much each write was, and
// how many bytes came in writes of whole characters.
type slicesWriter struct {
	text  strings.Builder
	sizes []int
	valid int
}

func (w *slicesWriter) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	if utf8.Valid(p) {
		w.valid += len(p)
	}
	return w.text.Write(p)
}

// A tenant-scoped operator neither sees nor decides another tenant's
// records; a claimed display name does not replace the role.
func TestTenantScopedOperator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acmeID, acmeV := b.stuck(t, "acme", "ord-1")
	globexID, globexV := b.stuck(t, "globex", "ord-1")
	scoped := dbtest.NewPerson(t, b.db, "operator", "acme")

	rows, err := scoped.Pool.Query(b.ctx, `SELECT tenant FROM opsdesk.operations`)
	require.NoError(t, err)
	var tenants []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		tenants = append(tenants, s)
	}
	require.Equal(t, []string{"acme"}, tenants)

	_, err = desk.Decide(b.ctx, scoped.Pool, reconcile.DecideParams{
		OperationID: globexID, Decision: reconcile.NotExecuted, ExpectVersion: globexV, Reason: "not mine"})
	require.ErrorIs(t, err, reconcile.ErrNotFound)
	state, _ := b.state(t, globexID)
	require.Equal(t, "stuck", state)

	res, err := desk.Decide(b.ctx, scoped.Pool, reconcile.DecideParams{
		OperationID: acmeID, Decision: reconcile.NotExecuted, ExpectVersion: acmeV, Reason: "mine",
		DisplayName: b.operator.Role})
	require.NoError(t, err)
	require.Equal(t, "acme", res.Tenant)
	var role, name string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT role, display_name FROM opsdesk.audit WHERE tenant = 'acme' AND seq = $1`, res.Seq).
		Scan(&role, &name))
	require.Equal(t, scoped.Role, role, "the authenticated role, not the claimed name")
	require.Equal(t, b.operator.Role, name)

	// The scoped operator sees its tenant's audit only.
	var chains []string
	rows, err = scoped.Pool.Query(b.ctx, `SELECT DISTINCT tenant FROM opsdesk.audit ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		chains = append(chains, s)
	}
	require.Equal(t, []string{"acme"}, chains)
}

func TestAckConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, _ := b.stuck(t, "acme", "ord-1")
	_, _, err := b.retry(t, "acme", "ord-1", 500) // another intent: a conflict
	require.ErrorIs(t, err, ops.ErrIntentConflict)
	var seen int64
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT id FROM opsdesk.conflicts`).Scan(&seen))
	// Another arrives after the operator looked: it stays unreviewed.
	_, _, err = b.retry(t, "acme", "ord-1", 600)
	require.ErrorIs(t, err, ops.ErrIntentConflict)
	res, err := desk.AckConflicts(b.ctx, b.operator.Pool, id, []int64{seen}, "caller bug, fixed in v2", "")
	require.NoError(t, err)
	require.Equal(t, reconcile.Succeeded, res.Outcome)
	rows, err := b.db.Admin.Query(b.ctx, `SELECT coalesce(reviewed_by, '') FROM opsdesk.conflicts ORDER BY id`)
	require.NoError(t, err)
	reviewers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{b.operator.Role, ""}, reviewers, "only the conflict the operator saw")
	_, err = desk.AckConflicts(b.ctx, b.operator.Pool, id, []int64{seen}, "again", "")
	require.ErrorIs(t, err, reconcile.ErrNoConflicts)
}

func TestGrantAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	newcomer := dbtest.NewPerson(t, b.db, "")
	id, v := b.stuck(t, "acme", "ord-1")

	// Nobody yet: the newcomer cannot even read.
	_, err := newcomer.Pool.Exec(b.ctx, `SELECT id FROM opsdesk.operations`)
	requireCode(t, err, "42501", "a role without access reads")

	// An operator may not grant.
	_, err = desk.GrantAccess(b.ctx, b.operator.Pool, newcomer.Role, "admin", "*", "promote myself", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	_, err = desk.GrantAccess(b.ctx, admin.Pool, "no_such_role_here", "operator", "acme", "typo", "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)

	_, err = desk.GrantAccess(b.ctx, admin.Pool, newcomer.Role, "operator", "acme", "joins on-call", "")
	require.NoError(t, err)
	_, err = desk.Decide(b.ctx, newcomer.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.Defer, ExpectVersion: v, Reason: "first look", SnoozeUntil: time.Now().Add(time.Hour)})
	require.NoError(t, err)

	// Down to viewer: no more decisions.
	_, err = desk.GrantAccess(b.ctx, admin.Pool, newcomer.Role, "viewer", "acme", "left on-call", "")
	require.NoError(t, err)
	_, err = desk.Decide(b.ctx, newcomer.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.Defer, ExpectVersion: v, Reason: "again", SnoozeUntil: time.Now().Add(time.Hour)})
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)

	// Revoked: nothing visible.
	_, err = desk.GrantAccess(b.ctx, admin.Pool, newcomer.Role, "", "", "left the team", "")
	require.NoError(t, err)
	_, err = newcomer.Pool.Exec(b.ctx, `SELECT id FROM opsdesk.operations`)
	requireCode(t, err, "42501", "a revoked role reads")

	var grants int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.audit WHERE tenant = '' AND action LIKE 'access:%'`).Scan(&grants))
	require.Equal(t, 5, grants)
}

// The database, not the client, makes the audit record commit before a
// revealed value is seen: a client that rolls back sees nothing.
func TestRevealNeedsACommittedAudit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, _ := b.stuck(t, "acme", "ord-1")
	// The request in the fetch's own transaction, plainly or inside a
	// released savepoint: either way it has not committed.
	for _, savepoint := range []bool{false, true} {
		tx, err := b.operator.Pool.Begin(b.ctx)
		require.NoError(t, err)
		if savepoint {
			_, err = tx.Exec(b.ctx, `SAVEPOINT s`)
			require.NoError(t, err)
		}
		var tenant string
		var entry int64
		require.NoError(t, tx.QueryRow(b.ctx, `SELECT tenant, entry FROM opsdesk.reveal_request($1, 'intent', 'peek')`, id).
			Scan(&tenant, &entry))
		if savepoint {
			_, err = tx.Exec(b.ctx, `RELEASE SAVEPOINT s`)
			require.NoError(t, err)
		}
		var value []byte
		err = tx.QueryRow(b.ctx, `SELECT opsdesk.reveal_fetch($1, $2)`, tenant, entry).Scan(&value)
		requireCode(t, err, "25000", fmt.Sprintf("fetch in the request's transaction (savepoint %v)", savepoint))
		require.Nil(t, value)
		require.NoError(t, tx.Rollback(b.ctx))
	}
	require.Empty(t, b.audits(t), "nothing committed, nothing seen")

	// Committed, it may be fetched by its requester only.
	value, res, err := desk.Reveal(b.ctx, b.operator.Pool, id, reconcile.FieldIntent, "which card", "")
	require.NoError(t, err)
	require.Contains(t, string(value), "4242")
	other := dbtest.NewPerson(t, b.db, "operator", "*")
	var stolen []byte
	err = other.Pool.QueryRow(b.ctx, `SELECT opsdesk.reveal_fetch($1, $2)`, res.Tenant, res.Entry).Scan(&stolen)
	requireCode(t, err, "42501", "another person fetches")
	require.Nil(t, stolen)
}

// A viewer's refused decision does not hold the record: the service's
// writes go on while the viewer's transaction stays open.
func TestViewerDoesNotLockRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	viewer := dbtest.NewPerson(t, b.db, "viewer", "*")
	id, v := b.stuck(t, "acme", "ord-1")
	tx, err := viewer.Pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.WithoutCancel(b.ctx)) //nolint:errcheck
	var outcome string
	require.NoError(t, tx.QueryRow(b.ctx, `SELECT outcome FROM opsdesk.decide(p_id => $1, p_decision => 'completed',
p_expect_version => $2, p_reason => 'x', p_result_ref => 'r')`, id, v).Scan(&outcome))
	require.Equal(t, "denied", outcome)
	// The service writes the record meanwhile: with a viewer's lock it
	// would wait past its lock timeout.
	_, err = b.db.Service.Exec(b.ctx, `SET lock_timeout = '1s'; UPDATE opsdesk.operations SET lease_expires_at = lease_expires_at WHERE id = `+fmt.Sprint(id))
	require.NoError(t, err, "the service's write waited on the viewer's transaction")
}

// People's access goes to one person's login role only.
func TestGrantAccessRefusesNonPeople(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	var service, superuser string
	require.NoError(t, b.db.Service.QueryRow(b.ctx, `SELECT session_user`).Scan(&service))
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT session_user`).Scan(&superuser))
	for _, role := range []string{service, "opsdesk_operator", superuser} {
		_, err := desk.GrantAccess(b.ctx, admin.Pool, role, "operator", "*", "why not", "")
		require.ErrorIs(t, err, reconcile.ErrInvalid, role)
	}
}

// Audit times are the decisions' own (the clock when the function ran, not
// the transaction's start), and rise with the sequence when they commit in
// that order; a decision's audit keeps the digest of the result it stored;
// refusals of text in 4-byte characters are audited too.
func TestAuditRecordsTimeResultAndLongText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, fv := b.stuck(t, "acme", "ord-1")
	second, sv := b.stuck(t, "acme", "ord-2")
	slow, err := b.operator.Pool.Begin(b.ctx)
	require.NoError(t, err)
	defer slow.Rollback(context.WithoutCancel(b.ctx)) //nolint:errcheck
	_, err = slow.Exec(b.ctx, `SELECT now()`)         // the transaction's now() is fixed here
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: second, Decision: reconcile.Completed,
		ExpectVersion: sv, Reason: "seen", ResultRef: "ch_2", Result: json.RawMessage(`{"charge_id":"ch_2"}`)})
	require.NoError(t, err)
	_, err = slow.Exec(b.ctx, `SELECT * FROM opsdesk.decide(p_id => $1, p_decision => 'not-executed', p_expect_version => $2, p_reason => 'late')`, first, fv)
	require.NoError(t, err)
	require.NoError(t, slow.Commit(b.ctx))
	_, err = auditlog.Seal(b.ctx, b.operator.Pool, "", 0)
	require.NoError(t, err)
	var ordered bool
	var digest string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT bool_and(at >= prev), (SELECT details->>'result_sha256' FROM opsdesk.audit WHERE tenant = 'acme' AND seq = 1)
FROM (SELECT at, lag(at) OVER (ORDER BY seq) AS prev FROM opsdesk.audit WHERE tenant = 'acme') s WHERE prev IS NOT NULL`).
		Scan(&ordered, &digest))
	require.True(t, ordered, "a later sequence has an earlier time")
	sum := sha256.Sum256([]byte(`{"charge_id": "ch_2"}`)) // jsonb's text form
	require.Equal(t, hex.EncodeToString(sum[:]), digest)

	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: first, Decision: reconcile.Failed,
		ExpectVersion: fv + 1, Reason: strings.Repeat("😀", 600)})
	require.ErrorIs(t, err, reconcile.ErrInvalid)
}

// Capabilities say what the database would allow: purging needs an admin
// of every tenant, which the purge functions check too.
func TestCapabilities(t *testing.T) {
	d := dbtest.New(t)
	for _, c := range []struct {
		level, tenant string
		want          reconcile.Capabilities
	}{
		{"viewer", "*", reconcile.Capabilities{}},
		{"operator", "*", reconcile.Capabilities{Decide: true}},
		{"admin", "acme", reconcile.Capabilities{Decide: true, Grant: true}},
		{"admin", "*", reconcile.Capabilities{Decide: true, Grant: true, Purge: true}},
	} {
		p := dbtest.NewPerson(t, d, c.level, c.tenant)
		got, err := (&desk.Desk{Pool: p.Pool}).Capabilities(t.Context())
		require.NoError(t, err)
		c.want.Role = p.Role
		require.Equal(t, c.want, got, "%s of %s", c.level, c.tenant)
	}
}

// A snooze asked as a length (SnoozeFor) runs from the decision's own
// time on the database clock, not from when the record was read: a
// person who read it ten minutes before confirming gets the whole snooze.
// A negative length is refused, as a past time is.
func TestSnoozeForRunsFromTheDecision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-snooze")
	_, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.Defer, ExpectVersion: v, Reason: "provider answers later", SnoozeFor: 2 * time.Hour})
	require.NoError(t, err)
	var gap time.Duration
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT (details->>'snooze_until')::timestamptz - (at + interval '2 hours') FROM opsdesk.audit
WHERE operation_id = $1 AND action = 'decide:defer' AND outcome = 'succeeded'`, id).Scan(&gap))
	require.Less(t, gap.Abs(), time.Second, "the snooze ends two hours after the decision, off by %v", gap)

	id2, v2 := b.stuck(t, "acme", "ord-snooze-negative")
	_, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id2, Decision: reconcile.Defer, ExpectVersion: v2, Reason: "a past reminder", SnoozeFor: -time.Hour})
	var refused *reconcile.RefusedError
	require.ErrorAs(t, err, &refused)
}
