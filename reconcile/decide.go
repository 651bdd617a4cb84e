package reconcile

import (
	"encoding/json"
	"time"

	"github.com/opsdesk/opsdesk/internal/audited"
)

// Decision is what a person decides about a pending record.
type Decision string

// Decisions: each is described once, by its row in Kinds.
const (
	// Completed: the effect happened; retries replay the recorded result.
	Completed Decision = "completed"
	// NotExecuted: the effect did not happen; the record is released and
	// the next retry with the same intent executes again.
	NotExecuted Decision = "not-executed"
	// Failed: the effect failed for good; retries get the rejection.
	Failed Decision = "failed"
	// Defer: not decidable yet; a note and a snooze time, no change.
	Defer Decision = "defer"
)

// Lookup is a provider lookup's definite answer, if any.
type Lookup string

// Lookup answers. An answer that contradicts a decision makes the decision
// need an explicit override.
const (
	LookupNone     Lookup = ""          // no lookup, or no definite answer
	LookupFound    Lookup = "found"     // the provider has the effect
	LookupNotFound Lookup = "not_found" // the provider has no such effect
)

// Evidence is what a person looked at before deciding. Only the digest
// and the summary reach the audit trail, never the raw response.
type Evidence struct {
	Digest  string // e.g. "sha256:…" of the raw evidence
	Summary string // short, and free of secrets
	Lookup  Lookup
	// Ref is the provider's reference in a found answer: a decision that
	// confirms the effect with another reference contradicts the lookup.
	Ref string
}

// DecideParams is one decision on record OperationID.
type DecideParams struct {
	OperationID int64
	Decision    Decision
	// ExpectVersion is the record version the person looked at; the
	// decision is refused if the record changed since.
	ExpectVersion int64
	Reason        string
	// ResultRef is the provider's reference for the effect: required to
	// confirm completed.
	ResultRef string
	// Result is stored as the record's result (JSON) when confirming
	// completed, or as the rejection when marking failed; optional.
	Result   json.RawMessage
	Evidence Evidence
	// Force decides over a live lease; Override decides against a lookup's
	// definite answer. Both are recorded.
	Force, Override bool
	// Retention is the tool's retention: a record completed or failed by
	// a person expires after it. Zero means ops.DefaultRetention, the
	// library's default.
	Retention time.Duration
	// SnoozeUntil is when a deferred record wants attention again. When it
	// is zero, SnoozeFor is the snooze from the decision's own time (the
	// database clock as decide runs): a person who read the record minutes
	// before confirming gets the snooze they asked for, not a shorter one.
	SnoozeUntil time.Time
	SnoozeFor   time.Duration
	// DisplayName is a name the person claims (configuration); the audit
	// keeps it apart from the authenticated role.
	DisplayName string
	// Batch is the id of the bulk run the decision belongs to, kept in the
	// audit record's details; "" for a decision of its own. It is one
	// opsdesk.start_batch returned to the deciding login (StartBatch):
	// decide refuses another login's run, or an id no run has. Every other
	// check is the same.
	Batch string
	// SealLater leaves the audit entry queued for the caller to seal (a
	// bulk run seals its group's entries at once, at its end, with
	// SealResults): the Result names the entry, and its Seq stays 0.
	SealLater bool
}

// The answers of the audited functions are internal/audited's: these
// names are theirs.
type (
	// AuditOutcome is how an attempt ended, as the audit trail records it.
	AuditOutcome = audited.Outcome
	// Result is the answer to an attempt: the audit record it appended
	// and the record's state and version after it.
	Result = audited.Result
	// RefusedError is an attempt the database refused and audited.
	RefusedError = audited.RefusedError
)

// Outcomes.
const (
	Succeeded = audited.Succeeded
	Denied    = audited.Denied    // the role or the record's state forbids it
	FailedOut = audited.FailedOut // the request was wrong, or the record changed
)

// Refusals, matched with errors.Is on a *RefusedError.
var (
	ErrNotFound          = audited.ErrNotFound
	ErrNotPermitted      = audited.ErrNotPermitted
	ErrInvalid           = audited.ErrInvalid
	ErrChanged           = audited.ErrChanged
	ErrNotPending        = audited.ErrNotPending
	ErrLeaseLive         = audited.ErrLeaseLive
	ErrContradictsLookup = audited.ErrContradictsLookup
	ErrNoConflicts       = audited.ErrNoConflicts
	ErrNoValue           = audited.ErrNoValue
	ErrBusy              = audited.ErrBusy
	ErrPaused            = audited.ErrPaused
	ErrForPeople         = audited.ErrForPeople
)

// Field is a stored value of a record that people see only by revealing
// it.
type Field string

// Fields.
const (
	FieldIntent Field = "intent" // the canonical request
	FieldResult Field = "result" // the result or rejection
)

// Revealed is the start of a revealed value: what a screen can show of a
// value of any size.
type Revealed struct {
	// Text is the value's JSON text as the store writes it, cut after
	// RevealStart's limit (at a character boundary); nil when nothing was
	// stored.
	Text []byte
	// Size is the whole text's length in bytes.
	Size int64
}

// Truncated tells whether Text is only the start of the value.
func (r Revealed) Truncated() bool { return int64(len(r.Text)) < r.Size }
