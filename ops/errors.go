package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jackc/pgerrcode"
	"time"
)

// Sentinel errors. Every error DoTx, DoExternal and Lookup return matches
// exactly one of them with errors.Is, with two exceptions: an error of fn's
// own (not from the database), and a result that does not encode as JSON or
// does not decode into R, are returned as they are; an attempt that was not
// applied and had lost its lease meanwhile matches ErrLostOwnership and
// ErrNotApplied, both true. The typed errors carry the details, and the
// underlying error (a *pgconn.PgError, context.Canceled…) stays in the
// chain.
//
// When the database fails, the error says what was written, in one of three
// classes:
//
//   - nothing was written: ErrUnavailable. A retry with the same key is safe
//     and may succeed (Retry does it).
//   - the database refused the statement: ErrStoreRefused. Nothing was written,
//     and a retry fails the same way until someone fixes the cause.
//   - the outcome is unknown: ErrOutcomeUnknown (see Step for what may have
//     happened) and ErrNotRecorded. A retry with the same key is still safe:
//     it replays, executes, waits or asks for a person, as the record says.
var (
	// ErrInvalidRequest: a bad identity, version or intent. Nothing was
	// written. See *InvalidRequestError.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnknownTool: the store has no policy for the request's tool.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrWrongEffect: DoTx on an external tool or DoExternal on a local one.
	ErrWrongEffect = errors.New("tool's effect does not match the call")
	// ErrIntentConflict: the key was first used with a different intent.
	// The attempt was recorded; the original record is unchanged.
	// See *IntentConflictError.
	ErrIntentConflict = errors.New("intent conflict")
	// ErrInProgress: another owner holds a live lease on the operation.
	// See *InProgressError for when to retry.
	ErrInProgress = errors.New("operation in progress")
	// ErrNeedsReconciliation: an earlier attempt's external effect has an
	// unknown outcome and its lease expired. It is never re-executed
	// automatically: a person must decide. See *NeedsReconciliationError.
	ErrNeedsReconciliation = errors.New("operation needs reconciliation")
	// ErrRejected: the operation completed with a business rejection, now
	// or (when Replayed) in an earlier attempt. See *RejectedError.
	ErrRejected = errors.New("operation rejected")
	// ErrLostOwnership: the attempt's completion was refused because its
	// lease was taken over or an operator decided in the meantime.
	ErrLostOwnership = errors.New("lost ownership of the operation")
	// ErrOutcomeUnknown: something may have happened that the library could
	// not observe: the external call failed without saying whether the
	// effect happened (the record stays pending), or the answer to a write
	// was lost. See *OutcomeUnknownError and its Step.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrNotApplied: the external call said the effect definitely did not
	// happen; the reservation was released. See NotApplied.
	ErrNotApplied = errors.New("effect not applied")
	// ErrUnavailable: nothing was written. The store could not be reached,
	// failed in a way a later attempt may not meet (a restart, a terminated
	// backend, a serialization failure, too many connections), or the
	// call's context ended before anything committed. A retry with the same
	// key is safe. See *UnavailableError.
	ErrUnavailable = errors.New("operation store unavailable")
	// ErrStoreRefused: the database refused a statement and nothing was written:
	// the role lacks a privilege, the schema is missing, or a constraint or
	// the store's state machine rejected the write. A retry fails the same
	// way until someone fixes the cause. See *RefusedError.
	ErrStoreRefused = errors.New("refused by the database")
	// ErrNotRecorded: an external call finished (applied, rejected or not
	// applied) but storing its outcome failed, or the answer to that write
	// was lost. The record may stay pending, and then needs reconciliation
	// once its lease expires. See *NotRecordedError.
	ErrNotRecorded = errors.New("outcome not recorded")
	// ErrLeaseLost is the cause of an external call's context
	// cancellation when its lease could not be renewed. It is a cause, not
	// a class: the call's error is the one fn's failure gets, usually
	// ErrOutcomeUnknown, with ErrLeaseLost in its chain when fn returns
	// context.Cause(ctx).
	ErrLeaseLost = errors.New("lease could not be renewed")
	// ErrExpired: the identity's record was purged and the tool rejects
	// retries after expiry (RejectAfterExpiry). Nothing ran. See
	// *ExpiredError.
	ErrExpired = errors.New("operation expired")
)

// ExpiredError is a retry of an identity whose record was purged, for a
// tool that rejects retries after expiry.
type ExpiredError struct {
	Identity
	// OperationID is the purged record's id; PurgedAt when it went.
	OperationID int64
	PurgedAt    time.Time
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("operation %s (%d) expired: its record was purged at %s, and the tool refuses retries after expiry",
		e.Identity, e.OperationID, e.PurgedAt.UTC().Format(time.RFC3339))
}

func (e *ExpiredError) Is(target error) bool { return target == ErrExpired }

// InvalidRequestError says which part of a request is wrong and why.
type InvalidRequestError struct {
	Field   string
	Problem string
	// Err is the underlying error, such as the one Validate returned.
	Err error
}

func (e *InvalidRequestError) Error() string {
	return fmt.Sprintf("invalid request: %s %s", e.Field, e.Problem)
}

func (e *InvalidRequestError) Is(target error) bool { return target == ErrInvalidRequest }

func (e *InvalidRequestError) Unwrap() error { return e.Err }

// IntentConflictError is a refused attempt that reused a key with a
// different intent.
type IntentConflictError struct {
	Identity
	// OperationID is the original record's id.
	OperationID int64
	// ConflictID is the recorded attempt's id in the conflicts table,
	// which keeps the attempt's canonical request beside its fingerprint
	// for an operator's audited reveal (opsdesk conflicts show).
	ConflictID int64
	// Stored and Attempted are the fingerprints of the original intent and
	// of this attempt's.
	Stored, Attempted Fingerprint
	StoredVersion     string
	AttemptedVersion  string
}

func (e *IntentConflictError) Error() string {
	return fmt.Sprintf("intent conflict on %s (operation %d): the key was first used with intent %s (version %s), "+
		"this attempt has %s (version %s); use a new key for a new intent (conflict %d recorded)",
		e.Identity, e.OperationID, e.Stored.Short(), e.StoredVersion, e.Attempted.Short(), e.AttemptedVersion, e.ConflictID)
}

func (e *IntentConflictError) Is(target error) bool { return target == ErrIntentConflict }

// InProgressError: another owner holds a live lease.
type InProgressError struct {
	Identity
	OperationID int64
	Owner       string
	Attempt     int
	// RetryAfter is the time left on the owner's lease, by the database
	// clock.
	RetryAfter time.Duration
	// Running is how long the owner's attempt has run: since its lease
	// was taken, by the database clock.
	Running time.Duration
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("operation %s (%d) in progress: owned by %s (attempt %d), retry after %v",
		e.Identity, e.OperationID, e.Owner, e.Attempt, e.RetryAfter.Round(time.Millisecond))
}

func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// NeedsReconciliationError: an unknown-outcome external effect whose lease
// expired, or a pending record whose lease no service could have written.
type NeedsReconciliationError struct {
	Identity
	OperationID int64
	Owner       string
	Attempt     int
	// LeaseExpiredFor is how long ago the lease expired, by the database
	// clock.
	LeaseExpiredFor time.Duration
	// LeaseEnds is set when the lease has not expired but ends later than
	// any service may write (more than MaxLease after the database clock,
	// Infinity for 'infinity'): only a superuser or a restored backup
	// writes such a lease, nobody renews it, and waiting for it would
	// answer every retry "in progress" for ever.
	LeaseEnds time.Time
}

func (e *NeedsReconciliationError) Error() string {
	if !e.LeaseEnds.IsZero() {
		ends := "never ends"
		if !e.LeaseEnds.Equal(Infinity) {
			ends = "ends " + e.LeaseEnds.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("operation %s (%d) needs reconciliation: the lease of attempt %d by %s %s, later than any "+
			"service may write (%v from now); it will not be executed again until an operator decides",
			e.Identity, e.OperationID, e.Attempt, e.Owner, ends, MaxLease)
	}
	return fmt.Sprintf("operation %s (%d) needs reconciliation: attempt %d by %s may or may not have taken effect "+
		"(lease expired %v ago); it will not be executed again until an operator decides",
		e.Identity, e.OperationID, e.Attempt, e.Owner, e.LeaseExpiredFor.Round(time.Millisecond))
}

func (e *NeedsReconciliationError) Is(target error) bool { return target == ErrNeedsReconciliation }

// RejectedError is a business rejection, returned by the attempt that
// stored it and replayed to every later equivalent attempt.
type RejectedError struct {
	Identity
	OperationID int64
	// Payload is the rejection as stored (JSON).
	Payload json.RawMessage
	// Replayed is true when the rejection was stored by an earlier attempt.
	Replayed bool
	// NotStored is set when DoExternal could not store the payload as it
	// was: Payload is the real one in the attempt that ran, and the
	// stored marker on a replay.
	NotStored *ResultNotStored
}

func (e *RejectedError) Error() string {
	how := "was rejected"
	if e.Replayed {
		how = "was rejected by an earlier attempt (replayed)"
	}
	// The payload stays out of the message, which ends up in logs.
	return fmt.Sprintf("operation %s (%d) %s", e.Identity, e.OperationID, how)
}

func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

// Decode unmarshals the rejection payload into v.
func (e *RejectedError) Decode(v any) error { return json.Unmarshal(e.Payload, v) }

// LostOwnershipError: the attempt's compare-and-set completion matched no
// record, because a newer attempt took the lease over or an operator
// decided. The newer decision stands.
type LostOwnershipError struct {
	Identity
	OperationID int64
	Owner       string
	Attempt     int
}

func (e *LostOwnershipError) Error() string {
	return fmt.Sprintf("operation %s (%d): attempt %d by %s lost ownership before completing; its result was not recorded",
		e.Identity, e.OperationID, e.Attempt, e.Owner)
}

func (e *LostOwnershipError) Is(target error) bool { return target == ErrLostOwnership }

// Step names what an OutcomeUnknownError could not observe.
type Step string

// What may or may not have happened when the outcome is unknown.
const (
	// StepCall: DoExternal's provider call failed without saying whether
	// the effect happened. The record stays pending: an idempotent
	// provider's next attempt takes it over with the same key, any other is
	// refused with ErrNeedsReconciliation once the lease expires.
	StepCall Step = "provider call"
	// StepCommit: DoTx's COMMIT was sent and its answer lost. The record
	// and the business writes committed together or not at all: an
	// equivalent retry replays them or executes them.
	StepCommit Step = "commit"
	// StepReserve: the answer to DoExternal's reservation (or takeover of
	// a record) was lost. The provider was not called, but the record may
	// be pending under this attempt's lease: a retry gets ErrInProgress
	// until the lease expires, then what the tool's effect allows.
	StepReserve Step = "reservation"
	// StepConflict: the key was used with another intent, and the answer to
	// the write recording this attempt was lost: it may or may not be on
	// record. A retry gets ErrIntentConflict.
	StepConflict Step = "conflict record"
)

// OutcomeUnknownError: something may have happened that the library could
// not observe. A pending record is never deleted or marked failed because
// of it.
type OutcomeUnknownError struct {
	Identity
	OperationID int64
	Attempt     int
	// Step is what may or may not have happened.
	Step Step
	Err  error
}

func (e *OutcomeUnknownError) Error() string {
	switch e.Step {
	case StepCommit:
		return fmt.Sprintf("operation %s attempt %d: the commit's answer was lost, so it committed whole or not at all; "+
			"an equivalent retry replays or executes it: %v", e.Identity, e.Attempt, e.Err)
	case StepReserve:
		return fmt.Sprintf("operation %s attempt %d: the reservation's answer was lost; the provider was not called, "+
			"but the record may stay pending until its lease expires: %v", e.Identity, e.Attempt, e.Err)
	case StepConflict:
		return fmt.Sprintf("operation %s (%d): the key was used with another intent, and whether this attempt was "+
			"recorded is unknown: %v", e.Identity, e.OperationID, e.Err)
	}
	return fmt.Sprintf("operation %s (%d) attempt %d: outcome unknown, the record stays pending: %v",
		e.Identity, e.OperationID, e.Attempt, e.Err)
}

func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// UnavailableError: nothing was written, because the store could not be
// reached, failed transiently, or the call's context ended first.
type UnavailableError struct {
	Err error
}

func (e *UnavailableError) Error() string {
	if errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded) {
		return "the call ended before anything was written: " + e.Err.Error()
	}
	return "operation store unavailable, nothing was written: " + e.Err.Error()
}

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

// StoreRefusedError: the database refused a statement; nothing was written.
type StoreRefusedError struct {
	// SQLState is the PostgreSQL error code, such as 42501
	// (insufficient_privilege) or 23514 (check_violation, also raised by
	// the state machine's trigger operations_state_machine).
	SQLState string
	Err      error
}

func (e *StoreRefusedError) Error() string {
	switch e.SQLState {
	case pgerrcode.InsufficientPrivilege:
		return "refused by the database: the connected role lacks a privilege (is it granted opsdesk_service?): " + e.Err.Error()
	case pgerrcode.InvalidSchemaName, pgerrcode.UndefinedTable, pgerrcode.UndefinedColumn, pgerrcode.UndefinedFunction:
		return "refused by the database: its operation store is missing or older than this library (run opsdesk migrate): " + e.Err.Error()
	}
	return "refused by the database, nothing was written: " + e.Err.Error()
}

func (e *StoreRefusedError) Is(target error) bool { return target == ErrStoreRefused }

func (e *StoreRefusedError) Unwrap() error { return e.Err }

// Reject returns the error an operation function returns for a business
// rejection: payload is stored (as JSON) and every later equivalent attempt
// gets the same *RejectedError. In DoTx the transaction commits, with
// whatever the function wrote before rejecting.
func Reject(payload any) error { return &rejection{payload: payload} }

type rejection struct{ payload any }

func (r *rejection) Error() string { return "rejected by the business" }

// NotApplied wraps the error of an external call that definitely did not
// take effect (the provider refused it before acting). DoExternal releases
// the reservation, so the next equivalent attempt executes again.
func NotApplied(err error) error { return &notApplied{err: err} }

type notApplied struct{ err error }

func (n *notApplied) Error() string { return "not applied: " + n.err.Error() }

func (n *notApplied) Unwrap() error { return n.err }

func (n *notApplied) Is(target error) bool { return target == ErrNotApplied }

// NotRecordedError: the external call finished but the store could not
// record how, or the answer to that write was lost. The effect may well have
// happened: do not assume otherwise. Err holds the database's error (and,
// when the provider said the effect did not happen, the provider's).
type NotRecordedError struct {
	Identity
	OperationID int64
	Attempt     int
	Err         error
}

func (e *NotRecordedError) Error() string {
	return fmt.Sprintf("operation %s (%d) attempt %d: the provider call finished but its outcome was not recorded; "+
		"the record stays pending for reconciliation: %v", e.Identity, e.OperationID, e.Attempt, e.Err)
}

func (e *NotRecordedError) Is(target error) bool { return target == ErrNotRecorded }

func (e *NotRecordedError) Unwrap() error { return e.Err }
