// Package audit verifies opsdesk's audit trail without trusting the
// database that keeps it: it recomputes every record's hash and every
// chain's links in Go, and signs and checks checkpoints of the chain heads,
// kept outside the database, that catch what a chain alone cannot (a
// removed or rewritten tail).
//
// The trail is one hash chain per tenant in opsdesk.audit; the chain ""
// holds the events outside any tenant. Migration 00005 defines the table and
// opsdesk.audit_hash, which Hash mirrors.
package audit

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Record is one row of opsdesk.audit. Nullable columns are pointers (or a
// nil slice): NULL and the empty string hash differently.
type Record struct {
	Tenant          string    `json:"tenant"`
	Seq             int64     `json:"seq"`
	EventID         string    `json:"event_id"` // PostgreSQL's text form: lowercase, hyphenated
	At              time.Time `json:"at"`
	Role            string    `json:"role"`
	DisplayName     *string   `json:"display_name"`
	Action          string    `json:"action"`
	Outcome         string    `json:"outcome"`
	Tool            *string   `json:"tool"`
	Key             *string   `json:"key"`
	OperationID     *int64    `json:"operation_id"`
	StateBefore     *string   `json:"state_before"`
	StateAfter      *string   `json:"state_after"`
	VersionBefore   *int64    `json:"version_before"`
	VersionAfter    *int64    `json:"version_after"`
	Reason          *string   `json:"reason"`
	EvidenceDigest  *string   `json:"evidence_digest"`
	EvidenceSummary *string   `json:"evidence_summary"`
	Forced          bool      `json:"forced"`
	Override        bool      `json:"override"`
	Details         *string   `json:"details"` // the jsonb's text, as PostgreSQL prints it
	PrevHash        []byte    `json:"prev_hash"`
	Hash            []byte    `json:"hash"`
	HashVersion     int16     `json:"hash_version"`
}

// Targets are the scan destinations of RecordColumns, in order.
func (r *Record) Targets() []any {
	return []any{&r.Tenant, &r.Seq, &r.EventID, &r.At, &r.Role, &r.DisplayName, &r.Action, &r.Outcome,
		&r.Tool, &r.Key, &r.OperationID, &r.StateBefore, &r.StateAfter, &r.VersionBefore, &r.VersionAfter,
		&r.Reason, &r.EvidenceDigest, &r.EvidenceSummary, &r.Forced, &r.Override, &r.Details, &r.PrevHash,
		&r.Hash, &r.HashVersion}
}

// HashMatches tells whether r's stored hash is the one its contents give,
// in the hash version this package computes: a record changed after it
// was written does not match. (Its link to the record before, and gaps,
// are Verify's to check.)
func (r Record) HashMatches() bool {
	return r.HashVersion == HashVersion && bytes.Equal(Hash(r), r.Hash)
}

// Querier runs a query: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ReadOpts narrows Read.
type ReadOpts struct {
	// Tenant, when set, reads that tenant's chain only; "" is the chain of
	// events outside any tenant.
	Tenant *string
	// AfterSeq keeps the records after this seq (of every chain read);
	// UpToSeq, when positive, those up to it.
	AfterSeq, UpToSeq int64
}

// RecordColumns selects a Record's columns from opsdesk.audit, in the
// order of Record.Targets, for a query that reads records its own way
// (the console's list of the trail, newest first). It reads event_id and
// details as text: their text is what the hash covers.
const RecordColumns = `tenant, seq, event_id::text, at, role, display_name, action, outcome, tool, key,
    operation_id, state_before, state_after, version_before, version_after, reason, evidence_digest,
    evidence_summary, forced, override, details::text, prev_hash, hash, hash_version`

// Read streams the audit records the connected role may see to fn, ordered
// by (tenant, seq), one row at a time: a trail of millions of records is
// never held in memory. An error from fn stops the read and is returned.
func Read(ctx context.Context, q Querier, opts ReadOpts, fn func(Record) error) error {
	sql := `SELECT ` + RecordColumns + ` FROM opsdesk.audit WHERE seq > $1`
	args := []any{opts.AfterSeq}
	if opts.UpToSeq > 0 {
		args = append(args, opts.UpToSeq)
		sql += ` AND seq <= $2`
	}
	if opts.Tenant != nil {
		args = append(args, *opts.Tenant)
		sql += ` AND tenant = $` + strconv.Itoa(len(args))
	}
	// The primary key's order: an index scan, no sort.
	sql += ` ORDER BY tenant, seq`
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("read audit: %w", err)
	}
	var r Record
	// Every scan allocates its pointers and slices afresh (or sets nil), so
	// the copy fn receives shares nothing with the next row.
	_, err = pgx.ForEachRow(rows, r.Targets(), func() error { return fn(r) })
	if err != nil {
		return fmt.Errorf("read audit: %w", err)
	}
	return nil
}
