package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

var printer = ticketIntent{Title: "Printer on fire", Priority: 2}

func TestDoTx(t *testing.T) {
	t.Parallel()

	t.Run("EquivalentRetryReplaysWithoutSecondEffect", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)
		require.Equal(t, ops.Created, first.Disposition)
		require.Equal(t, 1, first.Attempt)

		second, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, second.Disposition)
		require.Equal(t, first.Result, second.Result)
		require.Equal(t, first.OperationID, second.OperationID)
		require.Equal(t, 1, b.tickets(t))

		rec := b.lookup(t, toolTicket, "acme", "k1")
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, ops.OutcomeSucceeded, rec.Outcome)
		require.Equal(t, ops.EffectLocal, rec.Effect)
		require.Equal(t, first.Result.ResultRef(), rec.ResultRef)
		require.False(t, rec.ExpiresAt.IsZero(), "a completed record has a retention expiry")
		require.WithinDuration(t, rec.CompletedAt.Add(ops.DefaultRetention), rec.ExpiresAt, 0)
	})

	t.Run("RawArgumentsInAnyFormReplay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The same intent with other field order, whitespace and escapes.
		raws := []string{
			`{"title":"Printer on fire","priority":2}`,
			"{\n  \"priority\" : 2,\n  \"title\" : \"Printer on fire\"\n}",
			`{"title":"Printer \u006fn fire","priority":2}`,
			`{"priority":2,"title":"Printer\u0020on fire"}`,
		}
		for i, raw := range raws {
			intent, err := ops.DecodeIntent[ticketIntent]([]byte(raw))
			require.NoError(t, err, raw)
			out, err := b.doTicket(t, "acme", "k-raw", intent)
			require.NoError(t, err, raw)
			want := ops.Replayed
			if i == 0 {
				want = ops.Created
			}
			require.Equal(t, want, out.Disposition, raw)

		}
		require.Equal(t, 1, b.tickets(t))

		// Untyped raw intents canonicalize alike too, numbers included.
		_, want, err := ops.Canonical(toolTicket, "1", json.RawMessage(raws[0]))
		require.NoError(t, err)
		for _, raw := range append(raws, `{"title":"Printer on fire","priority":2.0}`, `{"priority":2e0,"title":"Printer\u0020on fire"}`) {
			_, fp, err := ops.Canonical(toolTicket, "1", json.RawMessage(raw))
			require.NoError(t, err)
			require.Equal(t, want, fp, raw)
		}
	})

	t.Run("ChangedIntentFailsClosedAndIsRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)

		before := b.lookup(t, toolTicket, "acme", "k1")
		changed := ticketIntent{Title: "Printer on fire", Priority: 1}
		_, err = b.doTicket(t, "acme", "k1", changed)
		require.ErrorIs(t, err, ops.ErrIntentConflict)
		var conflict *ops.IntentConflictError
		require.ErrorAs(t, err, &conflict)
		require.NotEqual(t, conflict.Stored, conflict.Attempted)
		require.Contains(t, err.Error(), conflict.Stored.Short())
		require.Contains(t, err.Error(), conflict.Attempted.Short())
		require.Equal(t, first.OperationID, conflict.OperationID)
		require.Equal(t, 1, b.tickets(t), "a conflict runs nothing")

		// Durably recorded, with both fingerprints and the owner.
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.conflicts
			WHERE tenant = 'acme' AND tool = $1 AND key = 'k1' AND id = $2 AND operation_id = $3
			  AND fingerprint = $4 AND original_fingerprint = $5 AND owner = 'worker-1' AND reviewed_at IS NULL`,
			toolTicket, conflict.ConflictID, first.OperationID, conflict.Attempted[:], conflict.Stored[:]))
		// With the attempted request, as fingerprinted: what an operator
		// reveals to see what differs (the service cannot read it back).
		var stored string
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT intent::text FROM opsdesk.conflicts WHERE id = $1`,
			conflict.ConflictID).Scan(&stored))
		req := ticketReq("acme", "k1", changed)
		canon, fp, err := ops.Canonical(req.Tool, req.Version, req.Intent)
		require.NoError(t, err)
		require.Equal(t, string(canon), stored)
		require.Equal(t, conflict.Attempted, fp)
		rec := b.lookup(t, toolTicket, "acme", "k1")
		require.Equal(t, 1, rec.ConflictCount)
		require.False(t, rec.LastConflictAt.IsZero())
		require.Equal(t, before.Version, rec.Version, "a conflict must not invalidate an operator's compare-and-set")
		require.Equal(t, before.State, rec.State)

		// The original record is untouched: the original intent still replays.
		again, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, again.Disposition)
		require.Equal(t, first.Result, again.Result)
	})

	t.Run("NewToolVersionIsAConflictNotAReplay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)
		req := ticketReq("acme", "k1", printer)
		req.Version = "2"
		_, err = ops.DoTx(b.ctx, b.store, req, createTicket("acme", "k1", printer.Title))
		var conflict *ops.IntentConflictError
		require.ErrorAs(t, err, &conflict)
		require.Equal(t, "1", conflict.StoredVersion)
		require.Equal(t, "2", conflict.AttemptedVersion)
		require.Equal(t, 1, b.tickets(t))
	})

	t.Run("FailureAfterBusinessWriteRollsBothBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		boom := errors.New("injected failure after the business write")
		_, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "k1", printer), func(ctx context.Context, tx pgx.Tx) (ticketResult, error) {
			r, err := createTicket("acme", "k1", printer.Title)(ctx, tx)
			require.NoError(t, err)
			return r, boom
		})
		require.ErrorIs(t, err, boom)
		require.Equal(t, 0, b.tickets(t))
		require.Equal(t, ops.StateAbsent, b.lookup(t, toolTicket, "acme", "k1").State)

		// A result that cannot be stored fails after the business write too.
		_, err = ops.DoTx(b.ctx, b.store, ticketReq("acme", "k1", printer), func(ctx context.Context, tx pgx.Tx) (func(), error) {
			_, err := createTicket("acme", "k1", printer.Title)(ctx, tx)
			return func() {}, err
		})
		require.ErrorIs(t, err, ops.ErrInvalidRequest)
		require.ErrorContains(t, err, "cannot be encoded as JSON")
		require.Equal(t, 0, b.tickets(t))
		require.Equal(t, ops.StateAbsent, b.lookup(t, toolTicket, "acme", "k1").State)

		// Nothing was left behind: the next attempt executes normally.
		out, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)
		require.Equal(t, ops.Created, out.Disposition)
		require.Equal(t, 1, b.tickets(t))
	})

	t.Run("ResponseLostAfterCommitIsRecoveredByRetry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The first call commits, but its answer is lost on the way back:
		// the caller never sees it and retries.
		_, _ = b.doTicket(t, "acme", "k1", printer)
		retry, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, retry.Disposition)
		require.Equal(t, 1, b.tickets(t))
	})

	t.Run("NewKeyWithSameContentIsASecondEffect", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)
		c, err := b.doTicket(t, "acme", "k2", printer)
		require.NoError(t, err)
		require.Equal(t, ops.Created, c.Disposition)
		require.NotEqual(t, a.Result, c.Result)
		require.Equal(t, 2, b.tickets(t))
	})

	t.Run("OtherTenantOrToolIsIndependent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)
		other, err := b.doTicket(t, "globex", "k1", ticketIntent{Title: "Something else", Priority: 3})
		require.NoError(t, err)
		require.Equal(t, ops.Created, other.Disposition)

		note := ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: "create-note", Key: "k1"}, Version: "1", Intent: map[string]string{"text": "x"}}
		out, err := ops.DoTx(b.ctx, b.store, note, createTicket("acme", "k1", "note"))
		require.NoError(t, err)
		require.Equal(t, ops.Created, out.Disposition)
		require.Equal(t, 3, b.tickets(t))
	})

	t.Run("FreshProcessReplaysWhatAnEarlierOneCompleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := b.doTicket(t, "acme", "k1", printer)
		require.NoError(t, err)

		// A new pool and store: nothing shared with the first but the database.
		fresh := newStore(t, dbtest.Pool(t, b.db.ServiceDSN), ops.Config{Owner: "worker-2"})
		out, err := ops.DoTx(b.ctx, fresh, ticketReq("acme", "k1", printer), createTicket("acme", "k1", printer.Title))
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, out.Disposition)
		require.Equal(t, first.Result, out.Result)
		require.Equal(t, 1, b.tickets(t))
	})

	t.Run("BusinessRejectionIsStoredAndReplayed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		type reason struct {
			Reason string `json:"reason"`
		}
		calls := 0
		reject := func(context.Context, pgx.Tx) (ticketResult, error) {
			calls++
			return ticketResult{}, ops.Reject(reason{Reason: "queue closed"})
		}
		_, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "k1", printer), reject)
		var rej *ops.RejectedError
		require.ErrorAs(t, err, &rej)
		require.False(t, rej.Replayed)

		_, err = ops.DoTx(b.ctx, b.store, ticketReq("acme", "k1", printer), reject)
		require.ErrorIs(t, err, ops.ErrRejected)
		require.ErrorAs(t, err, &rej)
		require.True(t, rej.Replayed)
		var got reason
		require.NoError(t, rej.Decode(&got))
		require.Equal(t, "queue closed", got.Reason)
		require.Equal(t, 1, calls)
		require.NotContains(t, err.Error(), "queue closed", "payloads stay out of messages")
		rec := b.lookup(t, toolTicket, "acme", "k1")
		require.Equal(t, ops.OutcomeRejected, rec.Outcome)
	})

	t.Run("SixtyFourRacersOneEffect", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const racers = 64
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			results  = map[ticketResult]int{}
			outcomes = map[ops.Disposition]int{}
			start    = make(chan struct{})
		)
		for range racers {
			wg.Go(func() {
				<-start
				out, err := b.doTicket(t, "acme", "race", printer)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				results[out.Result]++
				outcomes[out.Disposition]++
			})
		}
		close(start)
		wg.Wait()
		require.Equal(t, 1, b.tickets(t))
		require.Len(t, results, 1, "every racer sees the one result")
		require.Equal(t, map[ops.Disposition]int{ops.Created: 1, ops.Replayed: racers - 1}, outcomes)
	})
}
