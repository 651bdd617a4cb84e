// Package retention purges completed records whose retention ended,
// through the database's purge functions: in small batches that skip
// locked rows, resumable, leaving tombstones. A run's start record (who,
// why, what, and how many its dry run promised) commits before anything
// is deleted, and its result record when it finishes. Pending records,
// held records and records with unreviewed conflicts never go. The
// database's refusals are audited and come back as
// *audited.RefusedError.
package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/purgereport"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/opsdesk/opsdesk/ops"
)

// PurgeParams says what a purge deletes and what it leaves.
type PurgeParams struct {
	// Tool limits the purge to one tool ("": every tool).
	Tool string
	// Before limits it to records whose retention ended before this
	// time (zero: now, by the database clock; and an unfinished run of
	// the same tool resumes). A DryRun's Before replaces it.
	Before time.Time
	// TombstoneFor is how long each tool's tombstones last (its retry
	// window); "*" for the others (default: the library's default
	// retention, 7 days).
	TombstoneFor map[string]time.Duration
	Reason       string
	DisplayName  string
	// BatchSize is the records per transaction (default 1,000).
	BatchSize int
	// DryRun is the dry run the person confirmed (Eligible's answer):
	// the purge takes records whose retention ended before its Before,
	// and no more than its Count, so that records that became purgeable
	// since (a hold released, a conflict acknowledged) do not go
	// unconfirmed. The count goes into the run's start record, and the
	// database holds the run to it. Nil: Purge runs the dry run itself.
	DryRun *purgereport.DryRun
	// Pace spaces the batches for the library's sake: Paced (the zero
	// value) pauses after each batch as much as the server's load slows
	// the batches down; FixedYield pauses a fixed multiple of each
	// batch's time, FixedYield(0) not at all. On a server with no cores to
	// spare the library's throughput and the purge's speed trade against
	// each other (docs/benchmarks.md).
	Pace Pace
	// Workers is how many batch loops of the run go side by side, each on
	// a connection of its own (default 1), each paced by itself. Their
	// batches take disjoint records (SKIP LOCKED); on a busy server more
	// connections get the purge more of the cores, and the library less
	// (docs/benchmarks.md, third measurement). The pool needs that many
	// connections.
	Workers int
}

// eligibleSQL mirrors opsdesk.purge_batch's conditions; a test checks
// that the dry run's count is what the purge deletes. $2 is the cut-off
// (NULL: now).
const eligibleSQL = `
SELECT c.before, (SELECT count(*) FROM opsdesk.operations o
    WHERE o.state = 'completed' AND o.expires_at <= least(c.before, now()) AND NOT o.held
      AND ($1::text IS NULL OR o.tool = $1)
      AND NOT EXISTS (SELECT FROM opsdesk.conflicts x
                      WHERE x.tenant = o.tenant AND x.tool = o.tool AND x.key = o.key AND x.reviewed_at IS NULL))
FROM (SELECT coalesce($2::timestamptz, now()) AS before) c`

// Eligible counts the records a purge with p would delete now: the dry
// run. Purge with p.Before set to the dry run's Before deletes what it
// counted.
func Eligible(ctx context.Context, pool *pgxpool.Pool, p PurgeParams) (purgereport.DryRun, error) {
	var d purgereport.DryRun
	cut := before(p)
	// An unfinished run of this person and tool is resumed, with its
	// cut-off. Only admins may read the runs (and purge at all: the purge
	// says so to the others).
	var admin bool
	if err := pool.QueryRow(ctx, `SELECT has_table_privilege('opsdesk.purge_runs', 'SELECT')`).Scan(&admin); err != nil {
		return d, fmt.Errorf("count purgeable records: %w", err)
	}
	if admin {
		err := pool.QueryRow(ctx, `SELECT id, before FROM opsdesk.purge_runs
WHERE role = session_user AND finished_at IS NULL AND tool IS NOT DISTINCT FROM $1 AND ($2::timestamptz IS NULL OR before = $2)
ORDER BY id LIMIT 1`, tool(p), cut).Scan(&d.Resumes, &cut)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return d, fmt.Errorf("look for an unfinished purge: %w", err)
		}
	}
	if err := pool.QueryRow(ctx, eligibleSQL, tool(p), cut).Scan(&d.Before, &d.Count); err != nil {
		return d, fmt.Errorf("count purgeable records: %w", err)
	}
	return d, nil
}

// Purge deletes what p selects, a batch per transaction, calling progress
// after each, and closes the run with its result record. Its start record
// commits first, before any batch. Interrupted (its context cancelled,
// the connection lost), it can be called again with the same parameters:
// it resumes the run, with a resume record. A refusal is a
// *audited.RefusedError whose audit record is committed.
func Purge(ctx context.Context, pool *pgxpool.Pool, p PurgeParams, progress func(purgereport.Progress)) (purgereport.Result, error) {
	if err := p.Pace.check(); err != nil {
		return purgereport.Result{}, fmt.Errorf("purge: %w", err)
	}
	size := p.BatchSize
	if size <= 0 {
		size = 1000
	}
	dry := p.DryRun
	if dry == nil {
		d, err := Eligible(ctx, pool, p)
		if err != nil {
			return purgereport.Result{}, err
		}
		dry = &d
	}
	// A tool the catalog does not know: the library's default retention,
	// the window the retention review assumes for it too.
	lifetimes := map[string]float64{"*": ops.DefaultRetention.Seconds()}
	for t, d := range p.TombstoneFor {
		lifetimes[t] = d.Seconds()
	}
	tombstones, err := json.Marshal(lifetimes)
	if err != nil {
		return purgereport.Result{}, err
	}
	var res purgereport.Result
	// A statement of its own: the start record commits before any batch
	// (the database refuses batches in the transaction that started the
	// run), and so does a refusal's.
	start, err := scanAnswer(pool.QueryRow(ctx, `SELECT `+purgeColumns+` FROM opsdesk.purge_start($1, $2, $3, $4, $5, $6)`,
		tool(p), pgtype.Timestamptz{Time: dry.Before, Valid: !dry.Before.IsZero()}, tombstones, p.Reason, dry.Count,
		nullable(p.DisplayName)))
	if err == nil {
		err = start.refused(ctx, pool)
	}
	if err != nil {
		return res, fmt.Errorf("start the purge: %w", err)
	}
	res.Run, res.AuditTenant = value(start.run), deref(start.tenant)
	res.StartSeq = audit.SealedSeq(ctx, pool, res.AuditTenant, value(start.entry))
	// What the run purged before (a resume), and its batches.
	prog := purgereport.Progress{Run: res.Run, Purged: value(start.purged)}
	err = pool.QueryRow(ctx, `SELECT r.batches + (SELECT count(*) FROM opsdesk.purge_batches b WHERE b.run = r.id)
FROM opsdesk.purge_runs r WHERE r.id = $1`, res.Run).Scan(&prog.Batches)
	if err != nil {
		return res, fmt.Errorf("read purge run %d: %w", res.Run, err)
	}
	// At most what the dry run counted, shared by the workers.
	allow := &budget{left: dry.Count}
	workers := max(p.Workers, 1)
	// done counts a batch and reports it, one worker at a time.
	var mu sync.Mutex
	done := func(b purgereport.Progress) {
		mu.Lock()
		defer mu.Unlock()
		prog.Purged += b.Records
		prog.Batches++
		prog.Records, prog.Took, prog.Slowdown, prog.Pause = b.Records, b.Took, b.Slowdown, b.Pause
		if progress != nil {
			progress(prog)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for range workers {
		g.Go(func() error { return batches(gctx, pool, res.Run, size, allow, &pacer{pace: p.Pace}, done) })
	}
	if err := g.Wait(); err != nil {
		return res, fmt.Errorf("purge run %d, after %d records: %w (run the purge again to resume)", res.Run, prog.Purged, err)
	}
	// Expired tombstones go too: past its retry window a late retry runs
	// as new work whatever the policy, and the tombstone only takes room.
	for {
		a, err := scanAnswer(pool.QueryRow(ctx, `SELECT `+purgeColumns+` FROM opsdesk.purge_tombstones($1, $2)`, res.Run, size))
		if err == nil {
			err = a.refused(ctx, pool)
		}
		if err != nil {
			return res, fmt.Errorf("purge run %d, expired tombstones: %w (run the purge again to resume)", res.Run, err)
		}
		if value(a.stones) == 0 {
			break
		}
	}
	// READ COMMITTED: purge_finish adds up the batches that committed
	// while it waited for them (migration 00014). The transaction commits
	// a refusal too, for its audit record.
	var fin answer
	err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var err error
		fin, err = scanAnswer(tx.QueryRow(ctx, `SELECT `+purgeColumns+` FROM opsdesk.purge_finish($1, $2)`,
			res.Run, nullable(p.DisplayName)))
		return err
	})
	if err == nil {
		err = fin.refused(ctx, pool)
	}
	if err != nil {
		return res, fmt.Errorf("finish purge run %d: %w", res.Run, err)
	}
	res.Purged, res.TombstonesExpired = value(fin.purged), value(fin.stones)
	res.AuditTenant = deref(fin.tenant)
	res.AuditSeq = audit.SealedSeq(ctx, pool, res.AuditTenant, value(fin.entry))
	return res, nil
}

// budget is how many more records a purge may delete, shared by its
// workers: a batch takes its size from it and gives back what it did not
// delete.
type budget struct {
	mu   sync.Mutex
	left int64
}

func (b *budget) take(size int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(size, b.left)
	b.left -= n
	return n
}

func (b *budget) giveBack(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left += n
}

// batches runs batches of run until one finds nothing left or the budget
// is spent, calling done after each (its Records, Took, Slowdown and
// Pause), and pausing as pace says.
func batches(ctx context.Context, pool *pgxpool.Pool, run int64, size int, allow *budget, pace *pacer, done func(purgereport.Progress)) error {
	for {
		var n int64
		t0 := time.Now()
		limit := allow.take(int64(size))
		if limit <= 0 {
			return nil
		}
		// READ COMMITTED whatever the database's default: the check that
		// no conflict points at a deleted record reads the latest
		// committed conflicts (migration 00010). A refusal commits too,
		// for its audit record.
		var a answer
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			var err error
			a, err = scanAnswer(tx.QueryRow(ctx, `SELECT `+purgeColumns+` FROM opsdesk.purge_batch($1, $2)`, run, limit))
			return err
		})
		if err == nil {
			err = a.refused(ctx, pool)
		}
		n = value(a.purged)
		allow.giveBack(limit - n)
		if err != nil {
			return err
		}
		// Nothing this worker could take: the rest is gone or in the
		// other workers' batches, which go on until they find nothing.
		if n == 0 {
			return nil
		}
		took := time.Since(t0)
		wait, slowdown := pace.pause(took, n)
		done(purgereport.Progress{Records: n, Took: took, Slowdown: slowdown, Pause: wait})
		if wait > 0 {
			if err := sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
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

// before is p's cut-off, NULL for now.
func before(p PurgeParams) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: p.Before, Valid: !p.Before.IsZero()}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
