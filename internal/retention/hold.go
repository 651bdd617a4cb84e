package retention

import (
	"context"
	"errors"
	"fmt"
	"github.com/opsdesk/opsdesk/internal/audited"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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

// HoldBatch is how many records one call of opsdesk.set_hold may take in
// a hold that names more, at first. A call is a transaction that keeps its
// records' gates and its tenants' audit chains (migration 00016) while it
// appends an audit record per record, and a decision that waits for one
// of them ends the call's session after 2 s. A record took 3.5 to 4.5 ms
// on a 2-core machine at load 10, and over 20 ms with tests running beside
// it: a batch is sized by the pace of the one before to take about
// holdBatchTime, from holdBatchMin to 4 × HoldBatch records.
const HoldBatch = 50

const (
	holdBatchTime = 400 * time.Millisecond
	holdBatchMin  = 5
)

// nextBatch is the size of the batch after one of size records that
// took took: about holdBatchTime at its pace.
func nextBatch(size int, took time.Duration) int {
	n := int(int64(size) * int64(holdBatchTime) / max(int64(took), 1))
	return min(max(n, holdBatchMin), 4*HoldBatch)
}

// HoldProgress is a hold or release in batches, after a batch.
type HoldProgress struct {
	// Done of Total (distinct) records are held (released) now, or
	// already were; they are the Done smallest ids named, up to Through.
	Done, Total int
	Through     int64
	HoldResult
}

// PartialHoldError is a hold or release in batches that stopped part
// way: each batch is all or nothing, and the batches go in the order of
// the ids, so the records held (released), those not, and those of a call
// whose answer was lost are each a run of the ids named, in that order.
type PartialHoldError struct {
	Hold bool
	// Done are held (released) now, or already were (Result counts
	// them); NotDone are not. Unknown is the batch whose call failed
	// without an answer (the connection lost): it may have committed.
	Done, Unknown, NotDone []int64
	Result                 HoldResult
	// Batch is the batch that failed (in Unknown or NotDone), Err why.
	Batch []int64
	Err   error
}

// Error says what is held (released), what is not, what may be, and why
// the hold stopped.
func (e *PartialHoldError) Error() string {
	verb := "held"
	if !e.Hold {
		verb = "released"
	}
	total := len(e.Done) + len(e.Unknown) + len(e.NotDone)
	msg := fmt.Sprintf("stopped part way: %s %d of the %d records named", verb, len(e.Done), total)
	if len(e.Done) > 0 {
		msg += fmt.Sprintf(", those %s (%d changed, %d already were)", span(e.Done), e.Result.Changed, e.Result.Unchanged)
	}
	if len(e.Unknown) > 0 {
		msg += fmt.Sprintf("; unknown whether %s (the call failed without an answer): %d, those %s",
			verb, len(e.Unknown), span(e.Unknown))
	}
	if len(e.NotDone) > 0 {
		msg += fmt.Sprintf("; not %s: %d, those %s", verb, len(e.NotDone), span(e.NotDone))
	}
	return msg + fmt.Sprintf("; the batch of those %s failed: %v "+
		"(the same command again finishes the job: records already %s are left as they are)", span(e.Batch), e.Err, verb)
}

// Unwrap is why the batch failed.
func (e *PartialHoldError) Unwrap() error { return e.Err }

// span names a run of sorted ids (at least one).
func span(ids []int64) string {
	if len(ids) == 1 {
		return fmt.Sprintf("with id %d", ids[0])
	}
	return fmt.Sprintf("with ids from %d to %d", ids[0], ids[len(ids)-1])
}

// SetHold holds records (a purge never deletes a held one) or releases
// them, as an admin, with a reason; each change is audited on its tenant's
// chain. All or nothing when some records are missing (or not visible to
// the role): nothing changes and the *audited.RefusedError
// (audited.ErrNotFound) names them, as does the result's Missing. Every
// refusal is audited. At most MaxHold ids at a time.
//
// More than HoldBatch records are checked first (all must be visible),
// then held in batches, in the order of their ids, each a transaction of
// its own short enough that no decision waits long for it or ends it
// (HoldBatch); progress, if not nil, hears of each. A batch that fails
// stops the hold: what was held and what was not is a *PartialHoldError.
// Holding again what is held changes nothing, so the same call finishes
// the job.
func SetHold(ctx context.Context, pool *pgxpool.Pool, ids []int64, hold bool, reason, displayName string,
	progress func(HoldProgress)) (HoldResult, error) {
	what := "hold"
	if !hold {
		what = "release"
	}
	todo := slices.Clone(ids)
	slices.Sort(todo)
	todo = slices.Compact(todo)
	// Bad input, a handful of records or too many: one call, which checks
	// everything and answers as it always did.
	if len(todo) <= HoldBatch || len(ids) > MaxHold {
		r, err := setHold(ctx, pool, ids, hold, reason, displayName)
		if err != nil {
			return r, fmt.Errorf("%s records: %w", what, err)
		}
		return r, nil
	}
	var missing []int64
	err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(i ORDER BY i), '{}') FROM unnest($1::bigint[]) i
WHERE NOT EXISTS (SELECT FROM opsdesk.operations o WHERE o.id = i)`, todo).Scan(&missing)
	if err != nil {
		return HoldResult{}, fmt.Errorf("%s records: check them: %w", what, mapError(err))
	}
	if len(missing) > 0 {
		// The database refuses them, without locking anything, names
		// them and audits the refusal. (Should they have become visible
		// since, it holds them all in this one call.)
		r, err := setHold(ctx, pool, ids, hold, reason, displayName)
		if err != nil {
			return r, fmt.Errorf("%s records: %w", what, err)
		}
		return r, nil
	}
	var total HoldResult
	for done, size := 0, HoldBatch; done < len(todo); {
		batch := todo[done:min(done+size, len(todo))]
		sent := false
		err := ctx.Err()
		var r HoldResult
		if err == nil {
			sent = true
			start := time.Now()
			r, err = setHold(ctx, pool, batch, hold, reason, displayName)
			size = nextBatch(len(batch), time.Since(start))
		}
		if err != nil {
			unknown := sent && !answered(err)
			if done == 0 && !unknown {
				return r, fmt.Errorf("%s records: %w", what, err)
			}
			p := &PartialHoldError{Hold: hold, Done: todo[:done], NotDone: todo[done:], Result: total, Batch: batch,
				Err: err}
			if unknown {
				p.Unknown, p.NotDone = batch, todo[done+len(batch):]
			}
			total.Missing = r.Missing
			return total, fmt.Errorf("%s records: %w", what, p)
		}
		done += len(batch)
		total.Changed += r.Changed
		total.Unchanged += r.Unchanged
		if progress != nil {
			progress(HoldProgress{Done: done, Total: len(todo), Through: batch[len(batch)-1], HoldResult: total})
		}
	}
	return total, nil
}

// answered tells whether a set_hold call that failed with err surely
// changed nothing: the database answered (a refusal, or an error that
// rolled the statement back), or the call was never sent.
func answered(err error) bool {
	var pgErr *pgconn.PgError
	var refused *audited.RefusedError
	return errors.As(err, &refused) || errors.As(err, &pgErr) || errors.Is(err, audited.ErrNotPermitted) ||
		pgconn.SafeToRetry(err)
}

// setHold is one call of opsdesk.set_hold, its own transaction: a
// refusal's audit record commits.
func setHold(ctx context.Context, pool *pgxpool.Pool, ids []int64, hold bool, reason, displayName string) (HoldResult, error) {
	var r HoldResult
	var (
		outcome               string
		code, message, tenant *string
		entry                 *int64
		changed, unchanged    *int
	)
	err := pool.QueryRow(ctx, `SELECT outcome, code, message, audit_tenant, audit_entry, changed, unchanged, missing
FROM opsdesk.set_hold($1, $2, $3, $4)`, ids, hold, reason, nullable(displayName)).
		Scan(&outcome, &code, &message, &tenant, &entry, &changed, &unchanged, &r.Missing)
	if err != nil {
		return HoldResult{}, mapError(err)
	}
	if outcome != "succeeded" {
		return r, refusal(ctx, pool, outcome, code, message, tenant, entry)
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
