package retention

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/auditcall"
	"github.com/opsdesk/opsdesk/internal/audited"
)

// purgeColumns are opsdesk.purge_result's fields, in its order.
const purgeColumns = "outcome, code, message, tenant, entry, run, purged, tombstones"

// answer is a purge function's opsdesk.purge_result, as scanned.
type answer struct {
	outcome                    string
	code, message, tenant      *string
	entry, run, purged, stones *int64
}

// scanAnswer reads a purge function's answer. A refusal is not an error
// here: its audit record is in the caller's transaction, which must commit
// before the refusal is reported (refused).
func scanAnswer(row pgx.Row) (answer, error) {
	var a answer
	if err := row.Scan(&a.outcome, &a.code, &a.message, &a.tenant, &a.entry, &a.run, &a.purged, &a.stones); err != nil {
		return a, mapError(err)
	}
	return a, nil
}

// refused is a refusal's *audited.RefusedError (nil when the call
// succeeded): errors.Is matches its kind (audited.ErrNotPermitted,
// audited.ErrInvalid, audited.ErrNotFound), and it names the refusal's
// audit record, sealed on pool once its transaction has committed.
func (a answer) refused(ctx context.Context, pool *pgxpool.Pool) error {
	if a.outcome == string(audited.Succeeded) {
		return nil
	}
	return refusal(ctx, pool, a.outcome, a.code, a.message, a.tenant, a.entry)
}

func refusal(ctx context.Context, pool *pgxpool.Pool, outcome string, code, message, tenant *string, entry *int64) error {
	r := audited.Result{Outcome: audited.Outcome(outcome), Code: deref(code), Message: deref(message), Tenant: deref(tenant)}
	if entry != nil {
		r.Entry = *entry
		r.Seq = audit.SealedSeq(ctx, pool, r.Tenant, r.Entry)
	}
	return &audited.RefusedError{Result: r}
}

// value is *p, 0 for NULL.
func value(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// grant is the group role retention's functions are for.
const grant = "opsdesk_admin"

// mapError is auditcall.MapError for retention's functions.
func mapError(err error) error { return auditcall.MapError(err, grant) }
