package retention

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// HoldResult says what a hold or a release changed.
type HoldResult struct {
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"` // already held (or already released)
	Missing   int `json:"missing"`   // no such record, or not visible to the role
}

// SetHold holds records (a purge never deletes a held one) or releases
// them, as an admin, with a reason; each change is audited on its tenant's
// chain. At most 10,000 ids at a time.
func SetHold(ctx context.Context, pool *pgxpool.Pool, ids []int64, hold bool, reason, displayName string) (HoldResult, error) {
	var r HoldResult
	err := pool.QueryRow(ctx, `SELECT changed, unchanged, missing FROM opsdesk.set_hold($1, $2, $3, $4)`,
		ids, hold, reason, nullable(displayName)).Scan(&r.Changed, &r.Unchanged, &r.Missing)
	if err != nil {
		what := "hold"
		if !hold {
			what = "release"
		}
		return r, fmt.Errorf("%s records: %w", what, err)
	}
	return r, nil
}
