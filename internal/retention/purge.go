// Package retention purges completed records whose retention ended,
// through the database's purge functions: in small batches that skip
// locked rows, resumable, leaving tombstones, with one audit record per
// run. Pending records, held records and records with unreviewed
// conflicts never go.
package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PurgeParams says what a purge deletes and what it leaves.
type PurgeParams struct {
	// Tool limits the purge to one tool ("": every tool).
	Tool string
	// Before limits it to records whose retention ended before this
	// time (zero: now, by the database clock; and an unfinished run of
	// the same tool resumes).
	Before time.Time
	// TombstoneFor is how long each tool's tombstones last (its retry
	// window); "*" for the others (default 7 days).
	TombstoneFor map[string]time.Duration
	Reason       string
	DisplayName  string
	// BatchSize is the records per transaction (default 1,000).
	BatchSize int
	// Yield paces the purge for the library's sake: after each batch it
	// waits Yield times as long as the batch took (0: no wait), so that
	// at Yield 1 it works at most half the time. On a server with no
	// cores to spare the library's throughput and the purge's speed trade
	// against each other (docs/benchmarks.md).
	Yield float64
}

// Progress is a running purge's state after a batch.
type Progress struct {
	Run     int64
	Purged  int64
	Batches int
}

// Result is a finished purge: its run and its audit record.
type Result struct {
	Run    int64 `json:"run"`
	Purged int64 `json:"purged"`
	// TombstonesExpired counts the expired tombstones the run removed (of
	// its tool, or every tool's).
	TombstonesExpired int64  `json:"tombstones_expired"`
	AuditTenant       string `json:"audit_tenant"`
	AuditSeq          int64  `json:"audit_seq"`
}

// eligibleSQL mirrors opsdesk.purge_batch's conditions; a test checks
// that the dry run's count is what the purge deletes.
const eligibleSQL = `
SELECT count(*) FROM opsdesk.operations o
WHERE o.state = 'completed' AND o.expires_at <= least(coalesce($2, now()), now()) AND NOT o.held
  AND ($1::text IS NULL OR o.tool = $1)
  AND NOT EXISTS (SELECT FROM opsdesk.conflicts c
                  WHERE c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key AND c.reviewed_at IS NULL)`

// Eligible counts the records a purge with p would delete now: the dry
// run.
func Eligible(ctx context.Context, pool *pgxpool.Pool, p PurgeParams) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, eligibleSQL, tool(p), before(p)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count purgeable records: %w", err)
	}
	return n, nil
}

// Purge deletes what p selects, a batch per transaction, calling progress
// after each, and closes the run with its audit record. Interrupted (its
// context cancelled, the connection lost), it can be called again with
// the same parameters: it resumes the run.
func Purge(ctx context.Context, pool *pgxpool.Pool, p PurgeParams, progress func(Progress)) (Result, error) {
	size := p.BatchSize
	if size <= 0 {
		size = 1000
	}
	lifetimes := map[string]float64{"*": (7 * 24 * time.Hour).Seconds()}
	for t, d := range p.TombstoneFor {
		lifetimes[t] = d.Seconds()
	}
	tombstones, err := json.Marshal(lifetimes)
	if err != nil {
		return Result{}, err
	}
	var res Result
	err = pool.QueryRow(ctx, `SELECT opsdesk.purge_start($1, $2, $3, $4)`, tool(p), before(p), tombstones, p.Reason).Scan(&res.Run)
	if err != nil {
		return res, fmt.Errorf("start the purge: %w", err)
	}
	var prog Progress
	err = pool.QueryRow(ctx, `SELECT purged, batches FROM opsdesk.purge_runs WHERE id = $1`, res.Run).Scan(&prog.Purged, &prog.Batches)
	if err != nil {
		return res, fmt.Errorf("read purge run %d: %w", res.Run, err)
	}
	prog.Run = res.Run
	for {
		var n int64
		t0 := time.Now()
		// READ COMMITTED whatever the database's default: the check that
		// no conflict points at a deleted record reads the latest
		// committed conflicts (migration 00010).
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT opsdesk.purge_batch($1, $2)`, res.Run, size).Scan(&n)
		})
		if err != nil {
			return res, fmt.Errorf("purge run %d, after %d records: %w (run the purge again to resume)", res.Run, prog.Purged, err)
		}
		if n == 0 {
			break
		}
		prog.Purged += n
		prog.Batches++
		if progress != nil {
			progress(prog)
		}
		if p.Yield > 0 {
			if err := sleep(ctx, time.Duration(p.Yield*float64(time.Since(t0)))); err != nil {
				return res, fmt.Errorf("purge run %d, after %d records: %w (run the purge again to resume)", res.Run, prog.Purged, err)
			}
		}
	}
	// Expired tombstones go too: past its retry window a late retry runs
	// as new work whatever the policy, and the tombstone only takes room.
	for {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT opsdesk.purge_tombstones($1, $2)`, res.Run, size).Scan(&n); err != nil {
			return res, fmt.Errorf("purge run %d, expired tombstones: %w (run the purge again to resume)", res.Run, err)
		}
		if n == 0 {
			break
		}
	}
	err = pool.QueryRow(ctx, `SELECT f.audit_tenant, f.audit_seq, f.purged, r.tombstones_expired
FROM opsdesk.purge_finish($1, $2) f, opsdesk.purge_runs r WHERE r.id = $1`, res.Run, nullable(p.DisplayName)).
		Scan(&res.AuditTenant, &res.AuditSeq, &res.Purged, &res.TombstonesExpired)
	if err != nil {
		return res, fmt.Errorf("finish purge run %d: %w", res.Run, err)
	}
	return res, nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func tool(p PurgeParams) *string {
	if p.Tool == "" {
		return nil
	}
	return &p.Tool
}

func before(p PurgeParams) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: p.Before, Valid: !p.Before.IsZero()}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
