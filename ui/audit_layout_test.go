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
