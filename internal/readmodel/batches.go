package readmodel

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Batch is one bulk run or reconciler pass: its start as opsdesk.batches
// records it (migration 00029), and its decisions as their audit records
// have them, as far as the role may see them. Row-level security decides:
// a role sees a run it started, every run when it sees every tenant, and
// otherwise a run with at least one audit record it may see, and then
// only those records: a one-tenant viewer sees its tenant's part of a run.
type Batch struct {
	// ID is the run's batch id, chosen by the database, in every
	// decision's details.batch.
	ID string `json:"id"`
	// StartedAt is when the run started; StartedBy the database role that
	// started it (the only one that may decide under it), StartedByName
	// what it called itself (unproven; nil when it gave no name). A run
	// from before migration 00029 has its first record's.
	StartedAt     time.Time `json:"started_at"`
	StartedBy     string    `json:"started_by"`
	StartedByName *string   `json:"started_by_name"`
	// FirstAt and LastAt are the first and the last audit record's times
	// (nil when the role sees none: a run that decided nothing, or
	// nothing it may see), Span the time between them.
	FirstAt *time.Time    `json:"first_at"`
	LastAt  *time.Time    `json:"last_at"`
	Span    time.Duration `json:"span_seconds"`
	// Roles are the database roles that decided, DisplayNames what they
	// called themselves (unproven).
	Roles        []string `json:"roles"`
	DisplayNames []string `json:"display_names"`
	// Tenants and Tools are those of the records decided ("" is a refusal
	// outside any tenant's chain).
	Tenants []string `json:"tenants"`
	Tools   []string `json:"tools"`
	// Records is the number of audit records, Operations the number of
	// records (operations) they are about.
	Records    int `json:"records"`
	Operations int `json:"operations"`
	// Filter is the filter the run was planned from (a reconciler pass's:
	// its tools); nil for a run from before migration 00029, which did not
	// record it (BatchFilterNotRecorded says so).
	Filter *string `json:"filter"`
	// Groups are the run's decisions by the lookup's verdict and the
	// decision, in that order.
	Groups []BatchGroup `json:"groups"`
}

// BatchFilterNotRecorded says why a run has no filter.
const BatchFilterNotRecorded = "not recorded: the run is from before runs were recorded (migration 00029)"

// FilterText is the run's filter, or BatchFilterNotRecorded.
func (b Batch) FilterText() string {
	if b.Filter == nil {
		return BatchFilterNotRecorded
	}
	return *b.Filter
}

// BatchGroup is a run's decisions of one lookup verdict and one decision:
// the group a person accepted, as the audit trail tells it.
type BatchGroup struct {
	// Lookup is the lookup's verdict the decision recorded: found,
	// not_found ("" none).
	Lookup string `json:"lookup"`
	// Decision is completed, not-executed, failed or defer.
	Decision string `json:"decision"`
	// Decided took effect; Skipped were refused because the record
	// changed since the lookup (changed, not pending, lease live); Failed
	// are every other refusal (denied or failed), each audited. A record
	// the run skipped before trying, and a decision that never answered,
	// leave no audit record.
	Decided int `json:"decided"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
}

// BatchQuery asks for one page of past bulk runs, newest first (by their
// start).
type BatchQuery struct {
	// Limit defaults to 50 and is capped at 1000.
	Limit int
	// After continues from the previous page's Next.
	After *BatchCursor
}

// BatchPage is one page of past bulk runs.
type BatchPage struct {
	Batches []Batch
	DBTime  time.Time
	// Next is nil on the last page.
	Next *BatchCursor
}

// BatchCursor continues the list of runs after one: the order is
// (StartedAt, ID), both descending.
type BatchCursor struct {
	StartedAt time.Time
	ID        string
}

// Cursor is the cursor that continues after b.
func (b Batch) Cursor() BatchCursor { return BatchCursor{StartedAt: b.StartedAt, ID: b.ID} }

// batchCursorPrefix versions the cursor's text: b1 ordered by the last
// record, before migration 00029, and is refused.
const batchCursorPrefix = "b2."

// String is the cursor as an opaque token for a command line.
func (c BatchCursor) String() string {
	raw := strconv.FormatInt(c.StartedAt.UnixMicro(), 10) + "." + c.ID
	return batchCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseBatchCursor reads a cursor that BatchCursor.String wrote.
func ParseBatchCursor(s string) (BatchCursor, error) {
	shown := s
	if len(shown) > 60 {
		shown = shown[:60] + "…"
	}
	bad := fmt.Errorf("cursor %q is not one that audit batches printed (copy its \"next\" value whole)", strings.ToValidUTF8(shown, "?"))
	enc, ok := strings.CutPrefix(s, batchCursorPrefix)
	if !ok || len(enc) > 100 {
		return BatchCursor{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return BatchCursor{}, bad
	}
	micros, id, ok := strings.Cut(string(raw), ".")
	if !ok {
		return BatchCursor{}, bad
	}
	at, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return BatchCursor{}, bad
	}
	id, ok = canonicalUUID(id)
	if !ok {
		return BatchCursor{}, bad
	}
	return BatchCursor{StartedAt: time.UnixMicro(at).UTC(), ID: id}, nil
}

// BatchFilter is the audit filter that lists a run's records.
func BatchFilter(id string) AuditFilter { return AuditFilter{Batches: []string{id}} }

// Counts are the group's counts in words, such as "4 decided, 1 skipped".
func (g BatchGroup) Counts() string {
	parts := []string{strconv.Itoa(g.Decided) + " decided"}
	if g.Skipped > 0 {
		parts = append(parts, strconv.Itoa(g.Skipped)+" skipped")
	}
	if g.Failed > 0 {
		parts = append(parts, strconv.Itoa(g.Failed)+" failed")
	}
	return strings.Join(parts, ", ")
}

// Label is the group in words: "found → completed".
func (g BatchGroup) Label() string {
	lookup := strings.ReplaceAll(g.Lookup, "_", " ")
	if lookup == "" {
		lookup = "no lookup"
	}
	return lookup + " → " + g.Decision
}
