package readmodel

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opsdesk/opsdesk/internal/auditreport"
)

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
	// Batches are bulk runs: the batch id (a UUID, lower-case canonical
	// form) a bulk reconciliation wrote into each of its decisions'
	// details.
	Batches []string
}

// AuditFilterHelp describes the audit filter language, for help screens
// and flags.
const AuditFilterHelp = `tenant:T (tenant:'' events outside any tenant)  tool:T  key:run-42*  id:48213 (operation)  role:R  batch:UUID
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
	err := eachTerm(s, "write field:value (fields: tenant, tool, key, id, role, action, outcome, since, until, batch), or age>10m / age<1h",
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
			case "batch":
				for _, v := range values {
					id, ok := canonicalUUID(v)
					if !ok {
						return fmt.Errorf("%q: batch needs a bulk run's id, a UUID such as 0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b (a bulk plan and its result print it)", t.text)
					}
					f.Batches = append(f.Batches, id)
				}
			default:
				return fmt.Errorf("%q: unknown field %q (fields: tenant, tool, key, id, role, action, outcome, since, until, age, batch)", t.text, t.field)
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

// canonicalUUID reads a UUID in its 8-4-4-4-12 hex form (either case, as
// PostgreSQL prints it and people paste it) and returns it lower-case, the
// form uuid's text and jsonb hold. Anything else is refused, so a filter
// value never reaches the database unchecked.
func canonicalUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	out := []byte(strings.ToLower(s))
	for i, c := range out {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return "", false
			}
		}
	}
	return string(out), true
}

func formatAuditTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

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
	// Machine: opsdesk reconciler decided it (details.reconciler).
	Machine bool `json:"machine"`
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

// AuditDetail is everything one audit record holds, and what its chain
// says of it.
type AuditDetail struct {
	AuditRow
	EventID         string `json:"event_id"`
	EvidenceDigest  string `json:"evidence_digest,omitempty"`
	EvidenceSummary string `json:"evidence_summary,omitempty"`
	// Details is the record's details jsonb (the result reference, the
	// snooze time, the refusal), or nil.
	Details     json.RawMessage      `json:"details,omitempty"`
	PrevHash    auditreport.HexBytes `json:"prev_hash"`
	Hash        auditreport.HexBytes `json:"hash"`
	HashVersion int16                `json:"hash_version"`
	Check       AuditCheck           `json:"check"`
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
	add("batch", f.Batches)
	return strings.Join(terms, " ")
}

// String is the cursor as an opaque token for a command line.
func (c AuditCursor) String() string {
	raw := strconv.FormatInt(c.At.UnixMicro(), 10) + "." + strconv.FormatInt(c.Seq, 10) + "." + c.Tenant
	return auditCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
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
