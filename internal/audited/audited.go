// Package audited holds the answers of the database's audited functions
// (decide, ack_conflicts, reveal_request, grant_access, set_hold,
// purge_*): the Result they answer, the RefusedError a refusal is and the
// refusal codes. reconcile and internal/retention answer in its types; it
// needs no driver, so the console reads them without pgx (the call, the
// scan and the mapping of the database's errors are internal/auditcall's).
package audited

import (
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Outcome is how an attempt ended, as the audit trail records it.
type Outcome string

// Outcomes.
const (
	Succeeded Outcome = "succeeded"
	Denied    Outcome = "denied" // the role or the record's state forbids it
	FailedOut Outcome = "failed" // the request was wrong, or the record changed
)

// Result is the answer to an attempt: the audit record it appended and the
// record's state and version after it.
type Result struct {
	Outcome Outcome `json:"outcome"`
	Code    string  `json:"code,omitempty"`
	Message string  `json:"message,omitempty"`
	// Tenant and Entry name the audit record ("" is the chain of events
	// outside any tenant) from the moment it is queued, in the attempt's
	// transaction; Seq is its place in the chain once sealed, which the
	// call asks for right after it commits (0 while it is still queued).
	// Entry is 0 for a refusal beyond the role's rate of refusals
	// recorded one by one: it is counted, and the count is audited on the
	// "" chain.
	Tenant  string `json:"audit_tenant"`
	Entry   int64  `json:"audit_entry,omitempty"`
	Seq     int64  `json:"audit_seq"`
	State   string `json:"state,omitempty"`
	Version int64  `json:"version,omitempty"`
}

// Refusals, matched with errors.Is on a *RefusedError; each is one of the
// codes the functions answer.
var (
	ErrNotFound          = errors.New("no such operation, or not visible to this role")
	ErrNotPermitted      = errors.New("not permitted for this role")
	ErrInvalid           = errors.New("invalid request")
	ErrChanged           = errors.New("changed since you looked")
	ErrNotPending        = errors.New("nothing to decide: the record is not pending")
	ErrLeaseLive         = errors.New("the lease is live: deciding needs force")
	ErrContradictsLookup = errors.New("the lookup contradicts the decision: deciding needs override")
	ErrNoConflicts       = errors.New("no unreviewed conflicts")
	ErrNoValue           = errors.New("no stored value")
	ErrBusy              = errors.New("the record is held by another transaction")
	// ErrPaused: the reconciler is paused (opsdesk reconciler pause); its
	// login decides nothing until an admin resumes it.
	ErrPaused = errors.New("the reconciler is paused")
	// ErrForPeople: the record is one a reconciler leaves to people (held,
	// unreviewed conflicting attempts, deferred by a person).
	ErrForPeople = errors.New("left to people")
)

var codes = map[string]error{
	"not_found": ErrNotFound, "not_permitted": ErrNotPermitted, "invalid": ErrInvalid,
	"changed": ErrChanged, "not_pending": ErrNotPending, "lease_live": ErrLeaseLive,
	"contradicts_lookup": ErrContradictsLookup, "no_conflicts": ErrNoConflicts, "no_value": ErrNoValue,
	"busy": ErrBusy, "paused": ErrPaused, "for_people": ErrForPeople,
}

// RefusedError is an attempt the database refused and audited.
type RefusedError struct {
	Result
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: %s (audit record %s)", e.Outcome, e.Message, e.Result.AuditRef())
}

// Unwrap lets errors.Is match the refusal's kind.
func (e *RefusedError) Unwrap() error { return codes[e.Code] }

// AuditRef names the audit record, "acme#42" (or "#42" on the "" chain),
// says it is queued for sealing, or says that a refusal was only counted.
func (r Result) AuditRef() string {
	switch {
	case r.Seq != 0:
		return r.Tenant + "#" + strconv.FormatInt(r.Seq, 10)
	case r.Entry != 0:
		return fmt.Sprintf("%s entry %d (queued: opsdesk audit seal puts it in the chain)", TenantName(r.Tenant), r.Entry)
	}
	return "none of its own (counted on the '' chain)"
}

// Err is the result as an error: nil when it succeeded, else its
// *RefusedError.
func (r Result) Err() error {
	if r.Outcome == Succeeded {
		return nil
	}
	return &RefusedError{Result: r}
}

// TenantName is how reports name a chain. The chain of events outside
// any tenant is "”"; a name with spaces, invisible or invalid
// characters is quoted, so that no two chains read alike.
func TenantName(tenant string) string {
	if tenant == "" {
		return "''"
	}
	for _, r := range tenant {
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsGraphic(r) {
			return strconv.Quote(tenant)
		}
	}
	return tenant
}
