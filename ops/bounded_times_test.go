package ops_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
)

// Issue 18 §2: a service login inserted a lease that never ends and an
// expiry that never comes, and the console could not read its tenant.
// The state machine bounds every time the service writes (migration
// 00024): each attack below, as the service login with plain SQL, is
// refused naming the bound, and leaves nothing behind.

// requireClockRefusal is requireStateMachine for a time out of bounds:
// the refusal also says what the clock read and what to write.
func requireClockRefusal(t *testing.T, err error, rule, stmt string) {
	t.Helper()
	requireStateMachine(t, err, rule, stmt)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Contains(t, pgErr.Detail, "The database clock (clock_timestamp()) read ", stmt)
	require.Contains(t, pgErr.Hint, "clock_timestamp()", stmt)
	require.Contains(t, pgErr.Hint, "a lease of at most 24 hours", stmt)
}

// The times a reader could not show or a person could not wait out.
var unboundedTimes = []string{"'infinity'", "'-infinity'", "'294276-12-31 23:59:59+00'", "'4713-01-01 00:00:00+00 BC'"}

func TestServiceInsertsNoUnboundedTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const insert = `INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner,
    attempt, leased_at, lease_expires_at, outcome, result, completed_at, expires_at)
VALUES ('acme', '%s', 'forged', '1', decode(repeat('01', 32), 'hex'), '%s', '%s', 'thief', 1, %s, %s, %s, %s, %s, %s)`
	pending := func(leased, expiring string) string {
		return fmt.Sprintf(insert, toolCharge, "external_unknown", "pending", leased, expiring, "NULL", "NULL", "NULL", "NULL")
	}
	completed := func(completed, expiring string) string {
		return fmt.Sprintf(insert, toolTicket, "local", "completed", "now()", "now()", "'succeeded'", `'{"forged":true}'`,
			completed, expiring)
	}
	refused := map[string]string{
		pending("now()", "now() + interval '24 hours 1 second'"):               "a new record is leased for at most 24 hours",
		pending("now()", "now() - interval '1 second'"):                        "a new record is leased for at most 24 hours",
		pending("now() - interval '11 seconds'", "now()"):                      "a new record is leased from now",
		pending("now() + interval '1 second'", "now() + interval '1 minute'"):  "a new record is leased from now",
		completed("now()", "now() + interval '876600 hours 1 second'"):         "a new record is completed now, to expire no earlier than now",
		completed("now()", "now() - interval '1 second'"):                      "a new record is completed now, to expire no earlier than now",
		completed("now() - interval '11 seconds'", "now() + interval '1 day'"): "completed now",
	}
	for _, v := range unboundedTimes {
		refused[pending("now()", v)] = "a new record is leased for at most 24 hours"
		refused[pending(v, "now() + interval '1 minute'")] = "a new record is leased from now"
		refused[completed("now()", v)] = "a new record is completed now, to expire no earlier than now"
		refused[completed(v, "now() + interval '1 day'")] = "a new record is completed now: completed_at within the ten seconds"
	}
	for stmt, rule := range refused {
		_, err := b.db.Service.Exec(b.ctx, stmt)
		requireClockRefusal(t, err, rule, stmt)
	}
	require.Zero(t, b.count(t, `SELECT count(*) FROM opsdesk.operations`))

	// At the bounds, both inserts pass: a lease of 24 hours, an expiry
	// 100 years ahead.
	_, err := b.db.Service.Exec(b.ctx, pending("clock_timestamp()", "clock_timestamp() + interval '24 hours'"))
	require.NoError(t, err)
	_, err = b.db.Service.Exec(b.ctx, completed("clock_timestamp()", "clock_timestamp() + interval '876600 hours'"))
	require.NoError(t, err)
}

func TestServiceUpdatesNoUnboundedTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := longLeaseStore(t, b)
	finish := b.startCall(t, store, "live")
	live := b.idOf(t, toolEmail, "live")
	_, err := ops.DoExternal(b.ctx, b.store, emailReq("released"), newProvider().failWith(ops.NotApplied(errors.New("declined"))))
	require.ErrorIs(t, err, ops.ErrNotApplied)
	released := b.idOf(t, toolEmail, "released")

	renew := "a lease is renewed while it is live, and never ends in the past"
	b.requireRefused(t, b.db.Service, live, renew,
		`UPDATE opsdesk.operations SET lease_expires_at = now() + interval '24 hours 1 second' WHERE id = $1`,
		`UPDATE opsdesk.operations SET lease_expires_at = now() - interval '11 seconds' WHERE id = $1`)
	const complete = `UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{}', result_ref = 'forged',
    completed_at = %s, expires_at = %s, updated_at = %s, version = version + 1 WHERE id = $1`
	b.requireRefused(t, b.db.Service, live, "a record is completed now, to expire no earlier than now",
		fmt.Sprintf(complete, "now()", "now() + interval '876600 hours 1 second'", "now()"),
		fmt.Sprintf(complete, "now()", "now() - interval '1 second'", "now()"))
	b.requireRefused(t, b.db.Service, live, "a record is completed now: completed_at within the ten seconds",
		fmt.Sprintf(complete, "now() - interval '11 seconds'", "now() + interval '1 day'", "now()"))
	b.requireRefused(t, b.db.Service, live, "updated now",
		fmt.Sprintf(complete, "now()", "now() + interval '1 day'", "now() - interval '11 seconds'"))
	const takeOver = `UPDATE opsdesk.operations SET state = 'pending', owner = 'thief', attempt = attempt + 1,
    leased_at = %s, lease_expires_at = %s, updated_at = now(), version = version + 1 WHERE id = $1`
	b.requireRefused(t, b.db.Service, released, "a takeover is leased for at most 24 hours",
		fmt.Sprintf(takeOver, "now()", "now() + interval '24 hours 1 second'"),
		fmt.Sprintf(takeOver, "now()", "now() - interval '1 second'"))
	const conflict = `UPDATE opsdesk.operations SET conflict_count = conflict_count + 1, last_conflict_at = %s WHERE id = $1`
	for _, v := range unboundedTimes {
		for _, stmt := range []string{
			`UPDATE opsdesk.operations SET lease_expires_at = ` + v + ` WHERE id = $1`,
			fmt.Sprintf(complete, "now()", v, "now()"),
			fmt.Sprintf(complete, v, "now() + interval '1 day'", "now()"),
			fmt.Sprintf(complete, "now()", "now() + interval '1 day'", v),
			fmt.Sprintf(conflict, v),
		} {
			before := b.rowText(t, live)
			_, err := b.db.Service.Exec(b.ctx, stmt, live)
			requireClockRefusal(t, err, "database clock", stmt)
			require.Equal(t, before, b.rowText(t, live), stmt)
		}
		for _, stmt := range []string{fmt.Sprintf(takeOver, "now()", v), fmt.Sprintf(takeOver, v, "now() + interval '1 minute'")} {
			before := b.rowText(t, released)
			_, err := b.db.Service.Exec(b.ctx, stmt, released)
			requireClockRefusal(t, err, "a takeover is leased", stmt)
			require.Equal(t, before, b.rowText(t, released), stmt)
		}
	}

	// The library's own steps still pass: the call completes.
	res := finish()
	require.NoError(t, res.err)
	require.Equal(t, ops.Created, res.out.Disposition)
}

// The longest lease and retention the store accepts are the library's
// too: a policy asking for more is refused when the store is made, and one
// at the bounds runs.
func TestPolicyAtTheStoreBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, p := range map[string]ops.Policy{
		"lease":     {Effect: ops.EffectIdempotentProvider, Lease: ops.MaxLease + time.Microsecond},
		"retention": {Effect: ops.EffectLocal, Retention: ops.MaxRetention + time.Microsecond},
	} {
		_, err := ops.New(b.db.Service, ops.Config{Tools: map[string]ops.Policy{"t": p}})
		require.ErrorContains(t, err, "longer than the maximum", name)
	}
	store := newStore(t, b.db.Service, ops.Config{Owner: "worker-1", Tools: map[string]ops.Policy{
		toolTicket: {Effect: ops.EffectLocal, Retention: ops.MaxRetention},
		toolEmail:  {Effect: ops.EffectIdempotentProvider, Lease: ops.MaxLease, Retention: ops.MaxRetention},
	}})
	_, err := ops.DoTx(b.ctx, store, ticketReq("acme", "k1", printer), createTicket("acme", "k1", printer.Title))
	require.NoError(t, err)
	_, err = ops.DoExternal(b.ctx, store, emailReq("k1"), newProvider().send)
	require.NoError(t, err)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM opsdesk.operations
WHERE state = 'completed' AND expires_at - completed_at = interval '876600 hours'`))
}

// The state machine's clock is the write's, not the transaction's start
// (now()): a service transaction that sleeps past the ten seconds the
// state machine allows, then writes now(), is refused, so it can neither
// back-date a record nor write an expiry that passed before it commits;
// the library, which writes clock_timestamp(), completes a transaction
// as long and stamps the record with its write.
func TestServiceTransactionThatSleepsThenCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const sleep = 11 * time.Second
	asleep := func(t *testing.T, stmt string, args ...any) error {
		t.Helper()
		return pgx.BeginFunc(b.ctx, b.db.Service, func(tx pgx.Tx) error {
			if _, err := tx.Exec(b.ctx, `SELECT pg_sleep($1)`, sleep.Seconds()); err != nil {
				return err
			}
			_, err := tx.Exec(b.ctx, stmt, args...)
			return err
		})
	}
	slowTicket := func(tenant, key, title string) func(context.Context, pgx.Tx) (ticketResult, error) {
		create := createTicket(tenant, key, title)
		return func(ctx context.Context, tx pgx.Tx) (ticketResult, error) {
			if _, err := tx.Exec(ctx, `SELECT pg_sleep($1)`, sleep.Seconds()); err != nil {
				return ticketResult{}, err
			}
			return create(ctx, tx)
		}
	}
	// times reads a record's times as seconds after its created_at (the
	// start of the transaction that inserted it).
	times := func(t *testing.T, key string) (leased, completed, expires float64) {
		t.Helper()
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT extract(epoch FROM leased_at - created_at),
    extract(epoch FROM completed_at - created_at), extract(epoch FROM expires_at - completed_at)
FROM opsdesk.operations WHERE key = $1`, key).Scan(&leased, &completed, &expires))
		return leased, completed, expires
	}

	t.Run("RawReservation", func(t *testing.T) {
		t.Parallel()
		stmt := `INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner,
    leased_at, lease_expires_at)
VALUES ('acme', 'charge-card', 'late', '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now(), now() + interval '5 seconds')`
		requireClockRefusal(t, asleep(t, stmt), "a new record is leased from now", stmt)
	})
	t.Run("RawCompletion", func(t *testing.T) {
		t.Parallel()
		finish := b.startCall(t, longLeaseStore(t, b), "raw")
		id := b.idOf(t, toolEmail, "raw")
		before := b.rowText(t, id)
		stmt := `UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{}', result_ref = 'late',
    completed_at = now(), expires_at = now() + interval '5 seconds', updated_at = now(), version = version + 1 WHERE id = $1`
		requireClockRefusal(t, asleep(t, stmt, id), "updated now", stmt)
		require.Equal(t, before, b.rowText(t, id))
		require.NoError(t, finish().err)
	})
	t.Run("DoTxInserted", func(t *testing.T) {
		t.Parallel()
		out, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "slow", printer), slowTicket("acme", "slow", printer.Title))
		require.NoError(t, err)
		require.Equal(t, ops.Created, out.Disposition)
		leased, completed, expires := times(t, "slow")
		require.GreaterOrEqual(t, completed, sleep.Seconds(), "completed_at is the transaction's start, not the write's time")
		require.Equal(t, leased, completed, "a local transaction's record is leased and completed at one instant")
		require.Equal(t, ops.DefaultRetention.Seconds(), expires)
	})
	t.Run("DoTxCompleted", func(t *testing.T) {
		t.Parallel()
		// A released local record: DoTx takes it over in its transaction,
		// runs fn and completes it there.
		canon, fp, err := ops.Canonical(toolTicket, "1", printer)
		require.NoError(t, err)
		_, err = b.db.Admin.Exec(b.ctx, `INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint,
    effect, state, owner, leased_at, lease_expires_at, intent)
VALUES ('acme', 'create-ticket', 'slow-again', '1', $1, 'local', 'released', 'w', now(), now(), $2)`, fp[:], string(canon))
		require.NoError(t, err)
		out, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "slow-again", printer), slowTicket("acme", "slow-again", printer.Title))
		require.NoError(t, err)
		require.Equal(t, 2, out.Attempt)
		var leasedToCompleted float64
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT extract(epoch FROM completed_at - leased_at)
FROM opsdesk.operations WHERE key = 'slow-again'`).Scan(&leasedToCompleted))
		require.GreaterOrEqual(t, leasedToCompleted, sleep.Seconds(), "completed_at is the transaction's start, not the write's time")
	})
}

// A record a superuser or a restored backup gave an infinite or absurd
// time still gets its retries a definite answer: the library reads every
// time the store holds (it answered ErrUnavailable, a 503, for ever), a
// lease no service could have written waits for a person instead of
// answering "in progress" for ever, and the rest is as for any record.
func TestRetryOfARecordWithUnboundedTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	superuser := func(t *testing.T, tool, key, set string) {
		t.Helper()
		tag, err := b.db.Admin.Exec(b.ctx, `UPDATE opsdesk.operations SET `+set+` WHERE tool = $1 AND key = $2`, tool, key)
		require.NoError(t, err)
		require.Equal(t, int64(1), tag.RowsAffected())
	}
	unknown := errors.New("timeout")

	t.Run("LeaseNeverEnds", func(t *testing.T) {
		for i, lease := range []string{"'infinity'", "'294276-12-31 23:59:59+00'", "clock_timestamp() + interval '2 days'"} {
			key := fmt.Sprintf("never-%d", i)
			for _, req := range []ops.Request{chargeReq(key), emailReq(key)} {
				_, err := ops.DoExternal(b.ctx, b.store, req, newProvider().failWith(unknown))
				require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
				superuser(t, req.Tool, req.Key, "lease_expires_at = "+lease)

				rec := b.lookup(t, req.Tool, "acme", req.Key)
				require.Equal(t, ops.StatePending, rec.State)
				require.False(t, rec.Stuck())
				_, err = ops.DoExternal(b.ctx, b.store, req, neverCalled[receipt](t))
				var needs *ops.NeedsReconciliationError
				require.ErrorAs(t, err, &needs, "%s %s", req.Tool, lease)
				require.Equal(t, rec.LeaseExpiresAt, needs.LeaseEnds)
				require.Contains(t, err.Error(), "later than any service may write")
			}
		}
		rec := b.lookup(t, toolCharge, "acme", "never-0")
		require.True(t, ops.Infinity.Equal(rec.LeaseExpiresAt))
		require.Contains(t, (&ops.NeedsReconciliationError{LeaseEnds: rec.LeaseExpiresAt}).Error(), "never ends")

		// A local record left pending, as a restored backup might hold it.
		_, err := b.doTicket(t, "acme", "never-local", printer)
		require.NoError(t, err)
		superuser(t, toolTicket, "never-local", "state = 'pending', outcome = NULL, lease_expires_at = 'infinity'")
		_, err = b.doTicket(t, "acme", "never-local", printer)
		require.ErrorIs(t, err, ops.ErrNeedsReconciliation)
	})
	t.Run("LeaseEndedBeforeTime", func(t *testing.T) {
		// A provider that deduplicates: the next attempt takes over.
		_, err := ops.DoExternal(b.ctx, b.store, emailReq("ended"), newProvider().failWith(unknown))
		require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
		superuser(t, toolEmail, "ended", "leased_at = '-infinity', lease_expires_at = '-infinity'")
		ended := b.lookup(t, toolEmail, "acme", "ended")
		require.True(t, ended.Stuck())
		out, err := ops.DoExternal(b.ctx, b.store, emailReq("ended"), newProvider().send)
		require.NoError(t, err)
		require.Equal(t, 2, out.Attempt)
	})
	t.Run("CompletedNeverExpires", func(t *testing.T) {
		first, err := b.doTicket(t, "acme", "kept", printer)
		require.NoError(t, err)
		superuser(t, toolTicket, "kept", "created_at = '-infinity', completed_at = '-infinity', updated_at = 'infinity', "+
			"expires_at = 'infinity', last_conflict_at = '294276-01-01 00:00:00+00'")
		again, err := b.doTicket(t, "acme", "kept", printer)
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, again.Disposition)
		require.Equal(t, first.Result, again.Result)
		rec := b.lookup(t, toolTicket, "acme", "kept")
		for _, c := range []struct {
			got, want time.Time
		}{
			{rec.CreatedAt, ops.NegativeInfinity}, {rec.CompletedAt, ops.NegativeInfinity}, {rec.UpdatedAt, ops.Infinity},
			{rec.ExpiresAt, ops.Infinity}, {rec.LastConflictAt, ops.Infinity},
		} {
			require.True(t, c.want.Equal(c.got), "read %v, want %v", c.got, c.want)
		}
	})
}
