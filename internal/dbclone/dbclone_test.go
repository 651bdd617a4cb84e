package dbclone_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbclone"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestTemplateBuiltByConcurrentBinaries: test binaries sharing a server
// build a new template at once, one of them having been killed while
// building before: each gets the template, complete and closed to
// connections, and nothing half-built is left.
func TestTemplateBuiltByConcurrentBinaries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	adminDSN := os.Getenv(dbtest.EnvDSN)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "opsdesk_template_t_" + hex.EncodeToString(b)
	admin, err := pgx.Connect(ctx, adminDSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	_, err = admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name + "_build"}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, n := range []string{name, name + "_build"} {
			_, err := admin.Exec(context.Background(), `DROP DATABASE IF EXISTS `+pgx.Identifier{n}.Sanitize()+` WITH (FORCE)`)
			require.NoError(t, err)
		}
	})

	servers := make([]*dbclone.Server, 4)
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i := range servers {
		servers[i] = dbclone.NewServerWithTemplate(adminDSN, name)
		wg.Go(func() { _, errs[i] = servers[i].Template() })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	rows, err := admin.Query(ctx, `SELECT datname, datallowconn FROM pg_database WHERE datname LIKE $1 || '%'`, name)
	require.NoError(t, err)
	allow, err := pgx.CollectRows(rows, pgx.RowToMap)
	require.NoError(t, err)
	require.Equal(t, []map[string]any{{"datname": name, "datallowconn": false}}, allow)

	// Its clones are migrated, and open to connections.
	clone, err := servers[3].Create(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, clone.Drop()) }()
	conn, err := pgx.Connect(ctx, clone.AdminDSN)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	version, err := db.CheckSchema(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, db.LatestVersion(), version)
}

func TestWithDatabaseNeverShowsThePassword(t *testing.T) {
	t.Parallel()
	_, err := dbclone.WithDatabase("postgres://u:sekrit@[bad", "db", "", "")
	require.ErrorIs(t, err, db.ErrBadDSN)
	require.NotContains(t, err.Error(), "sekrit")

	dsn, err := dbclone.WithDatabase("host=/tmp user=a", `it's`, `r\o'le`, "p w")
	require.NoError(t, err)
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	require.Equal(t, "it's", cfg.Database)
	require.Equal(t, `r\o'le`, cfg.User)
	require.Equal(t, "p w", cfg.Password)

	dsn, err = dbclone.WithDatabase("postgres://a:b@h:5/x?sslmode=disable", "../y", "u", "p@ss/")
	require.NoError(t, err)
	cfg, err = pgx.ParseConfig(dsn)
	require.NoError(t, err)
	require.Equal(t, "../y", cfg.Database)
	require.Equal(t, "u", cfg.User)
	require.Equal(t, "p@ss/", cfg.Password)
}
