package desk

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/reconcile"
)

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
func RevealConflict(ctx context.Context, pool *pgxpool.Pool, conflictID int64, reason, displayName string) (reconcile.ConflictReveal, reconcile.Result, error) {
	out := reconcile.ConflictReveal{ConflictID: conflictID}
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

// RevealConflict returns conflict conflictID's two requests and their
// differences, audited first (see RevealConflict).
func (d *Desk) RevealConflict(ctx context.Context, conflictID int64, reason string) (reconcile.ConflictReveal, reconcile.Result, error) {
	return RevealConflict(ctx, d.Pool, conflictID, reason, d.DisplayName)
}
