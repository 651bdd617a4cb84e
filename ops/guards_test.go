package ops_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

// Guards against misuse and drift: the ways a caller, a configuration
// change or the database's settings could otherwise duplicate an effect.
func TestGuards(t *testing.T) {
	t.Parallel()

	t.Run("FnCannotEndTheTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, end := range []func(pgx.Tx) error{
			func(tx pgx.Tx) error { return tx.Commit(b.ctx) },
			func(tx pgx.Tx) error { return tx.Rollback(b.ctx) },
		} {
			_, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "k1", printer), func(ctx context.Context, tx pgx.Tx) (ticketResult, error) {
				r, err := createTicket("acme", "k1", printer.Title)(ctx, tx)
				require.NoError(t, err)
				return r, end(tx)
			})
			require.ErrorContains(t, err, "the transaction belongs to DoTx")
		}
		// Had fn committed, a pending record and a ticket would be durable
		// and the next attempt would create a second ticket.
		require.Equal(t, 0, b.tickets(t))
		require.Equal(t, ops.StateAbsent, b.lookup(t, toolTicket, "acme", "k1").State)
	})

	t.Run("PendingLocalRecordIsNotTakenOver", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Only broken atomicity leaves a committed pending local record.
		_, err := b.db.Admin.Exec(b.ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT 'acme', $1, 'k1', '1', $2, 'local', 'pending', 'ghost', now() - interval '1h', now() - interval '59m'`,
			toolTicket, fingerprintOf(t, toolTicket, printer))
		require.NoError(t, err)
		_, err = b.doTicket(t, "acme", "k1", printer)
		require.ErrorIs(t, err, ops.ErrNeedsReconciliation)
		require.Equal(t, 0, b.tickets(t))
	})

	t.Run("PolicyTightenedToUnknownOutcomeIsHonoured", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newProvider()
		_, err := ops.DoExternal(b.ctx, b.store, emailReq("k1"), p.failWith(errors.New("timeout")))
		require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
		b.waitStuck(t, toolEmail, "acme", "k1")

		// The operator learns the provider does not deduplicate after all.
		tools := map[string]ops.Policy{toolEmail: {Effect: ops.EffectUnknownOutcome, Lease: testLease}}
		strict := newStore(t, b.db.Service, ops.Config{Owner: "worker-2", Tools: tools})
		_, err = ops.DoExternal(b.ctx, strict, emailReq("k1"), neverCalled[receipt](t))
		require.ErrorIs(t, err, ops.ErrNeedsReconciliation)
		require.Len(t, p.attempts("k1"), 1)
	})

	t.Run("PolicyLoosenedDoesNotReleaseAnUnknownOutcome", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := ops.DoExternal(b.ctx, b.store, chargeReq("k1"), newProvider().failWith(errors.New("timeout")))
		require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
		b.waitStuck(t, toolCharge, "acme", "k1")

		// The attempt was made without deduplication: a looser policy now
		// does not make it safe to repeat.
		tools := map[string]ops.Policy{toolCharge: {Effect: ops.EffectIdempotentProvider, Lease: testLease}}
		loose := newStore(t, b.db.Service, ops.Config{Owner: "worker-2", Tools: tools})
		_, err = ops.DoExternal(b.ctx, loose, chargeReq("k1"), neverCalled[receipt](t))
		require.ErrorIs(t, err, ops.ErrNeedsReconciliation)
	})

	t.Run("TypedIntentIsValidatedWithoutDecodeIntent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.doTicket(t, "acme", "k1", ticketIntent{Title: "", Priority: 9})
		require.ErrorIs(t, err, ops.ErrInvalidRequest)
		require.ErrorContains(t, err, "title is required")
		require.Equal(t, 0, b.tickets(t))
		require.Equal(t, 0, b.count(t, `SELECT count(*) FROM opsdesk.operations`))
	})

	t.Run("RepeatableReadDefaultStillReplays", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.db.Admin.Exec(b.ctx, `ALTER DATABASE `+pgx.Identifier{b.db.Name}.Sanitize()+
			` SET default_transaction_isolation = 'repeatable read'`)
		require.NoError(t, err)
		store := newStore(t, dbtest.Pool(t, b.db.ServiceDSN), ops.Config{Owner: "worker-rr"})
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				_, err := ops.DoTx(b.ctx, store, ticketReq("acme", "rr", printer), createTicket("acme", "rr", printer.Title))
				require.NoError(t, err)
			})
		}
		wg.Wait()
		require.Equal(t, 1, b.tickets(t))
	})

	t.Run("RacingTakeoversCallTheProviderOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newProvider()
		_, err := ops.DoExternal(b.ctx, b.store, emailReq("k1"), p.failWith(errors.New("reset")))
		require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
		b.waitStuck(t, toolEmail, "acme", "k1")

		const racers = 32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range racers {
			wg.Go(func() {
				<-start
				_, err := ops.DoExternal(b.ctx, b.store, emailReq("k1"), p.send)
				if err != nil && !errors.Is(err, ops.ErrInProgress) {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Len(t, p.attempts("k1"), 2, "the failed attempt and exactly one takeover")
		rec := b.lookup(t, toolEmail, "acme", "k1")
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, 2, rec.Attempt)
	})

	t.Run("UnencodableResultCompletesWithAMarker", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The charge went through; its result cannot be encoded. The
		// record says it happened rather than wait for a person.
		out, err := ops.DoExternal(b.ctx, b.store, chargeReq("k1"), func(context.Context, ops.Attempt) (chan int, error) {
			return make(chan int), nil
		})
		require.NoError(t, err)
		require.NotNil(t, out.Result)
		require.Equal(t, "cannot be encoded as JSON (chan int)", out.NotStored.Reason)
		rec := b.lookup(t, toolCharge, "acme", "k1")
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, ops.OutcomeSucceeded, rec.Outcome)
	})
}

func fingerprintOf(t *testing.T, tool string, intent any) []byte {
	t.Helper()
	_, fp, err := ops.Canonical(tool, "1", intent)
	require.NoError(t, err)
	return fp[:]
}
