package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/internal/auditreport"
)

// RowQuerier runs a query that returns one row (a pool, a connection).
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Sealing is what one call of opsdesk.audit_seal did, in the chains the
// caller sees.
//
// A person's function queues its audit entry in the transaction of its
// change (opsdesk.audit_queue); the sealer then gives committed entries
// their sequence numbers and hashes, chain by chain, in one short
// transaction of its own (migration 00023). Entries of a chain that
// another session is sealing wait for it, queued.
type Sealing struct {
	// Sealed is how many entries this call sealed.
	Sealed int `json:"sealed"`
	// Waiting is how many entries are still queued, and HeldBy the
	// sessions (role and pid) sealing their chains.
	Waiting int64  `json:"waiting"`
	HeldBy  string `json:"held_by,omitempty"`
	// Problem says why a chain could not be sealed (a constraint or a head
	// row changed by hand); its entries stay queued and the others are
	// sealed.
	Problem string `json:"problem,omitempty"`
	// Seq is the sequence number of the entry Seal was asked about, 0
	// while it is queued.
	Seq int64 `json:"seq,omitempty"`
}

// Seal seals what has committed, as its own transaction (a pool's
// QueryRow), and tells the sequence number of the caller's own entry
// (tenant, entry) when entry is not 0. opsdesk's commands call it right
// after they commit, so that people see sequence numbers at once; the
// console's poll and the exporter call it too.
func Seal(ctx context.Context, q RowQuerier, tenant string, entry int64) (Sealing, error) {
	var (
		s       Sealing
		heldBy  *string
		problem *string
		seq     *int64
	)
	var t, e any // NULL: no entry asked about
	if entry != 0 {
		t, e = tenant, entry
	}
	if err := q.QueryRow(ctx, `SELECT sealed, waiting, held_by, problem, seq FROM opsdesk.audit_seal($1, $2)`, t, e).
		Scan(&s.Sealed, &s.Waiting, &heldBy, &problem, &seq); err != nil {
		return s, fmt.Errorf("seal the audit trail: %w", err)
	}
	if heldBy != nil {
		s.HeldBy = *heldBy
	}
	if problem != nil {
		s.Problem = *problem
	}
	if seq != nil {
		s.Seq = *seq
	}
	return s, nil
}

// ReadQueued counts the entries not sealed yet that the role sees.
func ReadQueued(ctx context.Context, q RowQuerier) (auditreport.Queued, error) {
	var (
		n   int64
		age *float64
	)
	if err := q.QueryRow(ctx, `SELECT count(*), extract(epoch FROM clock_timestamp() - min(at))::float8 FROM opsdesk.audit_queue`).
		Scan(&n, &age); err != nil {
		return auditreport.Queued{}, fmt.Errorf("count the audit entries not sealed yet: %w", err)
	}
	out := auditreport.Queued{Entries: n}
	if age != nil {
		out.Oldest = time.Duration(*age * float64(time.Second))
	}
	return out, nil
}

// SealedSeq seals the trail as its own transaction and returns the
// sequence number of the caller's audit entry (tenant, entry), 0 when it
// is still queued: its chain is being sealed by another session, or the
// seal failed. What it answers for has committed either way, so neither
// is an error: the entry is in the queue and the next seal takes it.
func SealedSeq(ctx context.Context, q RowQuerier, tenant string, entry int64) int64 {
	s, err := Seal(ctx, q, tenant, entry)
	if err != nil {
		return 0
	}
	return s.Seq
}
