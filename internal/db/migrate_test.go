package db_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// emptyDatabase creates a database with no opsdesk schema and returns a
// superuser connection config for it.
func emptyDatabase(t *testing.T) *pgx.ConnConfig {
	t.Helper()
	d := dbtest.New(t)
	name := d.Name + "_empty"
	_, err := d.Admin.Exec(t.Context(), `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := d.Admin.Exec(context.Background(), `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
		require.NoError(t, err)
	})
	dsn, err := dbtest.WithDatabase(d.AdminDSN, name, "", "")
	require.NoError(t, err)
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	return cfg
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("InstallsThenFindsNothingToDo", func(t *testing.T) {
		t.Parallel()
		cfg := emptyDatabase(t)
		conn, err := pgx.ConnectConfig(t.Context(), cfg)
		require.NoError(t, err)
		defer conn.Close(context.Background())

		_, err = db.CheckSchema(t.Context(), conn)
		require.ErrorIs(t, err, db.ErrSchemaBehind)

		first, err := db.Migrate(t.Context(), cfg)
		require.NoError(t, err)
		require.Equal(t, int64(0), first.From)
		require.Equal(t, db.LatestVersion(), first.To)
		require.NotEmpty(t, first.Applied)

		again, err := db.Migrate(t.Context(), cfg)
		require.NoError(t, err)
		require.Equal(t, db.LatestVersion(), again.From)
		require.Equal(t, db.LatestVersion(), again.To)
		require.Empty(t, again.Applied)

		version, err := db.CheckSchema(t.Context(), conn)
		require.NoError(t, err)
		require.Equal(t, db.LatestVersion(), version)

		// Nothing of opsdesk lands outside its schema.
		var outside int
		require.NoError(t, conn.QueryRow(t.Context(),
			`SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&outside))
		require.Zero(t, outside)
	})

	t.Run("ConcurrentRunsAreSerialized", func(t *testing.T) {
		t.Parallel()
		cfg := emptyDatabase(t)
		const runs = 4
		results := make([]db.MigrateResult, runs)
		errs := make([]error, runs)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() { results[i], errs[i] = db.Migrate(t.Context(), cfg.Copy()) })
		}
		wg.Wait()
		applied := 0
		for i := range runs {
			require.NoError(t, errs[i])
			require.Equal(t, db.LatestVersion(), results[i].To)
			if len(results[i].Applied) > 0 {
				applied++
			}
		}
		require.Equal(t, 1, applied, "exactly one run applies the migrations")
	})

	t.Run("DatabaseOwnerWithoutCreateRoleCanMigrate", func(t *testing.T) {
		t.Parallel()
		// The roles exist (the template created them) and an
		// administrator let the owner act as opsdesk_owner: an owner who
		// may not create roles still installs the schema.
		d := dbtest.New(t)
		owner := d.Name + "_owner"
		name := d.Name + "_owned"
		_, err := d.Admin.Exec(t.Context(), `CREATE ROLE `+pgx.Identifier{owner}.Sanitize()+` LOGIN NOCREATEROLE NOSUPERUSER PASSWORD 'owner-pw'`)
		require.NoError(t, err)
		_, err = d.Admin.Exec(t.Context(), `GRANT opsdesk_owner TO `+pgx.Identifier{owner}.Sanitize())
		require.NoError(t, err)
		_, err = d.Admin.Exec(t.Context(), `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` OWNER `+pgx.Identifier{owner}.Sanitize())
		require.NoError(t, err)
		t.Cleanup(func() {
			_, _ = d.Admin.Exec(context.Background(), `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
			_, _ = d.Admin.Exec(context.Background(), `DROP ROLE `+pgx.Identifier{owner}.Sanitize())
		})
		dsn, err := dbtest.WithDatabase(d.AdminDSN, name, owner, "owner-pw")
		require.NoError(t, err)
		cfg, err := pgx.ParseConfig(dsn)
		require.NoError(t, err)
		res, err := db.Migrate(t.Context(), cfg)
		require.NoError(t, err)
		require.Equal(t, db.LatestVersion(), res.To)
	})

	t.Run("ServiceRoleIsNotALoginRole", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		var canLogin bool
		require.NoError(t, d.Admin.QueryRow(t.Context(),
			`SELECT rolcanlogin FROM pg_roles WHERE rolname = 'opsdesk_service'`).Scan(&canLogin))
		require.False(t, canLogin)
	})
}

func TestBadDSNNeverShowsThePassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"host=h password = Hunter2Secret port=abc",
		"postgres://u:Hunter2@Secret@h:x/db",
		`host=h password=Hunter2\ Secret port=x`,
		"postgres://u:Hunter2Secret@[bad",
		"host=h password='Hunter2Secret' sslmode=bogus",
	} {
		_, err := db.PoolConfig(dsn, "test")
		require.ErrorIs(t, err, db.ErrBadDSN, dsn)
		_, err = db.ParseConnConfig(dsn)
		require.ErrorIs(t, err, db.ErrBadDSN, dsn)
		for _, secret := range []string{"Hunter2", "Secret"} {
			require.NotContains(t, err.Error(), secret)
		}
	}
}
