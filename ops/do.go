package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Disposition says how a call was answered.
type Disposition string

const (
	// Created: the effect ran in this call. Attempt is above 1 when it ran
	// again after a takeover or a release.
	Created Disposition = "created"
	// Replayed: an earlier attempt's stored result was returned and
	// nothing ran.
	Replayed Disposition = "replayed"
)

// Reply is a successful call's answer.
type Reply[R any] struct {
	// Result is the function's result, or the stored one when Replayed.
	Result      R
	Disposition Disposition
	OperationID int64
	Attempt     int
	// ResultRef is the provider's reference for the effect, when the
	// result carried one (ResultReferencer) or an operator recorded it
	// while confirming the effect happened.
	ResultRef string
	// NotStored is set by DoExternal when the effect succeeded but its
	// result could not be stored as it is (over Config.MaxResultBytes,
	// JSON the store refuses, or not encodable): Result is the real
	// result, and the record keeps only a marker and ResultRef. Keep what
	// you need of Result now: retries get *ResultNotStoredError instead.
	NotStored *ResultNotStored
}

// ResultReferencer is implemented by results that carry the provider's
// reference for the effect (a ticket number, a charge id). It is stored in
// the record's result_ref so that operators and Store.Read can see it.
type ResultReferencer interface {
	ResultRef() string
}

// DoTx runs a local effect exactly once per identity. It calls fn with a
// transaction for the business writes and commits the record, completed,
// with them; an error from fn (other than Reject) rolls everything back:
// one from the database gets its class (ErrUnavailable or ErrStoreRefused), fn's
// own is returned as it is. An equivalent retry replays the stored result
// in one read; a concurrent one waits for this transaction and replays.
//
// fn may run and be rolled back: when a concurrent twin commits the same
// identity first, this call's transaction (fn's writes with it) rolls back
// and the call replays the twin's result. Keep fn's effects in tx.
//
// A database failure before the commit wrote nothing (ErrUnavailable,
// ErrStoreRefused). Once fn has returned, the record's insert and the
// commit are sent together (one round trip) and are not cut short by ctx:
// a server error about either means nothing committed, and an answer lost
// on the way is ErrOutcomeUnknown with Step StepCommit (its OperationID is
// 0 when the insert's answer was lost too); an equivalent retry replays or
// executes it.
//
// A result or rejection payload the store cannot hold (over
// Config.MaxResultBytes, U+0000 in a string, not encodable as JSON) is
// refused with *InvalidRequestError before the commit: fn ran, but its
// writes roll back with the record, and a retry runs fn again.
func DoTx[R any](ctx context.Context, s *Store, req Request, fn func(ctx context.Context, tx pgx.Tx) (R, error)) (out Reply[R], err error) {
	c, err := s.newCall(req, false)
	defer func() { s.logCall(ctx, c, out.OperationID, out.Attempt, out.Disposition, err) }()
	if err != nil {
		return out, err
	}
	fn = timed(s, c, fn) // metrics: the reserve, call and complete steps
	out, done, err := doTxFast(ctx, s, c, fn)
	if done {
		return out, err
	}
	for range maxRaces {
		out, err = doTxOnce(ctx, s, c, fn)
		if !errors.Is(err, errRace) {
			return out, err
		}
	}
	return out, &UnavailableError{Err: fmt.Errorf("%s: record kept changing during %d tries: %w", c.Identity, maxRaces, err)}
}

// doTxFast is DoTx in its two common cases, in the fewest round trips: a
// completed record of the same intent is replayed from one read, and an
// identity with no record gets fn's writes and its record inserted
// completed, in one transaction. Anything else (a record in another state
// or of another intent, a twin that committed first, a tombstone) is left
// to doTxOnce: done is false, and nothing was committed.
func doTxFast[R any](ctx context.Context, s *Store, c *call, fn func(context.Context, pgx.Tx) (R, error)) (out Reply[R], done bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return out, true, fmt.Errorf("read %s: %w", c.Identity, notWritten(err))
	}
	defer conn.Release()
	rec, result, found, err := peek(ctx, conn, c.Identity)
	if err != nil {
		return out, true, fmt.Errorf("read %s: %w", c.Identity, notWritten(err))
	}
	if found {
		if decide(c, &rec) != decideReplay {
			return out, false, nil
		}
		out, err = replay[R](c, &priorResult{rec: rec, result: result})
		return out, true, err
	}

	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return out, true, fmt.Errorf("begin transaction: %w", notWritten(err))
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
		}
	}()
	ran, err := runTxFn(ctx, s, tx, fn)
	if err != nil {
		return out, true, err
	}
	if c.policy.AfterExpiry == RejectAfterExpiry {
		id, inserted, err := s.insertCompleted(ctx, tx, c, ran.outcome, ran.enc.js, ran.enc.ref)
		if err != nil {
			return out, true, ran.storeFailed(c, err)
		}
		if !inserted {
			return out, false, nil // rolled back on return
		}
		committed = true
		out, err = ran.commit(ctx, tx, c, lease{ID: id, Attempt: 1})
		return out, true, err
	}
	id, inserted, err := s.insertCompletedCommit(ctx, tx, c, ran.outcome, ran.enc.js, ran.enc.ref, func(err error) error {
		return &OutcomeUnknownError{Identity: c.Identity, Attempt: 1, Step: StepCommit, Err: err}
	})
	var unknown *OutcomeUnknownError
	switch {
	case errors.As(err, &unknown):
		return out, true, fmt.Errorf("commit %s: %w", c.Identity, err)
	case err != nil:
		return out, true, ran.storeFailed(c, err)
	case !inserted:
		return out, false, nil // rolled back on return
	}
	committed = true
	out, err = ran.answer(c, lease{ID: id, Attempt: 1})
	return out, true, err
}

func doTxOnce[R any](ctx context.Context, s *Store, c *call, fn func(context.Context, pgx.Tx) (R, error)) (Reply[R], error) {
	var out Reply[R]
	// Read committed: a reservation blocked by a concurrent twin sees its
	// committed record once the twin commits, whatever the database's
	// default isolation is.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return out, fmt.Errorf("begin transaction: %w", notWritten(err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit

	l, ok, _, err := s.reserve(ctx, tx, c)
	if err != nil {
		return out, reserveError(c, err)
	}
	if !ok {
		var prior *priorResult
		l, prior, err = s.resolveExisting(ctx, tx, c)
		var conflict *IntentConflictError
		if errors.As(err, &conflict) {
			// The refused attempt must be on record even though nothing
			// else happens.
			if cerr := commit(ctx, tx, func(err error) error {
				return &OutcomeUnknownError{Identity: c.Identity, OperationID: conflict.OperationID, Step: StepConflict, Err: err}
			}); cerr != nil {
				return out, fmt.Errorf("record intent conflict on %s: %w", c.Identity, cerr)
			}
		}
		if err != nil {
			return out, err
		}
		if prior != nil {
			return replay[R](c, prior)
		}
	}

	ran, err := runTxFn(ctx, s, tx, fn)
	if err != nil {
		return out, err
	}
	if err := s.complete(ctx, tx, c, l, ran.outcome, ran.enc.js, ran.enc.ref); err != nil {
		if classified(err) { // lost ownership
			return out, err
		}
		return out, ran.storeFailed(c, err)
	}
	return ran.commit(ctx, tx, c, l)
}

// txRun is what fn returned in DoTx's transaction, ready to store.
type txRun[R any] struct {
	result  R
	outcome RecordOutcome
	enc     *encoded
	field   string     // "result" or "rejection", for errors
	rej     *rejection // set when fn rejected
}

// runTxFn calls fn with tx and encodes its result or rejection. What the
// store cannot hold is refused here, before anything commits, so that
// nothing fn wrote commits without a record a retry could replay.
func runTxFn[R any](ctx context.Context, s *Store, tx pgx.Tx, fn func(context.Context, pgx.Tx) (R, error)) (txRun[R], error) {
	r, ferr := fn(ctx, callerTx{tx})
	run := txRun[R]{result: r, outcome: OutcomeSucceeded, field: "result"}
	payload := any(r)
	if ferr != nil {
		if !errors.As(ferr, &run.rej) {
			return run, fnFailed(ferr)
		}
		run.outcome, run.field, payload = OutcomeRejected, "rejection", run.rej.payload
	}
	run.enc = encode(payload, s.maxResult)
	return run, run.enc.refuse(run.field)
}

// storeFailed is the error of a failed write of the record: the server
// refused the value, or nothing was written.
func (run *txRun[R]) storeFailed(c *call, err error) error {
	if code, refused := storeRefused(err); refused {
		return refusedByStore(run.field, code)
	}
	return fmt.Errorf("complete %s: %w", c.Identity, notWritten(err))
}

// commit commits the business writes with the record of attempt l and
// answers the call.
func (run *txRun[R]) commit(ctx context.Context, tx pgx.Tx, c *call, l lease) (Reply[R], error) {
	if err := commit(ctx, tx, func(err error) error {
		// The record commits with the business writes or not at all, so a
		// retry is safe either way: it replays or executes.
		return &OutcomeUnknownError{Identity: c.Identity, OperationID: l.ID, Attempt: l.Attempt, Step: StepCommit, Err: err}
	}); err != nil {
		return Reply[R]{}, fmt.Errorf("commit %s: %w", c.Identity, err)
	}
	return run.answer(c, l)
}

// answer is the call's answer once the record of attempt l committed with
// the business writes.
func (run *txRun[R]) answer(c *call, l lease) (Reply[R], error) {
	if run.rej != nil {
		return Reply[R]{}, &RejectedError{Identity: c.Identity, OperationID: l.ID, Payload: run.enc.js}
	}
	return Reply[R]{Result: run.result, Disposition: Created, OperationID: l.ID, Attempt: l.Attempt, ResultRef: deref(run.enc.ref)}, nil
}

// commit commits DoTx's transaction. A caller that cancelled before gets
// nothing committed; once sent, the COMMIT is not cut short by ctx, because
// the library could not tell afterwards whether it happened. A commit that
// failed but may have happened is what unknown makes of its error.
func commit(ctx context.Context, tx pgx.Tx, unknown func(error) error) error {
	wctx, cancel, err := shielded(ctx)
	if err != nil {
		return notWritten(err)
	}
	defer cancel()
	err = tx.Commit(wctx)
	switch {
	case err == nil:
		return nil
	case mayHaveCommitted(err, true):
		// A COMMIT's answer is a command tag that pgx does not show when
		// an error follows it: it counts as answered.
		return unknown(err)
	}
	return notWritten(err)
}

// Attempt is what an external call needs to know about its attempt.
type Attempt struct {
	// Identity is the operation's. Send ProviderKey() to the provider as
	// its idempotency key (the same for every attempt of the operation);
	// Key is the caller's raw key, unique only within (tenant, tool).
	Identity
	OperationID int64
	// Number counts attempts: 1, then one more per takeover or release.
	// It is the fencing token of the record's lease.
	Number int
}

// DoExternal runs an external effect at most once per identity unless the
// provider deduplicates by key. It commits a pending reservation first,
// renews its lease while fn runs (fn's context is cancelled, with cause
// ErrLeaseLost, when the lease cannot be renewed), then stores the result
// with a compare-and-set on (owner, attempt).
//
// fn classifies its failures: NotApplied(err) when the effect definitely did
// not happen (the reservation is released), Reject(payload) for a business
// rejection (stored and replayed), and any other error when the outcome is
// unknown: the record stays pending and is never deleted or marked failed.
//
// A database failure before the provider is called wrote nothing
// (ErrUnavailable, ErrStoreRefused), except when the answer to the reservation
// itself was lost: ErrOutcomeUnknown with Step StepReserve. The reservation,
// once sent, is not cut short by ctx (writeTimeout bounds it); if ctx ended
// meanwhile, the lease is released and the provider is not called. A failure
// to store the provider's answer is ErrNotRecorded.
//
// The provider has acted by the time fn returns, so a result or rejection
// payload the store cannot hold is never refused: the record completes
// with a marker in its place (and the result's reference), the call
// returns the real result with Reply.NotStored set (or a *RejectedError
// with NotStored set), and retries get *ResultNotStoredError (or the
// rejection with the marker as its payload). A result reference the store
// cannot hold (over 500 bytes, not UTF-8, U+0000) is left out of the
// record; the stored result still carries it.
func DoExternal[R any](ctx context.Context, s *Store, req Request, fn func(ctx context.Context, a Attempt) (R, error)) (out Reply[R], err error) {
	c, err := s.newCall(req, true)
	defer func() {
		d := out.Disposition
		if out.NotStored != nil && err == nil {
			d = createdNotStored
		}
		s.logCall(ctx, c, out.OperationID, out.Attempt, d, err)
	}()
	if err != nil {
		return out, err
	}
	fn = timed(s, c, fn) // metrics: the reserve, call and complete steps
	var l lease
	for try := 0; ; try++ {
		if try == maxRaces {
			return out, &UnavailableError{Err: fmt.Errorf("%s: record kept changing during %d tries: %w", c.Identity, maxRaces, errRace)}
		}
		var prior *priorResult
		l, prior, err = s.acquire(ctx, c)
		if errors.Is(err, errRace) {
			continue
		}
		if err != nil {
			return out, err
		}
		if prior != nil {
			return replay[R](c, prior)
		}
		break
	}
	if err := ctx.Err(); err != nil {
		// The caller gave up while the lease was being written: hand it
		// back rather than call the provider with a cancelled context.
		return out, s.abandon(ctx, c, l, err)
	}
	return runExternal(ctx, s, c, l, fn)
}

// acquire reserves the record or takes over an existing one, outside any
// transaction: the reservation must be durable before the provider is
// called.
func (s *Store) acquire(ctx context.Context, c *call) (lease, *priorResult, error) {
	// One connection for the whole step, taken first: failing to get one
	// certainly sent nothing.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return lease{}, nil, fmt.Errorf("reserve %s: %w", c.Identity, notWritten(err))
	}
	defer conn.Release()
	wctx, cancel, err := writeContext(ctx, conn)
	if err != nil {
		return lease{}, nil, fmt.Errorf("reserve %s: %w", c.Identity, notWritten(err))
	}
	l, ok, answered, err := s.reserve(wctx, conn, c)
	cancel()
	if err != nil {
		if code, refused := storeRefused(err); refused {
			return l, nil, refusedIntent(code)
		}
		return l, nil, fmt.Errorf("reserve %s: %w", c.Identity, writeFailed(conn, err, answered, func(err error) error {
			return &OutcomeUnknownError{Identity: c.Identity, OperationID: l.ID, Attempt: 1, Step: StepReserve, Err: err}
		}))
	}
	if ok {
		return l, nil, nil
	}
	return s.resolveExisting(ctx, conn, c)
}

// abandon releases a lease acquired for a call whose context ended before
// the provider was called. cause is the context's error.
func (s *Store) abandon(ctx context.Context, c *call, l lease, cause error) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if _, err := s.pool.Exec(wctx, releaseSQL, c.Tenant, c.Tool, c.Key, s.owner, l.Attempt); err != nil {
		return &OutcomeUnknownError{Identity: c.Identity, OperationID: l.ID, Attempt: l.Attempt, Step: StepReserve,
			Err: fmt.Errorf("%w; releasing the reservation failed: %w", cause, err)}
	}
	// Released (or, had it been taken from this attempt meanwhile, left to
	// its new owner): nothing of this call stands.
	return &UnavailableError{Err: fmt.Errorf("%s: the reservation was released unused: %w", c.Identity, cause)}
}

func runExternal[R any](ctx context.Context, s *Store, c *call, l lease, fn func(context.Context, Attempt) (R, error)) (Reply[R], error) {
	out := Reply[R]{OperationID: l.ID, Attempt: l.Attempt}
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := s.keepLease(ctx, c, l, cancel)
	returned := false
	defer func() {
		if !returned {
			// fn panicked: its outcome is unknown, and the panic goes on
			// to the caller once the record says so.
			s.endLease(ctx, c, l)
		}
	}()
	r, ferr := func() (R, error) {
		defer stop() // also when fn panics
		return fn(callCtx, Attempt{Identity: c.Identity, OperationID: l.ID, Number: l.Attempt})
	}()
	returned = true

	// Record what happened even if the caller's context is done.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer wcancel()
	var rej *rejection
	switch {
	case ferr == nil:
		out.Result = r
		enc := encode(r, s.maxResult)
		if err := s.completeExternal(wctx, c, l, OutcomeSucceeded, enc); err != nil {
			s.endLease(ctx, c, l)
			return out, notRecorded(c, l, err)
		}
		out.Disposition, out.ResultRef, out.NotStored = Created, deref(enc.ref), enc.notStored
		return out, nil

	case errors.As(ferr, &rej):
		enc := encode(rej.payload, s.maxResult)
		if err := s.completeExternal(wctx, c, l, OutcomeRejected, enc); err != nil {
			s.endLease(ctx, c, l)
			return out, notRecorded(c, l, err)
		}
		payload := enc.js
		if payload == nil { // not encodable: the marker says so
			payload = enc.stored()
		}
		return out, &RejectedError{Identity: c.Identity, OperationID: l.ID, Payload: payload, NotStored: enc.notStored}

	case errors.Is(ferr, ErrNotApplied):
		// The provider's own error, without the wrapper that says "not
		// applied": released or not, the record says otherwise if the
		// release fails.
		providerErr := ferr
		if n := (*notApplied)(nil); errors.As(ferr, &n) {
			providerErr = n.err
		}
		tag, err := s.pool.Exec(wctx, releaseSQL, c.Tenant, c.Tool, c.Key, s.owner, l.Attempt)
		if err != nil {
			s.endLease(ctx, c, l)
			return out, &NotRecordedError{Identity: c.Identity, OperationID: l.ID, Attempt: l.Attempt,
				Err: fmt.Errorf("the provider said the effect did not happen (%w), but releasing the reservation failed: %w", providerErr, err)}
		}
		if tag.RowsAffected() == 0 {
			// A newer attempt or an operator owns the record now: nothing
			// was released, and saying so would be false.
			return out, fmt.Errorf("%w (this attempt was %w)", &LostOwnershipError{Identity: c.Identity, OperationID: l.ID, Owner: s.owner, Attempt: l.Attempt}, ferr)
		}
		return out, ferr

	default:
		s.endLease(ctx, c, l)
		return out, &OutcomeUnknownError{Identity: c.Identity, OperationID: l.ID, Attempt: l.Attempt, Step: StepCall, Err: ferr}
	}
}

// endLease ends at once the lease of an attempt that returned (or
// panicked) without an outcome the record can store: nobody is handling
// the record any more, and saying it is "in progress" until the lease ran
// out would be false. The record is stuck from now on: a provider that
// deduplicates by key is taken over by the next attempt, any other waits
// for a person (ErrNeedsReconciliation), and the console and the exporter
// count it now. Best effort: the lease expires by itself anyway.
func (s *Store) endLease(ctx context.Context, c *call, l lease) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	_, _ = s.pool.Exec(wctx, expireLeaseSQL, c.Tenant, c.Tool, c.Key, s.owner, l.Attempt)
}

// The attempt-owned writes: each is a compare-and-set on (owner, attempt)
// of a pending record.
const (
	releaseSQL = `
UPDATE opsdesk.operations
SET state = 'released', updated_at = clock_timestamp(), version = version + 1
WHERE tenant = $1 AND tool = $2 AND key = $3 AND owner = $4 AND attempt = $5 AND state = 'pending'`

	// Renewal does not bump the version: it changes nothing an operator
	// decides on, and a takeover re-checks the lease itself. An expired
	// lease is not renewed: once expired, it belongs to whoever takes it.
	renewLeaseSQL = `
UPDATE opsdesk.operations
SET lease_expires_at = clock_timestamp() + $6 * interval '1 microsecond'
WHERE tenant = $1 AND tool = $2 AND key = $3 AND owner = $4 AND attempt = $5 AND state = 'pending'
  AND lease_expires_at > clock_timestamp()`

	expireLeaseSQL = `
UPDATE opsdesk.operations
SET lease_expires_at = least(lease_expires_at, clock_timestamp())
WHERE tenant = $1 AND tool = $2 AND key = $3 AND owner = $4 AND attempt = $5 AND state = 'pending'`
)

// keepLease renews the lease every heartbeat interval until stop is
// called. When the record is no longer this attempt's, or renewals fail for
// longer than the lease, it cancels the call with cause ErrLeaseLost.
func (s *Store) keepLease(ctx context.Context, c *call, l lease, lost context.CancelCauseFunc) (stop func()) {
	interval := s.heartbeat
	if interval == 0 {
		interval = c.policy.Lease / 3
	}
	lost = s.watchLease(c, lost) // metrics: ownership lost
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		// validUntil is a conservative local bound on the lease: the
		// lease length from when the last successful renewal was sent.
		validUntil := time.Now().Add(c.policy.Lease)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			sent := time.Now()
			rctx, cancel := context.WithTimeout(ctx, interval)
			tag, err := s.pool.Exec(rctx, renewLeaseSQL, c.Tenant, c.Tool, c.Key, s.owner, l.Attempt, c.policy.Lease.Microseconds())
			cancel()
			s.renewalFailed(ctx, c, err) // metrics
			switch {
			case err == nil && tag.RowsAffected() == 1:
				validUntil = sent.Add(c.policy.Lease)
			case err == nil:
				lost(ErrLeaseLost)
				return
			case time.Until(validUntil) <= interval:
				// The lease may lapse before the next try: stop the call
				// before a takeover can run beside it.
				lost(fmt.Errorf("%w: %w", ErrLeaseLost, err))
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// priorResult is what an earlier attempt stored.
type priorResult struct {
	rec    Record
	result []byte
}

// resolveExisting applies the state machine to an identity that already has
// a record: it takes the record over (returning the new lease), returns the
// stored result to replay, or refuses the attempt. Conflicts are recorded
// through q.
func (s *Store) resolveExisting(ctx context.Context, q dbtx, c *call) (lease, *priorResult, error) {
	rec, result, err := load(ctx, q, c.Identity)
	if err != nil {
		return lease{}, nil, fmt.Errorf("read %s: %w", c.Identity, notWritten(err))
	}
	if rec.State == StateAbsent {
		if c.policy.AfterExpiry == RejectAfterExpiry && !rec.PurgedAt.IsZero() {
			return lease{}, nil, &ExpiredError{Identity: c.Identity, OperationID: rec.ID, PurgedAt: rec.PurgedAt}
		}
		return lease{}, nil, errRace // purged between the insert and the read
	}
	switch d := decide(c, &rec); d {
	case decideReplay:
		return lease{}, &priorResult{rec: rec, result: result}, nil
	case decideConflict:
		return lease{}, nil, s.recordConflict(ctx, q, c, &rec)
	case decideTakeOver:
		wctx, cancel, err := writeContext(ctx, q)
		if err != nil {
			return lease{}, nil, fmt.Errorf("take over %s: %w", c.Identity, notWritten(err))
		}
		l, ok, answered, err := s.takeOver(wctx, q, c, rec.Version)
		cancel()
		if err != nil {
			return l, nil, fmt.Errorf("take over %s: %w", c.Identity, writeFailed(q, err, answered, func(err error) error {
				return &OutcomeUnknownError{Identity: c.Identity, OperationID: rec.ID, Attempt: rec.Attempt + 1, Step: StepReserve, Err: err}
			}))
		}
		if !ok {
			return l, nil, errRace
		}
		s.tookOver(c, &rec) // metrics
		return l, nil, nil
	default:
		return lease{}, nil, refusal(c, &rec, d)
	}
}

// notRecorded is the error for an external effect whose outcome happened
// but could not be stored.
func notRecorded(c *call, l lease, err error) error {
	var lost *LostOwnershipError
	if errors.As(err, &lost) {
		return err
	}
	return &NotRecordedError{Identity: c.Identity, OperationID: l.ID, Attempt: l.Attempt, Err: err}
}

// callerTx is the transaction DoTx lends to fn: fn may write through it
// but not end it, since the record must commit with the business writes.
type callerTx struct{ pgx.Tx }

// errTxLent is what fn gets when it tries to end DoTx's transaction.
var errTxLent = errors.New("ops: the transaction belongs to DoTx: return from fn instead of committing or rolling back")

func (callerTx) Commit(context.Context) error   { return errTxLent }
func (callerTx) Rollback(context.Context) error { return errTxLent }

// replay answers with an earlier attempt's stored outcome.
func replay[R any](c *call, prior *priorResult) (Reply[R], error) {
	out := Reply[R]{Disposition: Replayed, OperationID: prior.rec.ID, Attempt: prior.rec.Attempt, ResultRef: prior.rec.ResultRef}
	result, err := c.openResult(&prior.rec, prior.result)
	if err != nil {
		out.Disposition = ""
		return out, err
	}
	notStored, _ := storedMarker(result)
	if prior.rec.Outcome == OutcomeRejected {
		out.Disposition = ""
		return out, &RejectedError{Identity: c.Identity, OperationID: prior.rec.ID, Payload: result, Replayed: true, NotStored: notStored}
	}
	if notStored != nil {
		// Decoding the marker into R would pass a zero result off as the
		// stored one.
		out.NotStored = notStored
		return out, &ResultNotStoredError{Identity: c.Identity, OperationID: prior.rec.ID, ResultRef: prior.rec.ResultRef, ResultNotStored: *notStored}
	}
	if err := json.Unmarshal(result, &out.Result); err != nil {
		return Reply[R]{}, fmt.Errorf("%s: stored result does not decode into %T: %w", c.Identity, out.Result, err)
	}
	return out, nil
}

// completeExternal stores an external call's result, or the marker of a
// result the store cannot hold: the provider has acted, and the record
// must say so. A value the server refuses though the library's checks
// passed is stored as a marker on a second try.
func (s *Store) completeExternal(ctx context.Context, c *call, l lease, outcome RecordOutcome, enc *encoded) error {
	err := s.complete(ctx, s.pool, c, l, outcome, enc.stored(), enc.ref)
	if code, refused := storeRefused(err); refused && enc.notStored == nil {
		enc.notStored = newNotStored(enc.js, "was refused by the store (SQLSTATE "+code+")")
		err = s.complete(ctx, s.pool, c, l, outcome, enc.stored(), enc.ref)
	}
	return err
}

// reserveError is the error of a failed reservation. Nothing was written:
// the reservation is the first write. An intent the server refuses (one
// nested deeper than its stack allows) is the request's fault.
func reserveError(c *call, err error) error {
	if code, refused := storeRefused(err); refused {
		return refusedIntent(code)
	}
	return fmt.Errorf("reserve %s: %w", c.Identity, notWritten(err))
}

// refusedIntent is a reservation the server refused for a value it cannot
// hold (SQLSTATE code).
func refusedIntent(code string) error {
	return &InvalidRequestError{Field: "intent", Problem: "was refused by the store (SQLSTATE " + code + "); nothing was written"}
}

// createdNotStored names, in logs only, a DoExternal call that ran but
// whose result was stored as a marker.
const createdNotStored Disposition = "created_not_stored"
