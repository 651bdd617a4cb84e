package demo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/ops/opsmcp"
)

// TestAgentRetriesOverMCP runs the simulated agent until every kind of
// answer has appeared, each the one its fault calls for, and its records
// are in the store beside the fleet's.
func TestAgentRetriesOverMCP(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), demo.Schema)
	require.NoError(t, err)
	a, err := demo.StartAgent(t.Context(), demo.AgentConfig{Pool: d.Service, Rate: 100, Seed: 7})
	require.NoError(t, err)
	t.Cleanup(a.Stop)

	want := []string{"created", "replayed", "answer lost", opsmcp.ClassConflict, opsmcp.ClassRejected, opsmcp.ClassKeyMissing}
	require.Eventually(t, func() bool {
		stats := a.Stats()
		for _, w := range want {
			if stats[w] == 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "answers so far: %v", a.Stats())
	a.Stop()
	require.NoError(t, a.Err())

	stats := a.Stats()
	var records, conflicts, tickets int64
	require.NoError(t, d.Admin.QueryRow(t.Context(), `
SELECT (SELECT count(*) FROM opsdesk.operations WHERE key LIKE 'agent-%'),
       (SELECT count(*) FROM opsdesk.conflicts),
       (SELECT count(*) FROM demo.tickets)`).Scan(&records, &conflicts, &tickets))
	// One record per keyed run; a lost answer's retry and a reworded
	// retry add none, and a keyless call writes nothing.
	require.Equal(t, stats["created"]+stats["answer lost"]+stats[opsmcp.ClassRejected]/2, records)
	require.Equal(t, stats[opsmcp.ClassConflict], conflicts)
	require.Equal(t, stats["created"]+stats["answer lost"], tickets, "one ticket per run, whatever was retried")
}
