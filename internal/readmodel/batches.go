package readmodel

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Batch is one bulk run as its decisions' audit records have it, as far
// as the role may see them: row-level security leaves out the records of
// tenants it may not see, so a one-tenant viewer sees its tenant's part of
// a run.
type Batch struct {
	// ID is the run's batch id, in every decision's details.batch.
	ID string `json:"id"`
	// FirstAt and LastAt are the first and the last audit record's times,
	// Span the time between them.
	FirstAt time.Time     `json:"first_at"`
	LastAt  time.Time     `json:"last_at"`
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
	// Filter is the filter the run was planned from: nil, since the audit
	// records do not hold it (BatchFilterNotRecorded says what they do).
	Filter *string `json:"filter"`
	// Groups are the run's decisions by the lookup's verdict and the
	// decision, in that order.
	Groups []BatchGroup `json:"groups"`
}

// BatchFilterNotRecorded says what the audit trail keeps of a run in
// place of its filter.
const BatchFilterNotRecorded = "not recorded: the audit trail keeps each decision's batch id, lookup verdict, decision and outcome"

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
// last record).
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
// (LastAt, ID), both descending.
type BatchCursor struct {
	LastAt time.Time
	ID     string
}

// Cursor is the cursor that continues after b.
func (b Batch) Cursor() BatchCursor { return BatchCursor{LastAt: b.LastAt, ID: b.ID} }

// batchCursorPrefix versions the cursor's text.
const batchCursorPrefix = "b1."

// String is the cursor as an opaque token for a command line.
func (c BatchCursor) String() string {
	raw := strconv.FormatInt(c.LastAt.UnixMicro(), 10) + "." + c.ID
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
	return BatchCursor{LastAt: time.UnixMicro(at).UTC(), ID: id}, nil
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
