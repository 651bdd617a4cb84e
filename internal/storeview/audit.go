package storeview

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/opsdesk/opsdesk/internal/audited"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/internal/audit"
)

// The audit browser: the audit trail newest first across every chain the
// connected role may see (row-level security decides which), filtered in
// the operations list's language, paged by a cursor.

// AuditOutcomes are the outcomes an audit record can have.
var AuditOutcomes = []string{"succeeded", "denied", "failed"}

// AuditFilter narrows the audit browser. As in Filter, values within one
// field are alternatives (OR) and fields combine with AND; the zero
// AuditFilter matches everything.
type AuditFilter struct {
	// Tenants are chains; "" is the chain of events outside any tenant
	// (written tenant:'' in the language).
	Tenants []string
	Tools   []string
	// Keys and Actions are patterns: '*' matches any run of characters;
	// without '*' the value must match exactly.
	Keys    []string
	Actions []string
	// OperationIDs are the records (operations) the audit records are about.
	OperationIDs []int64
	// Roles are the authenticated database roles that acted.
	Roles    []string
	Outcomes []string
	// Since (inclusive) and Until (exclusive) bound the record's time;
	// zero means unbounded.
	Since, Until time.Time
	// MinAge and MaxAge bound how long ago the record was written, by the
	// database clock; zero means unbounded.
	MinAge, MaxAge time.Duration
}

// AuditFilterHelp describes the audit filter language, for help screens
// and flags.
const AuditFilterHelp = `tenant:T (tenant:'' events outside any tenant)  tool:T  key:run-42*  id:48213 (operation)  role:R
action:decide:*  outcome:succeeded|denied|failed  since:2026-11-30T10:00Z  until:2026-12-01  age<1h  age>10m
(a,b: either; terms combine with AND; times without a zone are UTC; "quote values with spaces")`

// ParseAuditFilter reads the audit filter language, for example
//
//	tenant:acme action:decide:* outcome:denied since:2026-11-30T10:00Z age<1h
//
// It splits terms as ParseFilter does. Errors say which term is wrong and
// how to write it.
func ParseAuditFilter(s string) (AuditFilter, error) {
	var f AuditFilter
	err := eachTerm(s, "write field:value (fields: tenant, tool, key, id, role, action, outcome, since, until), or age>10m / age<1h",
		func(t term) error {
			switch t.field {
			case "age":
				d, err := t.duration()
				if err != nil {
					return err
				}
				if t.op == ">" {
					f.MinAge = d
				} else {
					f.MaxAge = d
				}
				return nil
			case "since", "until":
				at, err := parseAuditTime(t.value)
				if err != nil {
					return fmt.Errorf("%q: %s needs a time such as 2026-11-30T10:00Z, 2026-11-30T10:00:00+01:00 or 2026-11-30", t.text, t.field)
				}
				if t.field == "since" {
					f.Since = at
				} else {
					f.Until = at
				}
				return nil
			}
			values, err := t.values()
			if err != nil {
				return err
			}
			switch t.field {
			case "tenant":
				for _, v := range values {
					if v == "''" {
						v = ""
					}
					f.Tenants = append(f.Tenants, v)
				}
			case "tool":
				f.Tools = values
			case "key":
				f.Keys = values
			case "action":
				f.Actions = values
			case "role":
				f.Roles = values
			case "outcome":
				for _, v := range values {
					if !slices.Contains(AuditOutcomes, v) {
						return fmt.Errorf("%q: unknown outcome %q (outcomes: succeeded, denied, failed)", t.text, v)
					}
				}
				f.Outcomes = values
			case "id":
				f.OperationIDs, err = t.ids(values, "an operation's record number")
				return err
			default:
				return fmt.Errorf("%q: unknown field %q (fields: tenant, tool, key, id, role, action, outcome, since, until, age)", t.text, t.field)
			}
			return nil
		})
	if err != nil {
		return f, err
	}
	if f.MinAge > 0 && f.MaxAge > 0 && f.MinAge >= f.MaxAge {
		return f, fmt.Errorf("age>%v and age<%v match nothing", f.MinAge, f.MaxAge)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, fmt.Errorf("since:%s and until:%s match nothing (since is inclusive, until exclusive)",
			formatAuditTime(f.Since), formatAuditTime(f.Until))
	}
	return f, nil
}

// auditTimeLayouts are the times since: and until: read, the most
// precise first. Layouts without a zone are read as UTC.
var auditTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

func parseAuditTime(s string) (time.Time, error) {
	for _, layout := range auditTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("bad time %q", s)
}

func formatAuditTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// String writes the filter back in the language (canonical order).
func (f AuditFilter) String() string {
	var terms []string
	add := func(field string, values []string) {
		if len(values) == 0 {
			return
		}
		v := strings.Join(values, ",")
		if strings.ContainsAny(v, " \t\"") {
			v = `"` + strings.ReplaceAll(v, `"`, "") + `"`
		}
		terms = append(terms, field+":"+v)
	}
	tenants := make([]string, len(f.Tenants))
	for i, t := range f.Tenants {
		if t == "" {
			t = "''"
		}
		tenants[i] = t
	}
	add("tenant", tenants)
	add("tool", f.Tools)
	add("key", f.Keys)
	ids := make([]string, len(f.OperationIDs))
	for i, id := range f.OperationIDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	add("id", ids)
	add("role", f.Roles)
	add("action", f.Actions)
	add("outcome", f.Outcomes)
	if !f.Since.IsZero() {
		terms = append(terms, "since:"+formatAuditTime(f.Since))
	}
	if !f.Until.IsZero() {
		terms = append(terms, "until:"+formatAuditTime(f.Until))
	}
	if f.MinAge > 0 {
		terms = append(terms, "age>"+f.MinAge.String())
	}
	if f.MaxAge > 0 {
		terms = append(terms, "age<"+f.MaxAge.String())
	}
	return strings.Join(terms, " ")
}

// OperationAuditFilter is an operation's audit history: the filter the
// console opens from an operation's detail.
func OperationAuditFilter(tenant string, id int64) AuditFilter {
	return AuditFilter{Tenants: []string{tenant}, OperationIDs: []int64{id}}
}

// AuditCursor continues the audit browser after the last row of a page.
// The order is (At, Tenant, Seq), all descending: a total order, since
// (Tenant, Seq) is the primary key, and within a chain At rises with Seq.
type AuditCursor struct {
	At     time.Time
	Tenant string
	Seq    int64
}

// auditCursorPrefix versions the cursor's text.
const auditCursorPrefix = "a1."

// String is the cursor as an opaque token for a command line.
func (c AuditCursor) String() string {
	raw := strconv.FormatInt(c.At.UnixMicro(), 10) + "." + strconv.FormatInt(c.Seq, 10) + "." + c.Tenant
	return auditCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseAuditCursor reads a cursor that AuditCursor.String wrote.
func ParseAuditCursor(s string) (AuditCursor, error) {
	bad := fmt.Errorf("cursor %q is not one that audit list printed (copy its \"next:\" value whole)", s)
	enc, ok := strings.CutPrefix(s, auditCursorPrefix)
	if !ok {
		return AuditCursor{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return AuditCursor{}, bad
	}
	parts := strings.SplitN(string(raw), ".", 3)
	if len(parts) != 3 {
		return AuditCursor{}, bad
	}
	micros, err1 := strconv.ParseInt(parts[0], 10, 64)
	seq, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || seq < 1 {
		return AuditCursor{}, bad
	}
	return AuditCursor{At: time.UnixMicro(micros).UTC(), Seq: seq, Tenant: parts[2]}, nil
}

// AuditQuery asks for one page of the audit browser.
type AuditQuery struct {
	Filter AuditFilter
	// Limit defaults to 50 and is capped at 1000.
	Limit int
	// After continues from the previous page's Next.
	After *AuditCursor
}

// AuditPage is one page of the audit browser, newest first.
type AuditPage struct {
	Rows   []AuditRow
	DBTime time.Time
	// Next is nil on the last page.
	Next *AuditCursor
}

// AuditRow is one audit record in a list. Text columns that are NULL are
// empty; OperationID is 0 when the record is about no operation.
type AuditRow struct {
	Tenant string    `json:"tenant"`
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	// Role is the authenticated database role; DisplayName what the
	// person called themselves (unproven).
	Role        string `json:"role"`
	DisplayName string `json:"display_name,omitempty"`
	Action      string `json:"action"`
	Outcome     string `json:"outcome"`
	Tool        string `json:"tool,omitempty"`
	Key         string `json:"key,omitempty"`
	OperationID int64  `json:"operation_id,omitempty"`
	StateBefore string `json:"state_before,omitempty"`
	StateAfter  string `json:"state_after,omitempty"`
	// VersionBefore and VersionAfter are the record's versions, nil when
	// the action had none.
	VersionBefore *int64 `json:"version_before,omitempty"`
	VersionAfter  *int64 `json:"version_after,omitempty"`
	Reason        string `json:"reason,omitempty"`
	// HasEvidence: the decision recorded evidence (digest and summary in
	// the detail).
	HasEvidence bool `json:"has_evidence"`
	Forced      bool `json:"forced"`
	Override    bool `json:"override"`
	// HashBroken: the record's hash is not the one its contents give: it
	// was changed after it was written (or is of a hash version this
	// opsdesk does not know). opsdesk audit verify names the chain's
	// first break.
	HashBroken bool `json:"hash_broken"`
	// DBTime is the database clock when the row was read.
	DBTime time.Time `json:"db_time"`
}

// Cursor is the cursor that continues after r.
func (r AuditRow) Cursor() AuditCursor { return AuditCursor{At: r.At, Tenant: r.Tenant, Seq: r.Seq} }

// AuditChange is one field an action changed on its operation.
type AuditChange struct {
	Field  string `json:"field"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// Changes are the before/after pairs the record holds (state and
// version), "-" standing for none; fields that did not change are left
// out.
func (r AuditRow) Changes() []AuditChange {
	var out []AuditChange
	orDash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	version := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatInt(*v, 10)
	}
	if r.StateBefore != r.StateAfter {
		out = append(out, AuditChange{"state", orDash(r.StateBefore), orDash(r.StateAfter)})
	}
	if b, a := version(r.VersionBefore), version(r.VersionAfter); b != a {
		out = append(out, AuditChange{"version", b, a})
	}
	return out
}

// AuditDetail is everything one audit record holds, and what its chain
// says of it.
type AuditDetail struct {
	AuditRow
	EventID         string `json:"event_id"`
	EvidenceDigest  string `json:"evidence_digest,omitempty"`
	EvidenceSummary string `json:"evidence_summary,omitempty"`
	// Details is the record's details jsonb (the result reference, the
	// snooze time, the refusal), or nil.
	Details     json.RawMessage `json:"details,omitempty"`
	PrevHash    audit.HexBytes  `json:"prev_hash"`
	Hash        audit.HexBytes  `json:"hash"`
	HashVersion int16           `json:"hash_version"`
	Check       AuditCheck      `json:"check"`
}

// AuditCheck is what the detail verified of one record: its own hash and
// its link to the record before. The whole chain (gaps, a cut tail,
// checkpoints) is opsdesk audit verify's.
type AuditCheck struct {
	// HashMatches: the hash recomputes from the record's contents.
	HashMatches bool `json:"hash_matches"`
	// Linked: prev_hash is the previous record's hash (seq 1: none).
	Linked bool `json:"linked"`
	// HeadSeq is the chain's head (its last seq) as audit_heads holds it.
	HeadSeq int64 `json:"head_seq"`
	// Problem says what is wrong; empty when both hold.
	Problem string `json:"problem,omitempty"`
}

// ErrNoAuditRecord means no audit record the role may see has that tenant
// and seq.
var ErrNoAuditRecord = errors.New("no such audit record")

// AuditList returns one page of the audit trail, newest first.
func (s *Store) AuditList(ctx context.Context, q AuditQuery) (AuditPage, error) {
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
		return AuditPage{}, fmt.Errorf("list audit records: %w", err)
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
		return AuditPage{}, fmt.Errorf("list audit records: %w", err)
	}
	var r audit.Record
	var now time.Time
	var scanned []AuditRow
	_, err = pgx.ForEachRow(rows, append(r.Targets(), &now), func() error {
		scanned = append(scanned, auditRowOf(r, now))
		return nil
	})
	if err != nil {
		return AuditPage{}, fmt.Errorf("list audit records: %w", err)
	}
	page := AuditPage{Rows: make([]AuditRow, 0, min(len(scanned), limit))}
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
		return AuditPage{}, fmt.Errorf("read database time: %w", err)
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
func (b *builder) applyAudit(f AuditFilter) {
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
func auditRowOf(r audit.Record, now time.Time) AuditRow {
	row := AuditRow{
		Tenant: r.Tenant, Seq: r.Seq, At: r.At, Role: r.Role, DisplayName: deref0(r.DisplayName), Action: r.Action,
		Outcome: r.Outcome, Tool: deref0(r.Tool), Key: deref0(r.Key), StateBefore: deref0(r.StateBefore),
		StateAfter: deref0(r.StateAfter), VersionBefore: r.VersionBefore, VersionAfter: r.VersionAfter,
		Reason: deref0(r.Reason), HasEvidence: r.EvidenceDigest != nil || r.EvidenceSummary != nil,
		Forced: r.Forced, Override: r.Override, HashBroken: !r.HashMatches(), DBTime: now,
	}
	if r.OperationID != nil {
		row.OperationID = *r.OperationID
	}
	return row
}

// AuditRecord returns one audit record, checked against its own hash and
// the record before it, in one snapshot.
func (s *Store) AuditRecord(ctx context.Context, tenant string, seq int64) (d AuditDetail, err error) {
	err = s.snapshot(ctx, func(q querier) error {
		d, err = s.auditRecordIn(ctx, q, tenant, seq)
		return err
	})
	return d, err
}

func (s *Store) auditRecordIn(ctx context.Context, q querier, tenant string, seq int64) (AuditDetail, error) {
	var recs []audit.Record
	err := audit.Read(ctx, q, audit.ReadOpts{Tenant: &tenant, AfterSeq: max(seq-2, 0), UpToSeq: seq}, func(r audit.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return AuditDetail{}, fmt.Errorf("read audit record %s/%d: %w", audited.TenantName(tenant), seq, err)
	}
	if len(recs) == 0 || recs[len(recs)-1].Seq != seq {
		return AuditDetail{}, ErrNoAuditRecord
	}
	r := recs[len(recs)-1]
	d := AuditDetail{
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
		return AuditDetail{}, fmt.Errorf("read the audit chain's head: %w", err)
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
