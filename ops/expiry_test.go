package ops_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
)

// A late retry after a purge meets the record's tombstone: a tool that
// rejects retries after expiry answers ErrExpired and runs nothing; a tool
// that re-executes treats it as new work; a tombstone that ran out stops
// nothing.
func TestRetryAfterPurge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := newStore(t, b.db.Service, ops.Config{Owner: "worker-1", Tools: map[string]ops.Policy{
		toolTicket:    {Effect: ops.EffectLocal, AfterExpiry: ops.RejectAfterExpiry},
		"create-note": {Effect: ops.EffectLocal},
		toolCharge:    {Effect: ops.EffectUnknownOutcome, Lease: testLease, AfterExpiry: ops.RejectAfterExpiry},
	}})
	_, err := b.db.Admin.Exec(b.ctx, `
INSERT INTO opsdesk.tombstones (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at) VALUES
 ('acme', 'create-ticket', 'run-1', 41, decode(repeat('ab', 32), 'hex'), now() - interval '1 day', now() + interval '6 days'),
 ('acme', 'create-note',   'run-1', 42, decode(repeat('ab', 32), 'hex'), now() - interval '1 day', now() + interval '6 days'),
 ('acme', 'create-ticket', 'run-2', 43, decode(repeat('ab', 32), 'hex'), now() - interval '9 days', now() - interval '1 day'),
 ('acme', 'charge-card',   'ord-1', 44, decode(repeat('ab', 32), 'hex'), now() - interval '1 day', now() + interval '6 days')`)
	require.NoError(t, err)
	intent := ticketIntent{Title: "Printer on fire", Priority: 2}

	t.Run("RejectingToolAnswersErrExpired", func(t *testing.T) {
		_, err := ops.DoTx(b.ctx, store, ticketReq("acme", "run-1", intent), createTicket("acme", "run-1", intent.Title))
		require.ErrorIs(t, err, ops.ErrExpired)
		var expired *ops.ExpiredError
		require.ErrorAs(t, err, &expired)
		require.EqualValues(t, 41, expired.OperationID)
		require.False(t, expired.PurgedAt.IsZero())
		require.Zero(t, b.tickets(t), "nothing ran")
		require.Zero(t, b.count(t, `SELECT count(*) FROM opsdesk.operations`), "nothing was reserved")

		rec, err := store.Read(b.ctx, ops.Identity{Tenant: "acme", Tool: toolTicket, Key: "run-1"})
		require.NoError(t, err)
		require.Equal(t, ops.StateAbsent, rec.State)
		require.EqualValues(t, 41, rec.ID)
		require.WithinDuration(t, expired.PurgedAt, rec.PurgedAt, 0)
	})

	t.Run("ExternalEffectNeverCalled", func(t *testing.T) {
		called := false
		_, err := ops.DoExternal(b.ctx, store, ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: toolCharge, Key: "ord-1"},
			Version: "1", Intent: map[string]int{"amount": 100}}, func(context.Context, ops.Attempt) (string, error) {
			called = true
			return "ch_1", nil
		})
		require.ErrorIs(t, err, ops.ErrExpired)
		require.False(t, called, "a late duplicate must not reach the provider")
	})

	t.Run("ReexecutingToolRunsAgain", func(t *testing.T) {
		req := ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: "create-note", Key: "run-1"}, Version: "1", Intent: intent}
		out, err := ops.DoTx(b.ctx, store, req, createTicket("acme", "run-1", intent.Title))
		require.NoError(t, err)
		require.Equal(t, ops.Created, out.Disposition)
	})

	t.Run("RunOutTombstoneStopsNothing", func(t *testing.T) {
		out, err := ops.DoTx(b.ctx, store, ticketReq("acme", "run-2", intent), createTicket("acme", "run-2", intent.Title))
		require.NoError(t, err)
		require.Equal(t, ops.Created, out.Disposition)
	})
}

func TestAfterExpiryIsValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := ops.New(b.db.Service, ops.Config{Tools: map[string]ops.Policy{"t": {Effect: ops.EffectLocal, AfterExpiry: "maybe"}}})
	require.Error(t, err)
	require.Contains(t, err.Error(), `after expiry "maybe"`)
	require.False(t, errors.Is(err, ops.ErrExpired))
}

// TestRacersOfAToolThatRejectsAfterExpiry: such a tool's create keeps the
// insert apart from its COMMIT (the tombstone check may insert nothing),
// and a twin's committed key fails the insert: every racer replays the one
// effect, as for any other tool.
func TestRacersOfAToolThatRejectsAfterExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := newStore(t, b.db.Service, ops.Config{Owner: "worker-1", Tools: map[string]ops.Policy{
		toolTicket: {Effect: ops.EffectLocal, AfterExpiry: ops.RejectAfterExpiry},
	}})
	intent := ticketIntent{Title: "Printer on fire", Priority: 2}
	const racers = 16
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[ops.Disposition]int{}
		start    = make(chan struct{})
	)
	for range racers {
		wg.Go(func() {
			<-start
			out, err := ops.DoTx(b.ctx, store, ticketReq("acme", "race", intent), createTicket("acme", "race", intent.Title))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			outcomes[out.Disposition]++
		})
	}
	close(start)
	wg.Wait()
	require.Equal(t, 1, b.tickets(t))
	require.Equal(t, map[ops.Disposition]int{ops.Created: 1, ops.Replayed: racers - 1}, outcomes)
}
