package retention

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/purgereport"
)

// Purger purges one tool at a time for the console, as the person its
// pool connects as, with the catalog's tombstone lifetimes.
type Purger struct {
	Pool *pgxpool.Pool
	// TombstoneFor is each tool's tombstone lifetime (PurgeParams).
	TombstoneFor map[string]time.Duration
	DisplayName  string
}

// Count is the dry run of a purge of tool's expired records.
func (p *Purger) Count(ctx context.Context, tool string) (purgereport.DryRun, error) {
	return Eligible(ctx, p.Pool, PurgeParams{Tool: tool})
}

// Purge purges what the dry run of tool counted: records whose retention
// ended before its cut-off, at most its count. It calls progress after
// each batch.
func (p *Purger) Purge(ctx context.Context, tool string, dry purgereport.DryRun, reason string, progress func(purgereport.Progress)) (purgereport.Result, error) {
	return Purge(ctx, p.Pool, PurgeParams{Tool: tool, DryRun: &dry, Reason: reason,
		DisplayName: p.DisplayName, TombstoneFor: p.TombstoneFor}, progress)
}
