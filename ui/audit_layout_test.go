package ui

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// TestAuditLayoutRanks: room short, a column that says the same on every
// row goes first, then the role and then the tool; the reason and the key stay
// while their minimums fit, and the tool shows at 120 columns.
func TestAuditLayoutRanks(t *testing.T) {
	t.Parallel()
	var rows []readmodel.AuditRow
	for i := range 6 {
		rows = append(rows, readmodel.AuditRow{Tenant: "globex", Seq: int64(i + 1), Role: "alice", Action: "decide:completed",
			Tool: []string{"charge-card", "create-ticket"}[i%2], Key: fmt.Sprintf("order-%05d:charge", i), OperationID: int64(48000 + i),
			Reason: fmt.Sprintf("the provider has charge ch_%d", i)})
	}
	shown := func(w int) map[int]bool {
		lay := layoutAudit(rows, w)
		require.Len(t, lay.widths, len(auditColumns))
		out := map[int]bool{}
		total := markWidth - colGap
		for c, cw := range lay.widths {
			if cw > 0 {
				out[c] = true
				total += cw + colGap
			}
		}
		require.LessOrEqual(t, total, w, "at %d", w)
		return out
	}
	for _, c := range []int{auditColRole, auditColTool, auditColOp, auditColReason} {
		require.True(t, shown(120)[c], "column %s at 120", auditColumns[c].title)
	}
	wide := shown(100)
	require.False(t, wide[auditColRole], "one role on every row goes first")
	require.False(t, wide[auditColTool], "then the tool, for a comfortable key and reason")
	for _, c := range []int{auditColOp, auditColReason} {
		require.True(t, wide[c], "column %s at 100", auditColumns[c].title)
	}
	at80 := shown(80)
	require.True(t, at80[auditColOp], "the key at 80")
	require.True(t, at80[auditColReason], "the reason at 80")
	require.False(t, at80[auditColTool], "the tool goes before the key and the reason")

	// With roles that differ, the role goes before the tool.
	for i := range rows {
		rows[i].Tool = "charge-card"
	}
	rows[1].Role = "bob"
	wide = shown(110)
	require.False(t, wide[auditColTool], "one tool on every row goes first")
	require.True(t, wide[auditColRole], "roles that differ stay")
	require.True(t, shown(200)[auditColRole], "every column when there is room")
}

// TestAuditLayoutBulkRun: a bulk run's page (one role, one tool, one
// reason, keys that differ in their digits) gives up only the uniform
// columns it must: at 120 columns the role goes and the tool and the
// reason stay; at 80 the keys keep the digits that tell them apart.
func TestAuditLayoutBulkRun(t *testing.T) {
	t.Parallel()
	var rows []readmodel.AuditRow
	for i := range 12 {
		rows = append(rows, readmodel.AuditRow{Tenant: "initech", Seq: int64(40 + i), Role: "opsdesk_demo_operator",
			Action: "decide:not-executed", Outcome: "succeeded", Tool: "charge-card",
			Key: fmt.Sprintf("order-%05d:charge", 500+i*37), OperationID: int64(1000 + i*41), Reason: "provider outage 03:10"})
	}
	lay := layoutAudit(rows, 120)
	require.Zero(t, lay.widths[auditColRole], "the one role goes first")
	require.NotZero(t, lay.widths[auditColTool], "the tool has room at 120")
	require.NotZero(t, lay.widths[auditColReason], "the reason has room at 120")

	lay = layoutAudit(rows, 80)
	require.NotZero(t, lay.widths[auditColOp])
	for _, r := range rows {
		cell := fitOperation(r, lay.widths[auditColOp], lay.keys)
		require.LessOrEqual(t, width(cell), lay.widths[auditColOp])
		digits := fmt.Sprintf("%03d:", (500+int(r.Seq-40)*37)%1000)
		require.Contains(t, cell, digits, "the key's distinguishing digits at 80: %q", cell)
	}
}
