package storeview

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/ops"
)

// OutOfBounds is a record holding a time no service may write (migration
// 00024): a superuser's, or a restored backup's. The console reads it
// (infinities show as never and -infinity), but a lease that never ends
// is never stuck and never alerts, and an expiry that never comes is
// never purged: a person has to look.
type OutOfBounds struct {
	ID     int64  `json:"id"`
	Tenant string `json:"tenant"`
	Tool   string `json:"tool"`
	Key    string `json:"key"`
	// Times are the record's times out of bounds, each its column and
	// value as PostgreSQL writes it ("lease_expires_at infinity").
	Times []string `json:"times"`
}

// The bounds of OutOfBounds, a little wider than the state machine's:
// those are checked against the clock at the write, these against the
// reading statement's. Every time is from 1970 on.
const (
	// boundsNowAhead is how far ahead of now a time that was "now" when
	// written may be.
	boundsNowAhead = time.Minute
	// boundsLeaseAhead and boundsRetentionAhead are how far ahead of now a
	// lease may end and a record expire.
	boundsLeaseAhead     = ops.MaxLease + time.Hour
	boundsRetentionAhead = ops.MaxRetention + 24*time.Hour
)

// outOfBoundsSQL finds the records with a time out of bounds ($1, $2, $3:
// the bounds ahead in microseconds, $4 how many), in id order, by one
// scan of the table: the bounds are compared, never computed from a
// stored time (a time of 4713 BC less a day is an error).
const outOfBoundsSQL = `
WITH b AS (SELECT now() + $1 * interval '1 microsecond' AS now_to, now() + $2 * interval '1 microsecond' AS lease_to,
    now() + $3 * interval '1 microsecond' AS keep_to, timestamptz '1970-01-01 00:00:00+00' AS since)
SELECT o.id, o.tenant, o.tool, o.key, array_remove(ARRAY[
    CASE WHEN o.created_at NOT BETWEEN b.since AND b.now_to THEN 'created_at ' || o.created_at END,
    CASE WHEN o.updated_at NOT BETWEEN b.since AND b.now_to THEN 'updated_at ' || o.updated_at END,
    CASE WHEN o.leased_at NOT BETWEEN b.since AND b.now_to THEN 'leased_at ' || o.leased_at END,
    CASE WHEN o.lease_expires_at NOT BETWEEN b.since AND b.lease_to THEN 'lease_expires_at ' || o.lease_expires_at END,
    CASE WHEN o.completed_at NOT BETWEEN b.since AND b.now_to THEN 'completed_at ' || o.completed_at END,
    CASE WHEN o.expires_at NOT BETWEEN b.since AND b.keep_to THEN 'expires_at ' || o.expires_at END,
    CASE WHEN o.last_conflict_at NOT BETWEEN b.since AND b.now_to THEN 'last_conflict_at ' || o.last_conflict_at END
], NULL) AS times
FROM opsdesk.operations o, b
WHERE greatest(o.created_at, o.updated_at, o.leased_at, o.completed_at, o.last_conflict_at) > b.now_to
   OR o.lease_expires_at > b.lease_to OR o.expires_at > b.keep_to
   OR least(o.created_at, o.updated_at, o.leased_at, o.lease_expires_at, o.completed_at, o.expires_at,
            o.last_conflict_at) < b.since
ORDER BY o.id
LIMIT $4`

// OutOfBounds returns up to limit records, in id order, that hold a time
// no service may write: infinite, before 1970, or later than a service
// may write it (a time written as now more than a minute ahead, a lease
// ending more than MaxLease and an hour ahead, an expiry more than
// MaxRetention and a day ahead). more tells whether there are others. It
// reads every record the role sees, once.
func (s *Store) OutOfBounds(ctx context.Context, limit int) (records []OutOfBounds, more bool, err error) {
	rows, err := s.pool.Query(ctx, outOfBoundsSQL, boundsNowAhead.Microseconds(), boundsLeaseAhead.Microseconds(),
		boundsRetentionAhead.Microseconds(), limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("find times out of bounds: %w", err)
	}
	records, err = pgx.CollectRows(rows, pgx.RowToStructByPos[OutOfBounds])
	if err != nil {
		return nil, false, fmt.Errorf("find times out of bounds: %w", err)
	}
	if len(records) > limit {
		return records[:limit], true, nil
	}
	return records, false, nil
}
