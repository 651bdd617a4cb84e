package ui

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// fakeTrail is a small hand-written audit trail over three tenants and
// the global chain: decisions with evidence, a refusal, a failure, a
// forced override, reveals, an acknowledgement and retention purges. The
// real queries are tested against PostgreSQL in internal/storeview.
func fakeTrail() []readmodel.AuditDetail {
	at := func(d time.Duration) time.Time { return dbNow.Add(d) }
	v := func(n int64) *int64 { return &n }
	type rec = readmodel.AuditDetail
	row := func(tenant string, seq int64, ago time.Duration, role, action, outcome string) rec {
		return rec{AuditRow: readmodel.AuditRow{Tenant: tenant, Seq: seq, At: at(-ago), Role: role, Action: action, Outcome: outcome}}
	}
	op := func(r rec, id int64, tool, key, before, after string, vb, va int64) rec {
		r.OperationID, r.Tool, r.Key = id, tool, key
		r.StateBefore, r.StateAfter, r.VersionBefore, r.VersionAfter = before, after, v(vb), v(va)
		return r
	}
	why := func(r rec, reason, details string) rec {
		r.Reason, r.Details = reason, json.RawMessage(details)
		return r
	}
	evidence := func(r rec, summary string) rec {
		r.EvidenceSummary, r.EvidenceDigest, r.HasEvidence = summary, sha(summary), true
		return r
	}
	named := func(r rec, name string) rec { r.DisplayName = name; return r }

	trail := []rec{
		evidence(why(named(op(row("acme", 1, 4*time.Hour+10*time.Minute, "alice", "decide:completed", "succeeded"),
			48103, "charge-card", "req-7039-charge-card", "stuck", "completed", 2, 3), "Alice Ng"),
			"the provider captured the charge",
			`{"expect_version":2,"lookup":"found","result_ref":"ch_3PqA91","retention":"7 days","result_sha256":"9f2c41"}`),
			"provider dashboard: charge ch_3PqA91 captured 02:58 UTC"),
		evidence(why(op(row("acme", 2, 2*time.Hour, "bob", "decide:not-executed", "succeeded"),
			48150, "deploy-service", "deploy/web/42", "stuck", "released", 3, 4),
			"no rollout in the deploy log", `{"expect_version":3,"lookup":"not_found","retention":"7 days"}`),
			"deploy log for web/42: no rollout started"),
		why(op(row("acme", 3, 52*time.Minute, "carol", "decide:completed", "denied"),
			48213, "create-ticket", "run-42:create-ticket", "stuck", "stuck", 2, 2),
			"ticket exists", `{"expect_version":2,"lookup":"found","result_ref":"T-1234","refusal":"not_permitted","message":"carol may not decide: it is not granted opsdesk_operator"}`),
		why(op(row("acme", 4, 41*time.Minute, "alice", "decide:defer", "succeeded"),
			48213, "create-ticket", "run-42:create-ticket", "stuck", "stuck", 2, 3),
			"the tracker is down; ask again after its maintenance", `{"expect_version":2,"snooze_until":"2026-11-25T04:00:00Z"}`),
		why(op(row("acme", 5, 30*time.Minute, "alice", "decide:failed", "failed"),
			48213, "create-ticket", "run-42:create-ticket", "stuck", "stuck", 3, 3),
			"provider rejected the ticket", `{"expect_version":2,"refusal":"changed","message":"changed since you looked: now version 3 (stuck), you saw version 2"}`),
		why(named(op(row("acme", 6, 12*time.Minute, "bob", "reveal:intent", "succeeded"),
			48231, "charge-card", "ord-7731-2026-11-25T03:11:42Z-retry-19", "pending", "pending", 2, 2), "Bob Stone"),
			"customer disputes the amount (case 5521)", `{"field":"intent"}`),
		evidence(why(named(op(row("acme", 7, 3*time.Minute, "alice", "decide:completed", "succeeded"),
			48106, "deploy-service", "req-7078-deploy-service", "pending", "completed", 2, 3), "Alice Ng"),
			"rollout finished; the worker died before it reported", `{"expect_version":2,"lookup":"not_found","result_ref":"rollout-88","retention":"7 days"}`),
			"rollout-88 finished 03:05 UTC per the deploy dashboard"),

		why(op(row("globex", 1, 2*time.Hour+30*time.Minute, "dave", "conflicts:ack", "succeeded"),
			48190, "send-email", "welcome/user-8812", "completed", "completed", 2, 3),
			"same email, resent by the client", `{"conflicts":[901]}`),
		evidence(why(op(row("globex", 2, time.Hour, "alice", "decide:completed", "succeeded"),
			48101, "create-ticket", "req-7013-create-ticket", "stuck", "completed", 2, 3),
			"ticket T-2210 is in the tracker", `{"expect_version":2,"lookup":"found","result_ref":"T-2210","retention":"7 days"}`),
			"tracker search: T-2210 created 02:11 UTC"),
		why(op(row("globex", 3, 25*time.Minute, "support-ro", "reveal:result", "denied"),
			48190, "send-email", "welcome/user-8812", "completed", "completed", 3, 3),
			"checking what the client got", `{"field":"result","refusal":"not_permitted","message":"support-ro may not reveal: it is not granted opsdesk_operator"}`),
		why(op(row("globex", 4, 9*time.Minute, "alice", "decide:completed", "denied"),
			48207, "deploy-service", "deploy/payments-api/2026-11-25T02:58:00Z/canary-7", "stuck", "stuck", 3, 3),
			"canary is serving", `{"expect_version":3,"lookup":"found","result_ref":"canary-7","refusal":"lease_live","message":"the lease is live (it expires in 00:00:25, held by worker-7): deciding needs force"}`),

		evidence(why(op(row("initech", 1, 5*time.Hour-time.Minute, "erin", "decide:failed", "succeeded"),
			48188, "charge-card", "inv-2026-0042", "stuck", "rejected", 2, 3),
			"card declined at the provider", `{"expect_version":2,"lookup":"found","retention":"7 days"}`),
			"provider: card_declined (insufficient_funds)"),
		why(op(row("initech", 2, 90*time.Minute, "erin", "reveal:result", "succeeded"),
			48188, "charge-card", "inv-2026-0042", "rejected", "rejected", 3, 3),
			"finance asks for the decline code", `{"field":"result"}`),

		func() rec {
			r := why(row("", 1, 26*time.Hour, "ops-admin", "retention:purge", "succeeded"),
				"weekly retention", `{"run":5,"tool":"create-ticket","purged":1204,"batches":2,"tombstone_for":"7 days"}`)
			r.Tool = "create-ticket"
			return r
		}(),
		why(row("", 2, 2*time.Hour+15*time.Minute, "bob", "decide:completed", "failed"),
			"ticket exists", `{"refusal":"not_found","message":"no operation 40001 (or not visible to bob)"}`),
		func() rec {
			r := named(why(row("", 3, time.Minute, "ops-admin", "retention:purge", "succeeded"),
				"end of quarter", `{"run":7,"tool":"charge-card","purged":3,"batches":1,"tombstone_for":"7 days"}`), "Ops Admin")
			r.Tool = "charge-card"
			return r
		}(),
	}
	heads := map[string]int64{}
	for _, r := range trail {
		heads[r.Tenant] = max(heads[r.Tenant], r.Seq)
	}
	prev := map[string][]byte{}
	for i := range trail {
		r := &trail[i]
		r.DBTime = dbNow
		r.EventID = fmt.Sprintf("01JDK%04dQ7M%s", r.Seq, strings.ToUpper(chainName(r.Tenant)))
		sum := sha256.Sum256([]byte(r.EventID))
		r.Hash, r.PrevHash, r.HashVersion = sum[:], prev[r.Tenant], 1
		prev[r.Tenant] = r.Hash
		r.Check = readmodel.AuditCheck{HashMatches: true, Linked: true, HeadSeq: heads[r.Tenant]}
		if r.Tenant == "initech" && r.Seq == 2 {
			// A record whose link does not hold, for the check's ✗.
			r.Check.Linked = false
			r.Check.Problem = "its prev_hash is not the hash of seq 1"
		}
	}
	// One forced decision over the lookup, for the flags.
	trail[6].Forced, trail[6].Override = true, true
	return trail
}

func (s *fakeSource) AuditList(_ context.Context, q readmodel.AuditQuery) (readmodel.AuditPage, error) {
	if err := s.enter("audit"); err != nil {
		return readmodel.AuditPage{}, fmt.Errorf("list audit records: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := q.Filter
	like := func(patterns []string, v string) bool {
		return len(patterns) == 0 || slices.ContainsFunc(patterns, func(p string) bool {
			return regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(p), `\*`, ".*") + "$").MatchString(v)
		})
	}
	in := func(values []string, v string) bool { return len(values) == 0 || slices.Contains(values, v) }
	var rows []readmodel.AuditRow
	for _, r := range s.trail {
		if !in(f.Tenants, r.Tenant) || !in(f.Tools, r.Tool) || !in(f.Roles, r.Role) || !in(f.Outcomes, r.Outcome) ||
			!like(f.Actions, r.Action) || !like(f.Keys, r.Key) ||
			(len(f.OperationIDs) > 0 && !slices.Contains(f.OperationIDs, r.OperationID)) {
			continue
		}
		rows = append(rows, r.AuditRow)
	}
	order := func(a, b readmodel.AuditRow) int {
		return cmp.Or(b.At.Compare(a.At), cmp.Compare(b.Tenant, a.Tenant), cmp.Compare(b.Seq, a.Seq))
	}
	slices.SortFunc(rows, order)
	if c := q.After; c != nil {
		after := readmodel.AuditRow{At: c.At, Tenant: c.Tenant, Seq: c.Seq}
		rows = slices.DeleteFunc(rows, func(r readmodel.AuditRow) bool { return order(after, r) >= 0 })
	}
	page := readmodel.AuditPage{DBTime: dbNow}
	limit := cmp.Or(q.Limit, 50)
	if len(rows) > limit {
		next := rows[limit-1].Cursor()
		page.Next = &next
		rows = rows[:limit]
	}
	page.Rows = rows
	return page, nil
}

func (s *fakeSource) AuditRecord(_ context.Context, tenant string, seq int64) (readmodel.AuditDetail, error) {
	if err := s.enter("audit-record"); err != nil {
		return readmodel.AuditDetail{}, fmt.Errorf("read audit record: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.trail {
		if r.Tenant == tenant && r.Seq == seq {
			return r, nil
		}
	}
	return readmodel.AuditDetail{}, readmodel.ErrNoAuditRecord
}

func TestAuditViews(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(h *harness)
	}{
		{"audit", func(h *harness) { h.keys(":audit<enter>") }},
		{"audit-denied", func(h *harness) { h.keys(":audit<enter>/outcome:denied<enter>") }},
		{"audit-filter-error", func(h *harness) { h.keys(":audit tenant:acme<enter>/outcome:refused<enter>") }},
		{"audit-record-decision", func(h *harness) { h.keys(":audit tenant:acme action:decide:completed<enter><enter>") }},
		{"audit-record-denied", func(h *harness) { h.keys(":audit outcome:denied tenant:acme<enter><enter>") }},
		{"audit-history", func(h *harness) { h.keys("<enter><enter>h") }}, // the stuck tile, its first row
		{"audit-help", func(h *harness) { h.keys(":audit<enter>?") }},
		// A bulk run's page: one role, one tool, one reason; keys that
		// differ in their digits.
		{"audit-bulk-run", func(h *harness) {
			h.src.mu.Lock()
			h.src.trail = bulkRunTrail()
			h.src.mu.Unlock()
			h.keys(":audit<enter>")
		}},
	}
	for _, c := range cases {
		goldens(t, c.name, func(t *testing.T, w, h int) string {
			hs := newHarness(t, newFakeSource(), w, h)
			c.setup(hs)
			return hs.view()
		})
	}
}

// TestAuditPaging: n and p walk the trail by cursor; p returns to the
// same rows, and the last page offers no n.
func TestAuditPaging(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 80, 24).keys(":audit<enter>")
	a := h.m.audit()
	first := slices.Clone(a.page.Rows)
	require.NotNil(t, a.page.Next, "the fake's trail is longer than one page at 80x24")
	require.NotContains(t, h.view(), "prev page")
	var seen []string
	for range 10 {
		for _, r := range a.page.Rows {
			seen = append(seen, auditRef{r.Tenant, r.Seq}.String())
		}
		if a.page.Next == nil {
			break
		}
		h.keys("n")
	}
	require.Len(t, seen, len(src.trail), "every record once")
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(seen))), len(src.trail))
	require.NotContains(t, h.view(), "next page")
	calls := src.called("audit")
	h.keys("n")
	require.Equal(t, calls, src.called("audit"), "n acted on the last page")
	for len(a.pages) > 1 {
		h.keys("p")
	}
	require.Equal(t, first, a.page.Rows)
	require.NotContains(t, h.view(), "prev page")
}

// TestAuditFilterBar: a bad filter is an inline error and keeps the
// filter; esc closes the bar, esc again clears the filter, and esc then
// goes back.
func TestAuditFilterBar(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":audit outcome:denied<enter>")
	a := h.m.audit()
	rows := slices.Clone(a.page.Rows)
	require.Len(t, rows, 3)
	calls := src.called("audit")
	h.keys("/age>soon<enter>")
	v := h.view()
	require.Contains(t, v, "age needs a positive duration")
	require.Contains(t, v, "the trail keeps filter outcome:denied")
	require.Contains(t, v, "action:decide:*  outcome:succeeded|denied|failed", "the language under the bar")
	require.Equal(t, "outcome:denied", a.filterText)
	require.Equal(t, rows, a.page.Rows)
	require.Equal(t, calls, src.called("audit"))
	h.keys("q") // typed, not quitting
	require.False(t, h.quit)
	h.keys("<esc>")
	require.False(t, a.editing)
	require.Equal(t, "outcome:denied", a.filterText)
	h.keys("/tenant:globex<enter>")
	require.Equal(t, "tenant:globex outcome:denied", a.filterText)
	for _, r := range a.page.Rows {
		require.Equal(t, "globex", r.Tenant)
		require.Equal(t, "denied", r.Outcome)
	}
	h.keys("x")
	require.Equal(t, "", a.filterText)
	require.Len(t, a.page.Rows, len(src.trail))
	require.Same(t, screen(h.m.audit()), h.m.active())
	h.keys("<esc>")
	require.Same(t, screen(h.m.overview()), h.m.active())
}

// TestAuditHistoryKey: h on an operation's detail opens its history; esc
// goes back to the detail; from a record, o opens the operation.
func TestAuditHistoryKey(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":key acme/create-ticket/run-42:create-ticket<enter>")
	require.Contains(t, h.view(), "h audit history")
	h.keys("h")
	a := h.m.audit()
	require.Same(t, screen(a), h.m.active())
	require.Equal(t, readmodel.OperationAuditFilter("acme", 48213), a.filter)
	require.Len(t, a.page.Rows, 3)
	for _, r := range a.page.Rows {
		require.Equal(t, int64(48213), r.OperationID)
	}
	require.Contains(t, h.view(), "Audit history  operation 48213 · tenant acme")

	// enter opens the newest record; o there opens the operation again,
	// and esc walks back.
	h.keys("<enter>")
	require.Same(t, screen(h.m.auditRec()), h.m.active())
	require.Contains(t, h.view(), "o/enter open operation 48213")
	h.keys("o")
	require.Same(t, screen(h.m.detail()), h.m.active())
	require.Equal(t, int64(48213), h.m.detail().d.ID)

	h = newHarness(t, src, 120, 40).keys(":key acme/create-ticket/run-42:create-ticket<enter>h<esc>")
	require.Same(t, screen(h.m.detail()), h.m.active(), "esc on the history goes back to the detail")

	// Before the record arrives there is nothing to show the history of,
	// and elsewhere h is nothing (not even a freeze of refresh).
	h = newHarness(t, src, 120, 40).keys(":ops<enter>h")
	require.Same(t, screen(h.m.list()), h.m.active())
	require.False(t, h.m.refresh.frozen)
}

// TestAuditRecordCheck: a record whose link does not hold says so, and a
// record that is not there is said to be missing, not an error.
func TestAuditRecordCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 120, 40).keys(":audit tenant:initech<enter><enter>")
	v := h.view()
	require.Contains(t, v, "✗ its prev_hash is not the hash of seq 1; chain head #2")
	require.Contains(t, v, "opsdesk audit verify checks the whole chain")

	h.keys("<esc>")
	h.run(h.m.navigate(auditRecordNav{ref: auditRef{"acme", 99}}))
	require.Contains(t, h.view(), "There is no audit record acme#99 that your role may see.")
	require.Nil(t, h.m.lastErr)
}

func TestParseAuditCommand(t *testing.T) {
	t.Parallel()
	msg, err := parseCommand(":audit outcome:denied tenant:''")
	require.NoError(t, err)
	nav := msg.(auditNav)
	require.Equal(t, screenAudit, nav.target())
	require.Equal(t, []string{"denied"}, nav.filter.Outcomes)
	require.Equal(t, []string{""}, nav.filter.Tenants)
	_, err = parseCommand("audit outcome:maybe")
	require.ErrorContains(t, err, "unknown outcome")
}

// TestAuditNeverPanics walks the audit screens at odd sizes.
func TestAuditNeverPanics(t *testing.T) {
	t.Parallel()
	for _, sz := range []struct{ w, h int }{{0, 0}, {1, 1}, {60, 20}, {61, 21}, {200, 60}, {300, 20}} {
		h := newHarness(t, newFakeSource(), sz.w, sz.h)
		for _, k := range []string{":audit<enter>", "<down><enter>", "o", "h", "<esc>", "<esc>", "<esc>", "/x<enter>", "<esc><esc>", "n", "p", "G<enter>"} {
			h.keys(k)
			v := h.view()
			if sz.w >= minWidth && sz.h >= minHeight {
				checkFrame(t, v, sz.w, sz.h)
			}
		}
	}
}

// bulkRunTrail is one bulk run's decisions, as :audit shows them after it.
func bulkRunTrail() []readmodel.AuditDetail {
	var out []readmodel.AuditDetail
	for i := range 24 {
		before, after := int64(1), int64(2)
		out = append(out, readmodel.AuditDetail{AuditRow: readmodel.AuditRow{
			Tenant: "initech", Seq: int64(40 + i), At: dbNow.Add(-time.Minute + time.Duration(i)*time.Millisecond),
			Role: "opsdesk_demo_operator", Action: "decide:not-executed", Outcome: "succeeded", Tool: "charge-card",
			Key: fmt.Sprintf("order-%05d:charge", 500+i*37), OperationID: int64(1000 + i*41),
			StateBefore: "stuck", StateAfter: "released", VersionBefore: &before, VersionAfter: &after,
			Reason: "provider outage 03:10", HasEvidence: true, DBTime: dbNow,
		}})
	}
	return out
}
