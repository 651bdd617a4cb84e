package storeview

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/readmodel"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// auditFixture is one hand-written audit record; ago is how long before
// the fixtures' base time it was written. Three records share ago 3h, in
// three chains, so that the order's tie-break is exercised.
type auditFixture struct {
	tenant  string
	ago     time.Duration
	role    string
	action  string
	outcome string
	tool    string
	key     string
	opID    int64
}

// Each chain's records are in seq order (times rise with seq).
var auditFixtures = []auditFixture{
	{"acme", 5 * time.Hour, "alice", "decide:defer", "succeeded", "create-ticket", "run-42:create-ticket", 1},
	{"acme", 4 * time.Hour, "bob", "decide:completed", "denied", "create-ticket", "run-42:create-ticket", 1},
	{"acme", 3 * time.Hour, "alice", "decide:completed", "succeeded", "create-ticket", "run-42:create-ticket", 1},
	{"acme", 2 * time.Hour, "carol", "reveal:result", "succeeded", "charge-card", "ord-1", 2},
	{"acme", 30 * time.Minute, "alice", "conflicts:ack", "failed", "charge-card", "ord-1", 2},
	{"globex", 6 * time.Hour, "bob", "decide:not-executed", "succeeded", "send-email", "mail-1", 3},
	{"globex", 3 * time.Hour, "bob", "decide:defer", "succeeded", "send-email", "mail-1", 3},
	{"globex", 10 * time.Minute, "carol", "reveal:intent", "denied", "send-email", "promo-50%_off", 4},
	{"", 7 * time.Hour, "admin", "access:grant", "succeeded", "", "", 0},
	{"", 3 * time.Hour, "admin", "access:revoke", "succeeded", "", "", 0},
}

// Bulk runs the fixtures' decisions belong to, by fixture index: batchA
// spans two chains, batchB is one record of globex's.
const (
	batchA = "0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b"
	batchB = "11111111-2222-4333-8444-555555555555"
)

var auditFixtureBatches = map[int]string{1: batchA, 6: batchA, 5: batchB}

// auditDB is a fresh database holding the audit fixtures as valid chains
// (hashes computed as the database would), with their head rows. It
// returns the records and the base time they are relative to.
func auditDB(t *testing.T) (*dbtest.DB, []audit.Record, time.Time) {
	t.Helper()
	d := dbtest.New(t)
	base := time.Now().UTC().Truncate(time.Microsecond)
	seqs := map[string]int64{}
	heads := map[string][]byte{}
	var recs []audit.Record
	for i, f := range auditFixtures {
		seqs[f.tenant]++
		r := audit.Record{
			Tenant: f.tenant, Seq: seqs[f.tenant], EventID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1),
			At: base.Add(-f.ago), Role: f.role, Action: f.action, Outcome: f.outcome, PrevHash: heads[f.tenant],
			HashVersion: audit.HashVersion,
		}
		if f.tool != "" {
			r.Tool, r.Key, r.OperationID = &f.tool, &f.key, &f.opID
		}
		if b, ok := auditFixtureBatches[i]; ok {
			details := `{"expect_version": 1, "batch": "` + b + `"}`
			r.Details = &details
		}
		if f.tenant == "acme" && r.Seq == 3 {
			// The one decision with a state change, evidence and details.
			before, after, vb, va := "stuck", "completed", int64(1), int64(2)
			digest, summary, details, reason := "sha256:ab12", "found (ref T-1234)", `{"result_ref": "T-1234"}`, "provider says done"
			r.StateBefore, r.StateAfter, r.VersionBefore, r.VersionAfter = &before, &after, &vb, &va
			r.EvidenceDigest, r.EvidenceSummary, r.Details, r.Reason = &digest, &summary, &details, &reason
			r.Forced = true
		}
		r.Hash = audit.Hash(r)
		heads[f.tenant] = r.Hash
		recs = append(recs, r)
		insertAudit(t, d, r)
	}
	for tenant, hash := range heads {
		_, err := d.Admin.Exec(t.Context(), `INSERT INTO opsdesk.audit_heads (tenant, seq, hash) VALUES ($1, $2, $3)`,
			tenant, seqs[tenant], hash)
		require.NoError(t, err)
	}
	return d, recs, base
}

func insertAudit(t *testing.T, d *dbtest.DB, r audit.Record) {
	t.Helper()
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.audit (tenant, seq, event_id, at, role, display_name, action, outcome, tool, key, operation_id,
    state_before, state_after, version_before, version_after, reason, evidence_digest, evidence_summary, forced,
    override, details, prev_hash, hash, hash_version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21::jsonb, $22, $23, $24)`,
		r.Tenant, r.Seq, r.EventID, r.At, r.Role, r.DisplayName, r.Action, r.Outcome, r.Tool, r.Key, r.OperationID,
		r.StateBefore, r.StateAfter, r.VersionBefore, r.VersionAfter, r.Reason, r.EvidenceDigest, r.EvidenceSummary,
		r.Forced, r.Override, r.Details, r.PrevHash, r.Hash, r.HashVersion)
	require.NoError(t, err)
}

// name is how the tests name a record: tenant/seq, ” for no tenant.
func name(tenant string, seq int64) string {
	return audited.TenantName(tenant) + "/" + strconv.FormatInt(seq, 10)
}

// newestFirst is the browser's order computed from the fixtures.
func newestFirst(recs []audit.Record) []string {
	sorted := slices.Clone(recs)
	slices.SortFunc(sorted, func(a, b audit.Record) int {
		return cmp.Or(b.At.Compare(a.At), strings.Compare(b.Tenant, a.Tenant), cmp.Compare(b.Seq, a.Seq))
	})
	out := make([]string, len(sorted))
	for i, r := range sorted {
		out[i] = name(r.Tenant, r.Seq)
	}
	return out
}

// browse pages through the filter's records limit at a time.
func browse(t *testing.T, s *Store, filter string, limit int) []string {
	t.Helper()
	f, err := readmodel.ParseAuditFilter(filter)
	require.NoError(t, err)
	var got []string
	var after *readmodel.AuditCursor
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100, "paging does not end")
		page, err := s.AuditList(t.Context(), readmodel.AuditQuery{Filter: f, Limit: limit, After: after})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Rows), limit)
		require.False(t, page.DBTime.IsZero())
		for _, r := range page.Rows {
			got = append(got, name(r.Tenant, r.Seq))
		}
		if page.Next == nil {
			return got
		}
		require.Len(t, page.Rows, limit, "a page before the last is full")
		// The cursor survives the command line.
		c, err := readmodel.ParseAuditCursor(page.Next.String())
		require.NoError(t, err)
		require.True(t, c.At.Equal(page.Next.At))
		require.Equal(t, page.Next.Tenant, c.Tenant)
		require.Equal(t, page.Next.Seq, c.Seq)
		after = &c
	}
}

func TestAuditListFilters(t *testing.T) {
	t.Parallel()
	d, recs, base := auditDB(t)
	s := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})
	at := func(ago time.Duration) string { return base.Add(-ago).Format(time.RFC3339Nano) }
	cases := map[string][]string{
		"":                      newestFirst(recs),
		"tenant:acme":           {"acme/5", "acme/4", "acme/3", "acme/2", "acme/1"},
		"tenant:''":             {"''/2", "''/1"},
		"tenant:globex,''":      {"globex/3", "globex/2", "''/2", "globex/1", "''/1"},
		"tool:send-email":       {"globex/3", "globex/2", "globex/1"},
		"key:run-42*":           {"acme/3", "acme/2", "acme/1"},
		"key:promo-50%_off":     {"globex/3"},
		"key:promo-50%_*":       {"globex/3"},
		"key:ord-1,mail-*":      {"acme/5", "acme/4", "globex/2", "globex/1"},
		"id:2":                  {"acme/5", "acme/4"},
		"id:2,3":                {"acme/5", "acme/4", "globex/2", "globex/1"},
		"role:alice":            {"acme/5", "acme/3", "acme/1"},
		"role:alice,admin":      {"acme/5", "acme/3", "''/2", "acme/1", "''/1"},
		"action:decide:*":       {"globex/2", "acme/3", "acme/2", "acme/1", "globex/1"},
		"action:conflicts:ack":  {"acme/5"},
		"outcome:denied":        {"globex/3", "acme/2"},
		"outcome:denied,failed": {"globex/3", "acme/5", "acme/2"},
		"age<1h":                {"globex/3", "acme/5"},
		"age>5h30m":             {"globex/1", "''/1"},
		"age>1h age<4h30m":      {"acme/4", "globex/2", "acme/3", "''/2", "acme/2"},
		"since:" + at(3*time.Hour) + " until:" + at(2*time.Hour): {"globex/2", "acme/3", "''/2"},
		"since:" + at(2*time.Hour):                               {"globex/3", "acme/5", "acme/4"},
		"tenant:acme role:bob":                                   {"acme/2"},
		"tenant:acme tool:charge-card outcome:succeeded":         {"acme/4"},
		"tenant:nobody":                                          {},
		"batch:" + batchA:                                        {"globex/2", "acme/2"},
		"batch:" + strings.ToUpper(batchA):                       {"globex/2", "acme/2"},
		"batch:" + batchA + "," + batchB:                         {"globex/2", "acme/2", "globex/1"},
		"tenant:acme batch:" + batchA:                            {"acme/2"},
		"batch:" + batchB + " action:decide:defer":               {},
		"batch:00000000-0000-0000-0000-000000000000":             {},
	}
	for filter, want := range cases {
		t.Run(filter, func(t *testing.T) {
			got := browse(t, s, filter, 50)
			if len(want) == 0 {
				require.Empty(t, got)
				return
			}
			require.Equal(t, want, got)
		})
	}
	require.Len(t, cases[""], 10)
}

func TestAuditListPaging(t *testing.T) {
	t.Parallel()
	d, recs, _ := auditDB(t)
	all := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})
	one := New(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{})
	var acme, decisions []audit.Record
	for _, r := range recs {
		if r.Tenant == "acme" {
			acme = append(acme, r)
		}
		if strings.HasPrefix(r.Action, "decide:") {
			decisions = append(decisions, r)
		}
	}
	for _, limit := range []int{1, 2, 3, 50} {
		t.Run(fmt.Sprintf("Limit%d", limit), func(t *testing.T) {
			require.Equal(t, newestFirst(recs), browse(t, all, "", limit))
			require.Equal(t, newestFirst(decisions), browse(t, all, "action:decide:*", limit))
			require.Equal(t, newestFirst(acme), browse(t, one, "", limit))
		})
	}
}

func TestAuditListOneTenantViewer(t *testing.T) {
	t.Parallel()
	d, _, _ := auditDB(t)
	s := New(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{})
	require.Equal(t, []string{"acme/5", "acme/4", "acme/3", "acme/2", "acme/1"}, browse(t, s, "", 50))
	// Asking for another tenant's records, or those of no tenant, by name
	// or by what they are about, finds nothing.
	// A bulk run that spans tenants shows a one-tenant viewer its own
	// tenant's decisions only, and another tenant's run not at all.
	require.Equal(t, []string{"acme/2"}, browse(t, s, "batch:"+batchA, 50))
	for _, filter := range []string{"tenant:globex", "tenant:''", "id:3", "role:admin", "tool:send-email", "key:mail-*", "batch:" + batchB} {
		require.Empty(t, browse(t, s, filter, 50), filter)
	}
	_, err := s.AuditRecord(t.Context(), "globex", 1)
	require.ErrorIs(t, err, readmodel.ErrNoAuditRecord)
	_, err = s.AuditRecord(t.Context(), "", 1)
	require.ErrorIs(t, err, readmodel.ErrNoAuditRecord)
	got, err := s.AuditRecord(t.Context(), "acme", 2)
	require.NoError(t, err)
	require.Equal(t, "bob", got.Role)
}

func TestAuditRecord(t *testing.T) {
	t.Parallel()
	d, recs, _ := auditDB(t)
	s := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})
	got, err := s.AuditRecord(t.Context(), "acme", 3)
	require.NoError(t, err)
	want := recs[2]
	require.Equal(t, "acme", got.Tenant)
	require.EqualValues(t, 3, got.Seq)
	require.True(t, want.At.Equal(got.At))
	require.Equal(t, "decide:completed", got.Action)
	require.Equal(t, "succeeded", got.Outcome)
	require.Equal(t, "run-42:create-ticket", got.Key)
	require.EqualValues(t, 1, got.OperationID)
	require.Equal(t, "provider says done", got.Reason)
	require.True(t, got.Forced)
	require.False(t, got.Override)
	require.True(t, got.HasEvidence)
	require.Equal(t, "sha256:ab12", got.EvidenceDigest)
	require.Equal(t, "found (ref T-1234)", got.EvidenceSummary)
	require.JSONEq(t, `{"result_ref":"T-1234"}`, string(got.Details))
	require.Equal(t, want.EventID, got.EventID)
	require.Equal(t, auditreport.HexBytes(want.Hash), got.Hash)
	require.Equal(t, auditreport.HexBytes(recs[1].Hash), got.PrevHash)
	require.Equal(t, []readmodel.AuditChange{{Field: "state", Before: "stuck", After: "completed"}, {Field: "version", Before: "1", After: "2"}}, got.Changes())
	require.Equal(t, readmodel.AuditCheck{HashMatches: true, Linked: true, HeadSeq: 5}, got.Check)

	first, err := s.AuditRecord(t.Context(), "", 1)
	require.NoError(t, err)
	require.Equal(t, readmodel.AuditCheck{HashMatches: true, Linked: true, HeadSeq: 2}, first.Check)
	require.Empty(t, first.Changes())
	require.Nil(t, first.Details)

	_, err = s.AuditRecord(t.Context(), "acme", 6)
	require.ErrorIs(t, err, readmodel.ErrNoAuditRecord)

	t.Run("BrokenRecord", func(t *testing.T) {
		// A record appended by hand with a hash of other contents, after
		// a gap: both are said.
		r := recs[4]
		r.Seq, r.EventID, r.PrevHash = 7, "00000000-0000-4000-8000-000000000099", []byte{1}
		insertAudit(t, d, r)
		got, err := s.AuditRecord(t.Context(), "acme", 7)
		require.NoError(t, err)
		require.False(t, got.Check.HashMatches)
		require.False(t, got.Check.Linked)
		require.Equal(t, "its hash does not match its contents; seq 6, the record before it, is missing", got.Check.Problem)
	})
}

func TestPrefixUpper(t *testing.T) {
	t.Parallel()
	for prefix, want := range map[string]string{
		"run-42":          "run-43",
		"a":               "b",
		"é":               "ê",
		"x\U0010FFFF":     "y",
		"\uD7FF":          "\uE000",
		"run-4\U0010FFFF": "run-5",
	} {
		got, ok := prefixUpper(prefix)
		require.True(t, ok, prefix)
		require.Equal(t, want, got, prefix)
		require.Less(t, prefix, got)
		require.Less(t, prefix+"\U0010FFFF\U0010FFFF", got, "above every string that starts with the prefix")
	}
	_, ok := prefixUpper("\U0010FFFF")
	require.False(t, ok)
}
