package db_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
)

// TestDatabasesOfOneClusterMigrateAtOnce: the migration lock is a
// database's, but roles and their memberships are the cluster's. Several
// empty databases of a fresh cluster (no opsdesk role yet) migrated at
// once all reach the latest version, and no database's migration leaves
// opsdesk_owner a member of pg_signal_backend, not even for a moment seen
// from another database (00016 granted it until 00023 revoked it).
func TestDatabasesOfOneClusterMigrateAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	admin, err := pgx.Connect(ctx, cluster.DSN("postgres"))
	require.NoError(t, err)
	defer admin.Close(context.Background())

	const n = 4
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		name := fmt.Sprintf("store_%d", i)
		_, err := admin.Exec(ctx, "CREATE DATABASE "+name)
		require.NoError(t, err)
		pools[i], err = pgxpool.New(ctx, cluster.DSN(name))
		require.NoError(t, err)
		defer pools[i].Close()
	}
	// A watcher sees the cluster's memberships while they migrate.
	signal := make(chan bool, 1)
	stop := make(chan struct{})
	go func() {
		seen := false
		for {
			select {
			case <-stop:
				signal <- seen
				return
			default:
			}
			var member bool
			if admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member
JOIN pg_roles g ON g.oid = m.roleid WHERE r.rolname = 'opsdesk_owner' AND g.rolname = 'pg_signal_backend')`).Scan(&member) == nil && member {
				seen = true
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, p := range pools {
		wg.Go(func() { _, errs[i] = db.Migrate(ctx, p, nil) })
	}
	wg.Wait()
	close(stop)
	sawSignal := <-signal // the watcher is done with admin
	for i, err := range errs {
		require.NoError(t, err, "store_%d", i)
		v, err := db.SchemaVersion(ctx, pools[i])
		require.NoError(t, err)
		require.Equal(t, db.LatestVersion(), v, "store_%d", i)
	}
	require.False(t, sawSignal, "opsdesk_owner was a member of pg_signal_backend while the stores migrated")
}
