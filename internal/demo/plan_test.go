package demo_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/demo"
)

func TestPlanIsSeeded(t *testing.T) {
	t.Parallel()
	deck, kinds := demo.Scenarios()
	tenants := []string{"acme", "globex", "initech"}

	a := demo.Jobs(42, tenants, 3*deck)
	require.Equal(t, a, demo.Jobs(42, tenants, 3*deck), "a seed replays the same jobs")
	require.NotEqual(t, a, demo.Jobs(43, tenants, 3*deck), "another seed plays others")

	// Every deck holds every scenario, so each keeps appearing whatever the
	// seed.
	for d := range 3 {
		seen := map[string]bool{}
		for _, line := range a[d*deck : (d+1)*deck] {
			seen[strings.Fields(line)[0]] = true
		}
		require.Len(t, seen, kinds, "deck %d", d)
	}
	for _, tenant := range tenants {
		require.Contains(t, strings.Join(a, "\n"), " "+tenant+"/", "jobs for every tenant")
	}
}
