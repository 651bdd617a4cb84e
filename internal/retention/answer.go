package retention

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/reconcile"
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

// refused is a refusal's *reconcile.RefusedError (nil when the call
// succeeded): errors.Is matches its kind (reconcile.ErrNotPermitted,
// reconcile.ErrInvalid, reconcile.ErrNotFound), and it names the refusal's
// audit record, sealed on pool once its transaction has committed.
func (a answer) refused(ctx context.Context, pool *pgxpool.Pool) error {
	if a.outcome == string(reconcile.Succeeded) {
		return nil
	}
	return refusal(ctx, pool, a.outcome, a.code, a.message, a.tenant, a.entry)
}

func refusal(ctx context.Context, pool *pgxpool.Pool, outcome string, code, message, tenant *string, entry *int64) error {
	r := reconcile.Result{Outcome: reconcile.Outcome(outcome), Code: deref(code), Message: deref(message), Tenant: deref(tenant)}
	if entry != nil {
		r.Entry = *entry
		r.Seq = reconcile.SealedSeq(ctx, pool, r.Tenant, r.Entry)
	}
	return &reconcile.RefusedError{Result: r}
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

// mapError turns a missing privilege (a role without opsdesk_viewer
// cannot even call the functions, and its attempt leaves no trace) into
// reconcile.ErrNotPermitted.
func mapError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return fmt.Errorf("%w: %s (is the role granted opsdesk_admin? see opsdesk access grant)", reconcile.ErrNotPermitted, pgErr.Message)
	}
	return err
}
