package demo

import (
	"context"
	"fmt"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

// Counts is how many records the store holds in each state, by the
// database clock.
type Counts struct {
	// Live is pending records whose owner's lease is live.
	Live int64
	// Stuck is pending records whose lease expired.
	Stuck     int64
	Succeeded int64
	Rejected  int64
	Released  int64
	// Conflicts is refused attempts that reused a key with another intent.
	Conflicts int64
}

func (c Counts) String() string {
	return fmt.Sprintf("live %d  stuck %d  succeeded %d  rejected %d  released %d  refused attempts %d",
		c.Live, c.Stuck, c.Succeeded, c.Rejected, c.Released, c.Conflicts)
}

// countsSQL reads every count in one snapshot. It reads the conflicts'
// rows, which the service role may not: run it as the database's owner.
var countsSQL = `
SELECT count(*) FILTER (WHERE ` + storeview.LiveSQL("", "interval '0'") + `),
       count(*) FILTER (WHERE ` + storeview.StuckSQL("", "interval '0'") + `),
       count(*) FILTER (WHERE state = 'completed' AND outcome = 'succeeded'),
       count(*) FILTER (WHERE state = 'completed' AND outcome = 'rejected'),
       count(*) FILTER (WHERE state = 'released'),
       (SELECT count(*) FROM opsdesk.conflicts)
FROM opsdesk.operations`

// CountStates counts the store's records per state.
func CountStates(ctx context.Context, q db.Querier) (Counts, error) {
	var c Counts
	err := q.QueryRow(ctx, countsSQL).Scan(&c.Live, &c.Stuck, &c.Succeeded, &c.Rejected, &c.Released, &c.Conflicts)
	if err != nil {
		return Counts{}, fmt.Errorf("count records per state: %w", err)
	}
	return c, nil
}
