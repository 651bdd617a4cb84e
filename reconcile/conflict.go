package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/ops"
)

// ConflictSide is one of a conflict's two requests, as revealed.
type ConflictSide struct {
	// Request is the canonical request as the library stored it (the
	// RFC 8785 text of {intent, tool, version}); nil when it was not
	// recorded.
	Request json.RawMessage `json:"request"`
	// NotRecorded says why Request is nil, such as "not recorded:
	// conflict 7 predates migration 00019 …".
	NotRecorded string `json:"not_recorded,omitempty"`
	// Fingerprinted tells whether Request hashes (SHA-256) to the
	// fingerprint recorded for this side: it is the request that was
	// compared, not another one written beside the fingerprint.
	Fingerprinted bool `json:"fingerprinted"`
}

// ConflictReveal is what a reveal of a conflict gives: the record's
// original request, the refused attempt's, and the fields that differ.
type ConflictReveal struct {
	ConflictID int64        `json:"conflict_id"`
	Original   ConflictSide `json:"original"`
	Attempted  ConflictSide `json:"attempted"`
	// Diffs are the differing fields (DiffRequests), when both requests
	// were recorded; DiffError says why they could not be computed
	// otherwise.
	Diffs     []Diff `json:"differences"`
	DiffError string `json:"differences_error,omitempty"`
}

// RevealConflict returns conflict conflictID's two requests side by side
// and the fields that differ. Like Reveal it takes two transactions: the
// first checks that the connected role is an operator who sees the
// conflict and a reason, and commits the audit record (action
// reveal:conflict, about the conflict's record); only then does the
// second read the requests, once. A refusal is a *RefusedError
// (ErrNotFound for a conflict the role does not see, ErrNotPermitted for
// a viewer, ErrNoValue when neither request was recorded); its audit
// record is committed. A conflict recorded before schema version 19 has
// no attempted request: ConflictSide.NotRecorded says so.
func RevealConflict(ctx context.Context, pool *pgxpool.Pool, conflictID int64, reason, displayName string) (ConflictReveal, Result, error) {
	out := ConflictReveal{ConflictID: conflictID}
	res, err := call(ctx, pool, `SELECT * FROM opsdesk.reveal_conflict_request($1, $2, $3)`, conflictID, reason, nullable(displayName))
	if err != nil {
		return out, res, err
	}
	var origMissing, attMissing *string
	// Scanned as bytes: a json.RawMessage would be scanned through
	// json.Unmarshal, which checks and copies each request once more (the
	// column's type checked it when it was stored).
	err = pool.QueryRow(ctx, `SELECT * FROM opsdesk.reveal_conflict_fetch($1, $2)`, res.Tenant, res.Entry).Scan(
		(*[]byte)(&out.Original.Request), (*[]byte)(&out.Attempted.Request), &out.Original.Fingerprinted, &out.Attempted.Fingerprinted,
		&origMissing, &attMissing)
	if err != nil {
		return out, res, fmt.Errorf("read the requests of revealed conflict %d (audit record %s): %w", conflictID, res.AuditRef(), mapError(err))
	}
	out.Original.NotRecorded, out.Attempted.NotRecorded = deref(origMissing), deref(attMissing)
	out.Compare()
	return out, res, nil
}

// Compare sets Diffs to the fields that differ between the two sides
// (DiffRequests), or DiffError to why they cannot be computed: a side not
// recorded, encrypted at rest by the service (ops.Config.Keyring), or not
// JSON.
func (r *ConflictReveal) Compare() {
	r.Diffs, r.DiffError = nil, ""
	origKey, origSealed := ops.EncryptedKeyID(r.Original.Request)
	attKey, attSealed := ops.EncryptedKeyID(r.Attempted.Request)
	switch {
	case origSealed || attSealed:
		kid := origKey
		if !origSealed {
			kid = attKey
		}
		r.DiffError = "no differences to compute: the requests are encrypted at rest (key id " + strconv.Quote(kid) +
			"), and opsdesk holds no key to decrypt them"
	case r.Original.Request == nil:
		r.DiffError = "no differences to compute: the original request is " + r.Original.NotRecorded
	case r.Attempted.Request == nil:
		r.DiffError = "no differences to compute: the attempted request is " + r.Attempted.NotRecorded
	default:
		var err error
		if r.Diffs, err = DiffRequests(r.Original.Request, r.Attempted.Request); err != nil {
			r.DiffError = "no differences to compute: " + err.Error()
		}
	}
}

// RevealConflict returns conflict conflictID's two requests and their
// differences, audited first (see RevealConflict).
func (d *Desk) RevealConflict(ctx context.Context, conflictID int64, reason string) (ConflictReveal, Result, error) {
	return RevealConflict(ctx, d.Pool, conflictID, reason, d.DisplayName)
}
