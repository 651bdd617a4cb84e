package retention

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// HoldResult says what a hold or a release changed, or which records it
// could not find.
type HoldResult struct {
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"` // already held (or already released)
	// Missing are the records that do not exist or that the role does
	// not see; when there are any, nothing changed.
	Missing []int64 `json:"missing,omitempty"`
}

// MaxHold is how many records one hold or release may name.
const MaxHold = 10_000

// SetHold holds records (a purge never deletes a held one) or releases
// them, as an admin, with a reason; each change is audited on its tenant's
// chain. All or nothing: when some records are missing (or not visible to
// the role), nothing changes and the *reconcile.RefusedError
// (reconcile.ErrNotFound) names them, as does the result's Missing. Every
// refusal is audited. At most MaxHold ids at a time.
func SetHold(ctx context.Context, pool *pgxpool.Pool, ids []int64, hold bool, reason, displayName string) (HoldResult, error) {
	var r HoldResult
	var (
		outcome               string
		code, message, tenant *string
		seq                   *int64
		changed, unchanged    *int
	)
	// One statement, its own transaction: a refusal's audit record
	// commits.
	err := pool.QueryRow(ctx, `SELECT outcome, code, message, audit_tenant, audit_seq, changed, unchanged, missing
FROM opsdesk.set_hold($1, $2, $3, $4)`, ids, hold, reason, nullable(displayName)).
		Scan(&outcome, &code, &message, &tenant, &seq, &changed, &unchanged, &r.Missing)
	if err == nil && outcome != "succeeded" {
		err = refusal(outcome, code, message, tenant, seq)
	}
	if err != nil {
		what := "hold"
		if !hold {
			what = "release"
		}
		return r, fmt.Errorf("%s records: %w", what, mapError(err))
	}
	if changed != nil {
		r.Changed = *changed
	}
	if unchanged != nil {
		r.Unchanged = *unchanged
	}
	r.Missing = nil
	return r, nil
}
