package storeview

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/internal/readmodel"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/internal/audit"
)

// The audit browser: the audit trail newest first across every chain the
// connected role may see (row-level security decides which), filtered in
// the operations list's language, paged by a cursor.

// AuditList returns one page of the audit trail, newest first.
func (s *Store) AuditList(ctx context.Context, q readmodel.AuditQuery) (readmodel.AuditPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	b := &builder{}
	b.applyAudit(q.Filter)
	if c := q.After; c != nil {
		// at <= bounds every index on (…, at, …) by itself; the row
		// comparison then places the cursor exactly.
		b.where("a.at <= %s", c.At)
		b.where("(a.at, a.tenant, a.seq) < (%s, %s, %s)", c.At, c.Tenant, c.Seq)
	}
	from := "opsdesk.audit a WHERE " + b.sql()
	fence, err := s.fewKeys(ctx, q.Filter.Keys)
	if err != nil {
		return readmodel.AuditPage{}, fmt.Errorf("list audit records: %w", err)
	}
	if fence {
		// OFFSET 0 keeps the limit out of the subquery: the planner finds
		// every match by the key index, then sorts them.
		from = "(SELECT * FROM " + from + " OFFSET 0) a WHERE TRUE"
	}
	// The records whole, so that each hash is checked as it is shown.
	sql := "SELECT " + audit.RecordColumns + ", now() FROM " + from +
		" ORDER BY a.at DESC, a.tenant DESC, a.seq DESC LIMIT " + strconv.Itoa(limit+1)
	rows, err := s.pool.Query(ctx, sql, b.args...)
	if err != nil {
		return readmodel.AuditPage{}, fmt.Errorf("list audit records: %w", err)
	}
	var r audit.Record
	var now time.Time
	var scanned []readmodel.AuditRow
	_, err = pgx.ForEachRow(rows, append(r.Targets(), &now), func() error {
		scanned = append(scanned, auditRowOf(r, now))
		return nil
	})
	if err != nil {
		return readmodel.AuditPage{}, fmt.Errorf("list audit records: %w", err)
	}
	page := readmodel.AuditPage{Rows: make([]readmodel.AuditRow, 0, min(len(scanned), limit))}
	for i, r := range scanned {
		if i == limit {
			next := page.Rows[limit-1].Cursor()
			page.Next = &next
			break
		}
		page.Rows = append(page.Rows, r)
	}
	if len(scanned) > 0 {
		page.DBTime = scanned[0].DBTime
	} else if err := s.pool.QueryRow(ctx, "SELECT now()").Scan(&page.DBTime); err != nil {
		return readmodel.AuditPage{}, fmt.Errorf("read database time: %w", err)
	}
	return page, nil
}

// AuditChainsNotVisible returns those of tenants that have no audit record
// the connected role may see, and the role (session_user): a filter naming
// a tenant misspelt, or one the role may not see, matches nothing, and a
// list that says only that reads as a quiet chain. One primary key probe
// per tenant.
func (s *Store) AuditChainsNotVisible(ctx context.Context, tenants []string) (role string, missing []string, err error) {
	err = s.pool.QueryRow(ctx, `
SELECT session_user, coalesce(array_agg(t ORDER BY t COLLATE "C") FILTER (
    WHERE NOT EXISTS (SELECT FROM opsdesk.audit a WHERE a.tenant = t)), '{}')
FROM unnest($1::text[]) t`, tenants).Scan(&role, &missing)
	if err != nil {
		return "", nil, fmt.Errorf("look up audit chains: %w", err)
	}
	return role, missing, nil
}

// auditKeyFence is the number of records up to which a key pattern's
// matches are found by the key index and sorted.
const auditKeyFence = 10_000

// fewKeys tells whether the key patterns keep at most auditKeyFence of
// the records the role may see. The planner cannot tell where in time a
// pattern's records lie: walking the time index newest first to find the
// records of key:run-1234* (0.3% of a million, all of them old) reads
// most of the index. Counting up to the fence by the key index costs a
// few milliseconds; beyond it the walk newest first is what is left
// (narrow the pattern, or add since:/until:, when it is slow). Exact keys
// and the other fields need no fence: their estimates are good, and one
// value of role, action, outcome, tool or tenant has an index in the
// page's order.
func (s *Store) fewKeys(ctx context.Context, keys []string) (bool, error) {
	if !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "*") }) {
		return false, nil
	}
	b := &builder{}
	b.keyPatterns(keys)
	var n int
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT FROM opsdesk.audit a WHERE "+b.sql()+
		" LIMIT "+strconv.Itoa(auditKeyFence+1)+") s", b.args...).Scan(&n)
	return n <= auditKeyFence, err
}

// keyPatterns is patterns for audit keys, with an index range for each
// pattern's literal prefix. People read the audit through row-level
// security, and LIKE is not leakproof: PostgreSQL evaluates it only after
// the tenant policy, never in an index scan. The pattern operators
// (~>=~, ~<~) are leakproof and match audit_browse_key_idx
// (text_pattern_ops), so the range finds the candidates and LIKE checks
// them.
func (b *builder) keyPatterns(values []string) {
	if len(values) == 0 {
		return
	}
	var exact, alts []string
	for _, v := range values {
		prefix, _, isPattern := strings.Cut(v, "*")
		if !isPattern {
			exact = append(exact, v)
			continue
		}
		conds := []string{"a.key LIKE " + b.arg(likePattern(v))}
		if prefix != "" {
			conds = append(conds, "a.key ~>=~ "+b.arg(prefix))
			if upper, ok := prefixUpper(prefix); ok {
				conds = append(conds, "a.key ~<~ "+b.arg(upper))
			}
		}
		alts = append(alts, "("+strings.Join(conds, " AND ")+")")
	}
	if len(exact) > 0 {
		alts = append(alts, b.oneOfSQL("a.key", exact))
	}
	b.conds = append(b.conds, "("+strings.Join(alts, " OR ")+")")
}

// prefixUpper is the least string above every string that starts with
// prefix, in byte order (UTF-8's byte order is code point order): the
// prefix with its last character that can be raised raised by one.
func prefixUpper(prefix string) (string, bool) {
	r := []rune(prefix)
	for i := len(r) - 1; i >= 0; i-- {
		if r[i] >= utf8.MaxRune {
			continue
		}
		r[i]++
		if r[i] >= 0xD800 && r[i] <= 0xDFFF { // surrogates are not characters
			r[i] = 0xE000
		}
		return string(r[:i+1]), true
	}
	return "", false
}

// applyAudit adds the audit filter's conditions. Each single value is
// compared with the bare column, so the planner matches the indexes of
// migration 00012.
func (b *builder) applyAudit(f readmodel.AuditFilter) {
	b.oneOf("a.tenant", f.Tenants)
	b.oneOf("a.tool", f.Tools)
	b.oneOf("a.role", f.Roles)
	b.oneOf("a.outcome", f.Outcomes)
	switch len(f.OperationIDs) {
	case 0:
	case 1:
		b.where("a.operation_id = %s", f.OperationIDs[0])
	default:
		b.where("a.operation_id = ANY(%s)", f.OperationIDs)
	}
	b.keyPatterns(f.Keys)
	b.patterns("a.action", f.Actions)
	// A bulk run's id is in its decisions' details. audit_batch_idx
	// (migration 00029) holds it; the planner may use it here, or walk
	// audit_browse_idx newest first and stop when the page is full. Only
	// decisions carry one, which the action bound keeps the planner told.
	b.oneOf("opsdesk.batch_of(a.details)", f.Batches)
	if len(f.Batches) > 0 && len(f.Actions) == 0 {
		b.conds = append(b.conds, "a.action LIKE 'decide:%'")
	}
	if !f.Since.IsZero() {
		b.where("a.at >= %s", f.Since)
	}
	if !f.Until.IsZero() {
		b.where("a.at < %s", f.Until)
	}
	if f.MinAge > 0 {
		b.where("a.at <= now() - %s * interval '1 microsecond'", f.MinAge.Microseconds())
	}
	if f.MaxAge > 0 {
		b.where("a.at > now() - %s * interval '1 microsecond'", f.MaxAge.Microseconds())
	}
}

// auditRowOf is a record as a list shows it, read at the database time
// now, its hash checked.
func auditRowOf(r audit.Record, now time.Time) readmodel.AuditRow {
	row := readmodel.AuditRow{
		Tenant: r.Tenant, Seq: r.Seq, At: r.At, Role: r.Role, DisplayName: deref0(r.DisplayName), Action: r.Action,
		Outcome: r.Outcome, Tool: deref0(r.Tool), Key: deref0(r.Key), StateBefore: deref0(r.StateBefore),
		StateAfter: deref0(r.StateAfter), VersionBefore: r.VersionBefore, VersionAfter: r.VersionAfter,
		Reason: deref0(r.Reason), HasEvidence: r.EvidenceDigest != nil || r.EvidenceSummary != nil,
		Forced: r.Forced, Override: r.Override, HashBroken: !r.HashMatches(), DBTime: now,
	}
	if r.OperationID != nil {
		row.OperationID = *r.OperationID
	}
	if r.Details != nil && strings.HasPrefix(r.Action, "decide:") {
		var details struct {
			Reconciler bool `json:"reconciler"`
		}
		// A record whose details do not parse is shown unmarked; its
		// detail view says what it holds.
		_ = json.Unmarshal([]byte(*r.Details), &details)
		row.Machine = details.Reconciler
	}
	return row
}

// AuditRecord returns one audit record, checked against its own hash and
// the record before it, in one snapshot.
func (s *Store) AuditRecord(ctx context.Context, tenant string, seq int64) (d readmodel.AuditDetail, err error) {
	err = s.snapshot(ctx, func(q querier) error {
		d, err = s.auditRecordIn(ctx, q, tenant, seq)
		return err
	})
	return d, err
}

func (s *Store) auditRecordIn(ctx context.Context, q querier, tenant string, seq int64) (readmodel.AuditDetail, error) {
	var recs []audit.Record
	err := audit.Read(ctx, q, audit.ReadOpts{Tenant: &tenant, AfterSeq: max(seq-2, 0), UpToSeq: seq}, func(r audit.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return readmodel.AuditDetail{}, fmt.Errorf("read audit record %s/%d: %w", audited.TenantName(tenant), seq, err)
	}
	if len(recs) == 0 || recs[len(recs)-1].Seq != seq {
		return readmodel.AuditDetail{}, readmodel.ErrNoAuditRecord
	}
	r := recs[len(recs)-1]
	d := readmodel.AuditDetail{
		AuditRow: auditRowOf(r, time.Time{}),
		EventID:  r.EventID, EvidenceDigest: deref0(r.EvidenceDigest), EvidenceSummary: deref0(r.EvidenceSummary),
		PrevHash: r.PrevHash, Hash: r.Hash, HashVersion: r.HashVersion,
	}
	if r.Details != nil {
		d.Details = json.RawMessage(*r.Details)
	}
	err = q.QueryRow(ctx, `SELECT now(), coalesce((SELECT seq FROM opsdesk.audit_heads WHERE tenant = $1), 0)`, tenant).
		Scan(&d.DBTime, &d.Check.HeadSeq)
	if err != nil {
		return readmodel.AuditDetail{}, fmt.Errorf("read the audit chain's head: %w", err)
	}
	d.Check.HashMatches = r.HashMatches()
	var problems []string
	if !d.Check.HashMatches {
		problems = append(problems, "its hash does not match its contents")
	}
	switch {
	case seq == 1:
		d.Check.Linked = r.PrevHash == nil
	case len(recs) == 2:
		d.Check.Linked = r.PrevHash != nil && bytes.Equal(r.PrevHash, recs[0].Hash)
	}
	if !d.Check.Linked {
		if seq == 1 {
			problems = append(problems, "seq 1 has a prev_hash, but starts the chain")
		} else if len(recs) < 2 {
			problems = append(problems, fmt.Sprintf("seq %d, the record before it, is missing", seq-1))
		} else {
			problems = append(problems, fmt.Sprintf("its prev_hash is not the hash of seq %d", seq-1))
		}
	}
	d.Check.Problem = strings.Join(problems, "; ")
	return d, nil
}

func deref0(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
