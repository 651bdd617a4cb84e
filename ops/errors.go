package ops

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Every error the library returns for one of these
// situations matches it with errors.Is; the typed errors carry the details.
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
	// ErrOutcomeUnknown: the external call failed without saying whether
	// the effect happened. The record stays pending.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrNotApplied: the external call said the effect definitely did not
	// happen; the reservation was released. See NotApplied.
	ErrNotApplied = errors.New("effect not applied")
	// ErrUnavailable: the operation store could not be reached before
	// anything was written.
	ErrUnavailable = errors.New("operation store unavailable")
	// ErrNotRecorded: an external call finished (applied or rejected) but
	// its outcome could not be stored. The record stays pending and needs
	// reconciliation once its lease expires. See *NotRecordedError.
	ErrNotRecorded = errors.New("outcome not recorded")
	// ErrLeaseLost is the cause of an external call's context
	// cancellation when its lease could not be renewed.
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
	// ConflictID is the recorded attempt's id in the conflicts table.
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
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("operation %s (%d) in progress: owned by %s (attempt %d), retry after %v",
		e.Identity, e.OperationID, e.Owner, e.Attempt, e.RetryAfter.Round(time.Millisecond))
}

func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// NeedsReconciliationError: an unknown-outcome external effect whose lease
// expired.
type NeedsReconciliationError struct {
	Identity
	OperationID int64
	Owner       string
	Attempt     int
	// LeaseExpiredFor is how long ago the lease expired, by the database
	// clock.
	LeaseExpiredFor time.Duration
}

func (e *NeedsReconciliationError) Error() string {
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

// OutcomeUnknownError: the external call failed without a definite answer.
// The record stays pending (never deleted, never marked failed).
type OutcomeUnknownError struct {
	Identity
	OperationID int64
	Attempt     int
	Err         error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("operation %s (%d) attempt %d: outcome unknown, the record stays pending: %v",
		e.Identity, e.OperationID, e.Attempt, e.Err)
}

func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// UnavailableError: the store could not be reached or stopped answering
// before anything was written.
type UnavailableError struct {
	Err error
}

func (e *UnavailableError) Error() string { return "operation store unavailable: " + e.Err.Error() }

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

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
// record how. The effect may well have happened: do not assume otherwise.
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
