package ops_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
)

type emailIntent struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

type chargeIntent struct {
	Customer    string `json:"customer"`
	AmountCents int    `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// receipt is what the fake provider answers: its reference for the effect.
type receipt struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
}

func (r receipt) ResultRef() string { return r.ID }

var (
	diskFull = emailIntent{To: "oncall@acme.example", Subject: "Disk full on db-1"}
	invoice  = chargeIntent{Customer: "cus_42", AmountCents: 1999, Currency: "EUR"}
)

func externalReq(tool, key string, intent any) ops.Request {
	return ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: tool, Key: key}, Version: "1", Intent: intent}
}

func emailReq(key string) ops.Request  { return externalReq(toolEmail, key, diskFull) }
func chargeReq(key string) ops.Request { return externalReq(toolCharge, key, invoice) }

// provider is a fake external provider. It counts the calls it receives per
// idempotency key, as a real one's deduplication table would see them.
type provider struct {
	mu    sync.Mutex
	calls map[string][]ops.Attempt
}

func newProvider() *provider { return &provider{calls: map[string][]ops.Attempt{}} }

// record notes a call and returns the receipt the provider would answer.
func (p *provider) record(a ops.Attempt) receipt {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[a.Key] = append(p.calls[a.Key], a)
	return receipt{ID: fmt.Sprintf("ref-%s-%d", a.Key, a.Number), Attempt: a.Number}
}

// send is a provider call that succeeds.
func (p *provider) send(_ context.Context, a ops.Attempt) (receipt, error) { return p.record(a), nil }

// failWith is a provider call that fails with err.
func (p *provider) failWith(err error) func(context.Context, ops.Attempt) (receipt, error) {
	return func(_ context.Context, a ops.Attempt) (receipt, error) {
		p.record(a)
		return receipt{}, err
	}
}

func (p *provider) attempts(key string) []ops.Attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ops.Attempt(nil), p.calls[key]...)
}

// neverCalled is an operation function for attempts that must not run.
func neverCalled[R any](t *testing.T) func(context.Context, ops.Attempt) (R, error) {
	return func(context.Context, ops.Attempt) (R, error) {
		var zero R
		t.Error("the provider was called, but this attempt must not run")
		return zero, errors.New("must not be called")
	}
}

type externalResult struct {
	out ops.Reply[receipt]
	err error
}

// receive waits for a background call's answer, failing rather than
// hanging when it never comes.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

func TestDoExternal(t *testing.T) {
	t.Parallel()

	t.Run("CreatedThenReplayed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tool := range []string{toolEmail, toolCharge} {
			p := newProvider()
			key := "k-" + tool
			req := externalReq(tool, key, map[string]string{"note": "first contact"})

			first, err := ops.DoExternal(b.ctx, b.store, req, p.send)
			require.NoError(t, err, tool)
			require.Equal(t, ops.Created, first.Disposition, tool)
			require.Equal(t, 1, first.Attempt, tool)
			require.Equal(t, "ref-"+key+"-1", first.Result.ID, tool)

			second, err := ops.DoExternal(b.ctx, b.store, req, p.send)
			require.NoError(t, err, tool)
			require.Equal(t, ops.Replayed, second.Disposition, tool)
			require.Equal(t, first.Result, second.Result, tool)
			require.Equal(t, first.OperationID, second.OperationID, tool)
			require.Equal(t, 1, second.Attempt, tool)

			calls := p.attempts(key)
			require.Len(t, calls, 1, "%s: the provider is called exactly once", tool)
			require.Equal(t, ops.Attempt{
				Identity:    ops.Identity{Tenant: "acme", Tool: tool, Key: key},
				OperationID: first.OperationID,
				Number:      1,
			}, calls[0], tool)

			rec := b.lookup(t, tool, "acme", key)
			require.Equal(t, ops.StateCompleted, rec.State, tool)
			require.Equal(t, ops.OutcomeSucceeded, rec.Outcome, tool)
			require.Equal(t, testTools[tool].Effect, rec.Effect, tool)
			require.Equal(t, first.Result.ResultRef(), rec.ResultRef, tool)
			require.Equal(t, 1, rec.Attempt, tool)
			require.Equal(t, "worker-1", rec.Owner, tool)
			require.Equal(t, first.OperationID, rec.ID, tool)
		}
	})

	t.Run("NotAppliedReleasesForTheSameIntentOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newProvider()
		const key = "k-declined"
		declined := errors.New("provider: mailbox over quota, nothing was sent")

		_, err := ops.DoExternal(b.ctx, b.store, emailReq(key), p.failWith(ops.NotApplied(declined)))
		require.ErrorIs(t, err, ops.ErrNotApplied)
		require.ErrorIs(t, err, declined)
		rec := b.lookup(t, toolEmail, "acme", key)
		require.Equal(t, ops.StateReleased, rec.State)
		require.Empty(t, rec.Outcome)
		require.Equal(t, 1, rec.Attempt)

		// A different intent under the released key is still a conflict,
		// and leaves the record released.
		other := externalReq(toolEmail, key, emailIntent{To: diskFull.To, Subject: "Disk fine after all"})
		_, err = ops.DoExternal(b.ctx, b.store, other, neverCalled[receipt](t))
		require.ErrorIs(t, err, ops.ErrIntentConflict)
		var conflict *ops.IntentConflictError
		require.ErrorAs(t, err, &conflict)
		require.Equal(t, rec.ID, conflict.OperationID)
		rec = b.lookup(t, toolEmail, "acme", key)
		require.Equal(t, ops.StateReleased, rec.State)
		require.Equal(t, 1, rec.ConflictCount)

		// The same intent executes again, as attempt 2 with the same key.
		out, err := ops.DoExternal(b.ctx, b.store, emailReq(key), p.send)
		require.NoError(t, err)
		require.Equal(t, ops.Created, out.Disposition)
		require.Equal(t, 2, out.Attempt)
		require.Equal(t, rec.ID, out.OperationID)
		calls := p.attempts(key)
		require.Len(t, calls, 2)
		require.Equal(t, 2, calls[1].Number)
		require.Equal(t, calls[0].Identity, calls[1].Identity, "the provider sees the same key on every attempt")

		rec = b.lookup(t, toolEmail, "acme", key)
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, 2, rec.Attempt)
		require.Equal(t, out.Result.ResultRef(), rec.ResultRef)
	})

	t.Run("RejectionIsStoredAndReplayed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		type decline struct {
			Code string `json:"code"`
		}
		const key = "k-reject"
		calls := 0
		charge := func(context.Context, ops.Attempt) (receipt, error) {
			calls++
			return receipt{}, ops.Reject(decline{Code: "card_declined"})
		}

		_, err := ops.DoExternal(b.ctx, b.store, chargeReq(key), charge)
		require.ErrorIs(t, err, ops.ErrRejected)
		var rej *ops.RejectedError
		require.ErrorAs(t, err, &rej)
		require.False(t, rej.Replayed)

		out, err := ops.DoExternal(b.ctx, b.store, chargeReq(key), charge)
		require.ErrorIs(t, err, ops.ErrRejected)
		require.ErrorAs(t, err, &rej)
		require.True(t, rej.Replayed)
		require.Equal(t, receipt{}, out.Result, "a rejection carries no result")
		var got decline
		require.NoError(t, rej.Decode(&got))
		require.Equal(t, "card_declined", got.Code)
		require.NotContains(t, err.Error(), "card_declined", "payloads stay out of messages")
		require.Equal(t, 1, calls)

		rec := b.lookup(t, toolCharge, "acme", key)
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, ops.OutcomeRejected, rec.Outcome)
		require.Equal(t, rec.ID, rej.OperationID)
	})

	t.Run("UnknownOutcomeOnUnknownEffectWaitsForAPerson", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newProvider()
		const key = "k-timeout"
		timeout := errors.New("provider: read tcp 10.0.0.7:443: i/o timeout")

		_, err := ops.DoExternal(b.ctx, b.store, chargeReq(key), p.failWith(timeout))
		require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
		require.ErrorIs(t, err, timeout)
		var unknown *ops.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown)
		require.Equal(t, 1, unknown.Attempt)

		// Neither deleted nor failed: pending, as the attempt left it.
		rec := b.lookup(t, toolCharge, "acme", key)
		require.Equal(t, ops.StatePending, rec.State)
		require.Empty(t, rec.Outcome)
		require.Equal(t, "worker-1", rec.Owner)
		require.Equal(t, 1, rec.Attempt)
		require.Equal(t, unknown.OperationID, rec.ID)

		// fn has returned, so nobody is handling it any more: the lease
		// ended with the call, not when it would have run out. Nobody
		// knows whether the card was charged: the retry is refused, never
		// executed blindly, and never told to come back later.
		require.True(t, rec.Stuck(), "the lease ends when fn returns: it ends in %v", rec.LeaseRemaining())
		other := newStore(t, b.db.Service, ops.Config{Owner: "worker-2"})
		for _, s := range []*ops.Store{other, b.store} {
			_, err = ops.DoExternal(b.ctx, s, chargeReq(key), p.send)
			require.ErrorIs(t, err, ops.ErrNeedsReconciliation, s.Owner())
			var needs *ops.NeedsReconciliationError
			require.ErrorAs(t, err, &needs, s.Owner())
			require.Equal(t, "worker-1", needs.Owner)
			require.Equal(t, 1, needs.Attempt)
			require.Equal(t, rec.ID, needs.OperationID)
			require.GreaterOrEqual(t, needs.LeaseExpiredFor, time.Duration(0))
		}
		require.Len(t, p.attempts(key), 1, "the provider is not called again")

		rec = b.lookup(t, toolCharge, "acme", key)
		require.Equal(t, ops.StatePending, rec.State)
		require.Equal(t, 1, rec.Attempt)
		require.Equal(t, "worker-1", rec.Owner)
	})

	// A panic in fn is an unknown outcome too: the record is stuck before
	// the panic goes on to the caller, with its value.
	t.Run("PanicEndsTheLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const key = "k-panic"
		require.PanicsWithValue(t, "provider bug", func() {
			_, _ = ops.DoExternal(b.ctx, b.store, chargeReq(key), func(context.Context, ops.Attempt) (receipt, error) {
				panic("provider bug")
			})
		})
		rec := b.lookup(t, toolCharge, "acme", key)
		require.Equal(t, ops.StatePending, rec.State)
		require.True(t, rec.Stuck(), "the lease ends with the panic: it ends in %v", rec.LeaseRemaining())
		_, err := ops.DoExternal(b.ctx, b.store, chargeReq(key), neverCalled[receipt](t))
		require.ErrorIs(t, err, ops.ErrNeedsReconciliation)
	})

	t.Run("UnknownOutcomeOnIdempotentProviderIsTakenOverAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newProvider()
		const key = "k-reset"
		reset := errors.New("provider: connection reset by peer")

		_, err := ops.DoExternal(b.ctx, b.store, emailReq(key), p.failWith(reset))
		require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
		require.ErrorIs(t, err, reset)
		rec := b.lookup(t, toolEmail, "acme", key)
		require.Equal(t, ops.StatePending, rec.State)
		require.True(t, rec.Stuck(), "the library gave the lease up at once: lease left %v", rec.LeaseRemaining())

		// No waiting: the next attempt takes over with the same key.
		out, err := ops.DoExternal(b.ctx, b.store, emailReq(key), p.send)
		require.NoError(t, err)
		require.Equal(t, ops.Created, out.Disposition)
		require.Equal(t, 2, out.Attempt)
		calls := p.attempts(key)
		require.Len(t, calls, 2)
		require.Equal(t, 1, calls[0].Number)
		require.Equal(t, 2, calls[1].Number)
		require.Equal(t, calls[0].Key, calls[1].Key)
		require.Equal(t, calls[0].OperationID, calls[1].OperationID)

		rec = b.lookup(t, toolEmail, "acme", key)
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, 2, rec.Attempt)
		require.Equal(t, out.Result.ResultRef(), rec.ResultRef)
	})

	t.Run("HeartbeatKeepsTheLeaseAlive", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newProvider()
		const key = "k-slow"
		started, release := make(chan struct{}), make(chan struct{})
		var releaseOnce sync.Once
		unblock := func() { releaseOnce.Do(func() { close(release) }) }
		defer unblock()

		done := make(chan externalResult, 1)
		go func() {
			out, err := ops.DoExternal(b.ctx, b.store, emailReq(key), func(ctx context.Context, a ops.Attempt) (receipt, error) {
				close(started)
				select {
				case <-release:
					return p.record(a), nil
				case <-ctx.Done():
					return receipt{}, context.Cause(ctx)
				}
			})
			done <- externalResult{out, err}
		}()
		receive(t, started, "the provider call to start")

		// Wait, by the database clock, until the first lease would have
		// expired three times over without renewals.
		deadline := time.Now().Add(20 * time.Second)
		for {
			rec := b.lookup(t, toolEmail, "acme", key)
			require.Equal(t, ops.StatePending, rec.State)
			require.False(t, rec.Stuck(), "lease expired while the call was running: expired %v ago", -rec.LeaseRemaining())
			if rec.DBTime.After(rec.LeasedAt.Add(3 * testLease)) {
				require.True(t, rec.LeaseExpiresAt.After(rec.LeasedAt.Add(3*testLease)), "the lease was renewed")
				break
			}
			require.True(t, time.Now().Before(deadline), "the database clock never passed %v", rec.LeasedAt.Add(3*testLease))
			time.Sleep(20 * time.Millisecond)
		}

		other := newStore(t, b.db.Service, ops.Config{Owner: "worker-2"})
		_, err := ops.DoExternal(b.ctx, other, emailReq(key), neverCalled[receipt](t))
		require.ErrorIs(t, err, ops.ErrInProgress)
		var inProgress *ops.InProgressError
		require.ErrorAs(t, err, &inProgress)
		require.Equal(t, "worker-1", inProgress.Owner)
		require.Positive(t, inProgress.RetryAfter)
		rec := b.lookup(t, toolEmail, "acme", key)
		require.False(t, rec.Stuck())
		require.Equal(t, 1, rec.Attempt)

		unblock()
		res := receive(t, done, "the provider call to finish")
		require.NoError(t, res.err)
		require.Equal(t, ops.Created, res.out.Disposition)
		require.Equal(t, 1, res.out.Attempt)
		rec = b.lookup(t, toolEmail, "acme", key)
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, res.out.Result.ResultRef(), rec.ResultRef)
		require.Len(t, p.attempts(key), 1)
	})

	t.Run("LeaseLossCancelsTheCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const key = "k-fenced"
		var cause error
		_, err := ops.DoExternal(b.ctx, b.store, chargeReq(key), func(ctx context.Context, a ops.Attempt) (receipt, error) {
			// Another worker takes the record over behind this one's back.
			tag, err := b.db.Admin.Exec(b.ctx, `UPDATE opsdesk.operations SET attempt = attempt + 1
				WHERE tenant = $1 AND tool = $2 AND key = $3`, a.Tenant, a.Tool, a.Key)
			require.NoError(t, err)
			require.EqualValues(t, 1, tag.RowsAffected())
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the call's context was never cancelled after its lease was taken")
			}
			require.ErrorIs(t, ctx.Err(), context.Canceled)
			cause = context.Cause(ctx)
			return receipt{}, cause
		})
		require.ErrorIs(t, cause, ops.ErrLeaseLost)
		require.NoError(t, b.ctx.Err(), "only the call's context was cancelled")
		// The call gave up without knowing what the provider did.
		require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
		require.ErrorIs(t, err, ops.ErrLeaseLost)

		rec := b.lookup(t, toolCharge, "acme", key)
		require.Equal(t, ops.StatePending, rec.State)
		require.Equal(t, 2, rec.Attempt, "the newer attempt's record is untouched")
	})

	t.Run("ZombieCannotOverwriteTheNewerOwner", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newProvider()
		const key = "k-zombie"
		// Never renews its lease, like a process paused mid-call.
		zombie := newStore(t, b.db.Service, ops.Config{Owner: "zombie"})
		ops.PauseHeartbeat(zombie) // a paused process: it never renews its lease
		started, release := make(chan struct{}), make(chan struct{})
		var releaseOnce sync.Once
		unblock := func() { releaseOnce.Do(func() { close(release) }) }
		defer unblock()

		done := make(chan externalResult, 1)
		go func() {
			out, err := ops.DoExternal(b.ctx, zombie, emailReq(key), func(_ context.Context, a ops.Attempt) (receipt, error) {
				close(started)
				<-release // deaf to its context, as a paused process is
				r := p.record(a)
				r.ID = "zombie-" + r.ID
				return r, nil
			})
			done <- externalResult{out, err}
		}()
		receive(t, started, "the zombie's provider call to start")

		b.waitStuck(t, toolEmail, "acme", key)
		worker := newStore(t, b.db.Service, ops.Config{Owner: "worker-2"})
		newer, err := ops.DoExternal(b.ctx, worker, emailReq(key), p.send)
		require.NoError(t, err)
		require.Equal(t, ops.Created, newer.Disposition)
		require.Equal(t, 2, newer.Attempt)

		unblock()
		res := receive(t, done, "the zombie's call to finish")
		require.ErrorIs(t, res.err, ops.ErrLostOwnership)
		var lost *ops.LostOwnershipError
		require.ErrorAs(t, res.err, &lost)
		require.Equal(t, "zombie", lost.Owner)
		require.Equal(t, 1, lost.Attempt)
		require.Equal(t, newer.OperationID, lost.OperationID)

		calls := p.attempts(key)
		require.Len(t, calls, 2)
		require.Equal(t, calls[0].Key, calls[1].Key, "both attempts sent the same provider key")

		rec := b.lookup(t, toolEmail, "acme", key)
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, "worker-2", rec.Owner)
		require.Equal(t, 2, rec.Attempt)
		require.Equal(t, newer.Result.ResultRef(), rec.ResultRef)
		replay, err := ops.DoExternal(b.ctx, b.store, emailReq(key), neverCalled[receipt](t))
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, replay.Disposition)
		require.Equal(t, newer.Result, replay.Result)
	})

	t.Run("WrongEffectOrUnknownToolWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		local := func(context.Context, pgx.Tx) (receipt, error) {
			t.Error("DoTx ran its function")
			return receipt{}, nil
		}

		_, err := ops.DoTx(b.ctx, b.store, emailReq("k1"), local)
		require.ErrorIs(t, err, ops.ErrWrongEffect)
		_, err = ops.DoTx(b.ctx, b.store, chargeReq("k1"), local)
		require.ErrorIs(t, err, ops.ErrWrongEffect)
		_, err = ops.DoExternal(b.ctx, b.store, ticketReq("acme", "k1", printer), neverCalled[ticketResult](t))
		require.ErrorIs(t, err, ops.ErrWrongEffect)

		rocket := externalReq("launch-rocket", "k1", map[string]string{"target": "moon"})
		_, err = ops.DoExternal(b.ctx, b.store, rocket, neverCalled[receipt](t))
		require.ErrorIs(t, err, ops.ErrUnknownTool)
		_, err = ops.DoTx(b.ctx, b.store, rocket, local)
		require.ErrorIs(t, err, ops.ErrUnknownTool)

		require.Zero(t, b.count(t, `SELECT count(*) FROM opsdesk.operations`))
		require.Zero(t, b.count(t, `SELECT count(*) FROM opsdesk.conflicts`))
		require.Zero(t, b.tickets(t))
	})
}

func TestNotAppliedAfterLosingTheLeaseReleasesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const key = "k-zombie-not-applied"
	declined := errors.New("provider: refused, nothing sent")
	_, err := ops.DoExternal(b.ctx, b.store, emailReq(key), func(ctx context.Context, a ops.Attempt) (receipt, error) {
		// A newer attempt takes the record over meanwhile.
		_, err := b.db.Admin.Exec(b.ctx, `UPDATE opsdesk.operations SET attempt = attempt + 1, owner = 'worker-2' WHERE key = $1`, key)
		require.NoError(t, err)
		return receipt{}, ops.NotApplied(declined)
	})
	require.ErrorIs(t, err, ops.ErrLostOwnership, "nothing was released: the record is no longer this attempt's")
	require.ErrorIs(t, err, ops.ErrNotApplied)
	require.ErrorIs(t, err, declined)
	rec := b.lookup(t, toolEmail, "acme", key)
	require.Equal(t, ops.StatePending, rec.State)
	require.Equal(t, "worker-2", rec.Owner)
	require.Equal(t, 2, rec.Attempt)
}
