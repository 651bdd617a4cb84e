package opstest

import (
	"context"

	"github.com/opsdesk/opsdesk/internal/pgcluster"
)

// WithDefaultStart makes the default cluster a new one that start starts,
// until restore is called: to watch New when no server can be started.
// Tests that call it must not run in parallel.
func WithDefaultStart(start func(context.Context) (*pgcluster.Cluster, error)) (restore func()) {
	was := defaultCluster
	defaultCluster = &cluster{start: start}
	return func() { defaultCluster = was }
}
