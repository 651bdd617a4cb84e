package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/opsdesk/opsdesk/internal/pgtime"
)

// State is a record's state. StateAbsent means there is no record.
type State string

// The states of a record.
const (
	StateAbsent    State = "absent"
	StatePending   State = "pending"
	StateCompleted State = "completed"
	StateReleased  State = "released"
)

// RecordOutcome is how a completed record's operation ended. (A call's
// answer is its Reply; an Outcome always says what ended.)
type RecordOutcome string

// The outcomes of a completed record.
const (
	// OutcomeSucceeded: the effect happened; its result is replayed.
	OutcomeSucceeded RecordOutcome = "succeeded"
	// OutcomeRejected: a business rejection (Reject), replayed as
	// *RejectedError.
	OutcomeRejected RecordOutcome = "rejected"
)

// Record is an operation's record as the store holds it, read at DBTime.
// It never carries the stored intent or result.
type Record struct {
	Identity
	ID          int64
	ToolVersion string
	Fingerprint Fingerprint
	Effect      Effect
	State       State
	// Outcome is OutcomeSucceeded or OutcomeRejected when completed.
	Outcome        RecordOutcome
	Owner          string
	Attempt        int
	LeasedAt       time.Time
	LeaseExpiresAt time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	CompletedAt    time.Time
	// ExpiresAt is when retention allows purging the record (zero: never).
	ExpiresAt      time.Time
	ResultRef      string
	Version        int64
	ConflictCount  int
	LastConflictAt time.Time
	// DBTime is the database clock when the record was read. Lease
	// arithmetic uses it, never the local clock.
	DBTime time.Time
	// PurgedAt is set on an absent record whose record was purged and
	// whose tombstone still lasts; ID is then the purged record's.
	PurgedAt time.Time
}

// LeaseRemaining is the time left on the lease by the database clock;
// negative once it expired.
func (r *Record) LeaseRemaining() time.Duration { return r.LeaseExpiresAt.Sub(r.DBTime) }

// LeaseExpired tells whether the lease had expired at DBTime.
func (r *Record) LeaseExpired() bool { return !r.LeaseExpiresAt.After(r.DBTime) }

// Stuck is a pending record whose owner's lease expired.
func (r *Record) Stuck() bool { return r.State == StatePending && r.LeaseExpired() }

// leaseSlack is how much later than MaxLease after DBTime a lease may
// end and still be one a service wrote: the write's clock may be ahead of
// the reading statement's now().
const leaseSlack = time.Hour

// leaseOutOfBounds tells whether a pending record's lease ends later than
// any service may write: a superuser's or a restored backup's, which no
// owner renews and nobody would wait out.
func (r *Record) leaseOutOfBounds() bool {
	return r.State == StatePending && r.LeaseExpiresAt.Sub(r.DBTime) > MaxLease+leaseSlack
}

// Infinity and NegativeInfinity are how a record's time reads when the
// store holds 'infinity' or '-infinity', or a time beyond the years RFC
// 3339 writes (after 9999, before year 1): only a superuser or a restored
// backup writes one, since the state machine refuses them from services
// (schema 24). Compare with Equal; never assign them.
var (
	Infinity         = pgtime.Infinity
	NegativeInfinity = pgtime.NegativeInfinity
)

// Read reads the record of an identity without executing anything. A
// missing record is a Record with State StateAbsent, not an error. Callers
// that saw a timeout ask before they decide what to do. It writes nothing,
// so its only failures are ErrUnavailable and ErrStoreRefused (and bad identity
// fields, ErrInvalidRequest).
func (s *Store) Read(ctx context.Context, id Identity) (Record, error) {
	for field, v := range map[string]string{"tenant": id.Tenant, "tool": id.Tool} {
		if err := checkName(field, v, maxNameBytes); err != nil {
			return Record{}, err
		}
	}
	if err := checkName("key", id.Key, MaxKeyBytes); err != nil {
		return Record{}, err
	}
	rec, _, err := load(ctx, s.pool, id)
	if err != nil {
		return Record{}, fmt.Errorf("look up %s: %w", id, notWritten(err))
	}
	return rec, nil
}

const loadSQL = `
SELECT id, tool_version, fingerprint, effect, state, coalesce(outcome, '') AS outcome,
       coalesce(owner, '') AS owner, attempt, leased_at, lease_expires_at, created_at, updated_at,
       completed_at, expires_at, coalesce(result_ref, '') AS result_ref, version, conflict_count,
       last_conflict_at, result, now() AS db_now
FROM opsdesk.operations
WHERE tenant = $1 AND tool = $2 AND key = $3`

// recordRow is loadSQL's row, in its column order. Times are scanned as
// pgtype.Timestamptz and read by pgtime: the pool is the service's, and
// pgx refuses to scan 'infinity' into a time.Time, which would answer
// every retry of the record with ErrUnavailable.
type recordRow struct {
	ID             int64              `db:"id"`
	ToolVersion    string             `db:"tool_version"`
	Fingerprint    []byte             `db:"fingerprint"`
	Effect         string             `db:"effect"`
	State          string             `db:"state"`
	Outcome        string             `db:"outcome"`
	Owner          string             `db:"owner"`
	Attempt        int32              `db:"attempt"`
	LeasedAt       pgtype.Timestamptz `db:"leased_at"`
	LeaseExpiresAt pgtype.Timestamptz `db:"lease_expires_at"`
	CreatedAt      pgtype.Timestamptz `db:"created_at"`
	UpdatedAt      pgtype.Timestamptz `db:"updated_at"`
	CompletedAt    pgtype.Timestamptz `db:"completed_at"`
	ExpiresAt      pgtype.Timestamptz `db:"expires_at"`
	ResultRef      string             `db:"result_ref"`
	Version        int64              `db:"version"`
	ConflictCount  int32              `db:"conflict_count"`
	LastConflictAt pgtype.Timestamptz `db:"last_conflict_at"`
	Result         []byte             `db:"result"`
	DBNow          pgtype.Timestamptz `db:"db_now"`
}

// load reads a record and its stored result (JSON); a missing record has
// StateAbsent, with its tombstone's id and time if it was purged.
func load(ctx context.Context, q dbtx, id Identity) (Record, []byte, error) {
	rec, result, found, err := peek(ctx, q, id)
	if err != nil || found {
		return rec, result, err
	}
	rec = Record{Identity: id, State: StateAbsent}
	var purgedAt, dbNow pgtype.Timestamptz
	err = q.QueryRow(ctx, `SELECT operation_id, purged_at, now() FROM opsdesk.tombstones
WHERE tenant = $1 AND tool = $2 AND key = $3 AND expires_at > now()`, id.Tenant, id.Tool, id.Key).
		Scan(&rec.ID, &purgedAt, &dbNow)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Record{}, nil, err
	}
	rec.PurgedAt, rec.DBTime = pgtime.FromTimestamptz(purgedAt), pgtime.FromTimestamptz(dbNow)
	return rec, nil, nil
}

// peek reads a record and its stored result in one statement; found is
// false when there is none (tombstones are not read).
func peek(ctx context.Context, q dbtx, id Identity) (rec Record, result []byte, found bool, err error) {
	var row recordRow
	// Scanned in loadSQL's column order: this read is every replay's only
	// statement, and scanning by name costs reflection on each call.
	err = q.QueryRow(ctx, loadSQL, id.Tenant, id.Tool, id.Key).Scan(&row.ID, &row.ToolVersion, &row.Fingerprint,
		&row.Effect, &row.State, &row.Outcome, &row.Owner, &row.Attempt, &row.LeasedAt, &row.LeaseExpiresAt,
		&row.CreatedAt, &row.UpdatedAt, &row.CompletedAt, &row.ExpiresAt, &row.ResultRef, &row.Version,
		&row.ConflictCount, &row.LastConflictAt, &row.Result, &row.DBNow)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, nil, false, nil
	}
	if err != nil {
		return Record{}, nil, false, err
	}
	rec = Record{
		Identity:       id,
		ID:             row.ID,
		ToolVersion:    row.ToolVersion,
		Effect:         Effect(row.Effect),
		State:          State(row.State),
		Outcome:        RecordOutcome(row.Outcome),
		Owner:          row.Owner,
		Attempt:        int(row.Attempt),
		LeasedAt:       pgtime.FromTimestamptz(row.LeasedAt),
		LeaseExpiresAt: pgtime.FromTimestamptz(row.LeaseExpiresAt),
		CreatedAt:      pgtime.FromTimestamptz(row.CreatedAt),
		UpdatedAt:      pgtime.FromTimestamptz(row.UpdatedAt),
		CompletedAt:    pgtime.FromTimestamptz(row.CompletedAt),
		ExpiresAt:      pgtime.FromTimestamptz(row.ExpiresAt),
		ResultRef:      row.ResultRef,
		Version:        row.Version,
		ConflictCount:  int(row.ConflictCount),
		LastConflictAt: pgtime.FromTimestamptz(row.LastConflictAt),
		DBTime:         pgtime.FromTimestamptz(row.DBNow),
	}
	copy(rec.Fingerprint[:], row.Fingerprint)
	return rec, row.Result, true, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
