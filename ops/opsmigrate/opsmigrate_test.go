package opsmigrate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops/opsmigrate"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// migrationLockID is the advisory lock every migration run takes
// (internal/db): a test holds it to play a run in progress elsewhere.
const migrationLockID int64 = 0x6f70736465736b

// emptyDatabase creates a database with no opsdesk schema, dropped when t
// ends, and returns its superuser DSN.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	dsn, drop, err := dbtest.CreateEmpty(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, drop()) })
	return dsn
}

// schemaRows counts the version table's rows and the opsdesk schema's
// tables and functions: what a refused run must leave as it was.
func schemaRows(t *testing.T, pool *pgxpool.Pool) (versions, objects int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.schema_migrations`).Scan(&versions))
	require.NoError(t, pool.QueryRow(t.Context(), `
SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = 'opsdesk'::regnamespace)
     + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'opsdesk'::regnamespace)`).Scan(&objects))
	return versions, objects
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	latest := opsmigrate.LatestVersion()

	t.Run("InstallsThenFindsNothingToDo", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t, emptyDatabase(t))

		v, err := opsmigrate.Check(t.Context(), pool)
		require.ErrorIs(t, err, opsmigrate.ErrSchemaBehind)
		require.Equal(t, opsmigrate.SchemaVersion{Database: 0, Library: latest}, v)

		first, err := opsmigrate.Migrate(t.Context(), pool, nil)
		require.NoError(t, err)
		require.Equal(t, int64(0), first.From)
		require.Equal(t, latest, first.To)
		require.Len(t, first.Applied, int(latest), "one file per version")
		require.Equal(t, "00001_operation_store.sql", first.Applied[0])

		again, err := opsmigrate.Migrate(t.Context(), pool, nil)
		require.NoError(t, err)
		require.Equal(t, opsmigrate.MigrateResult{From: latest, To: latest}, again)

		v, err = opsmigrate.Check(t.Context(), pool)
		require.NoError(t, err)
		require.Equal(t, opsmigrate.SchemaVersion{Database: latest, Library: latest}, v)

		// Nothing of opsdesk lands outside its schema.
		var outside int
		require.NoError(t, pool.QueryRow(t.Context(),
			`SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&outside))
		require.Zero(t, outside)
		// The lent pool is open and none of its connections holds the
		// migration lock.
		var locks int
		require.NoError(t, pool.QueryRow(t.Context(),
			`SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			 WHERE l.locktype = 'advisory' AND d.datname = current_database()`).Scan(&locks))
		require.Zero(t, locks)
	})

	t.Run("ConcurrentRunsAreSerialized", func(t *testing.T) {
		t.Parallel()
		dsn := emptyDatabase(t)
		// Four processes with a pool each, and two goroutines sharing one.
		pools := []*pgxpool.Pool{dbtest.Pool(t, dsn), dbtest.Pool(t, dsn), dbtest.Pool(t, dsn), dbtest.Pool(t, dsn)}
		shared := dbtest.Pool(t, dsn)
		pools = append(pools, shared, shared)
		results := make([]opsmigrate.MigrateResult, len(pools))
		errs := make([]error, len(pools))
		var wg sync.WaitGroup
		for i, pool := range pools {
			wg.Go(func() { results[i], errs[i] = opsmigrate.Migrate(t.Context(), pool, nil) })
		}
		wg.Wait()
		applied := 0
		for i := range pools {
			require.NoError(t, errs[i])
			require.Equal(t, latest, results[i].To)
			if len(results[i].Applied) > 0 {
				applied++
				require.Len(t, results[i].Applied, int(latest))
			}
		}
		require.Equal(t, 1, applied, "exactly one run applies the migrations")
	})

	t.Run("WaitsForARunInProgressUntilTheDeadline", func(t *testing.T) {
		t.Parallel()
		dsn := emptyDatabase(t)
		// Another process is migrating: it holds the migration lock.
		other, err := pgx.Connect(t.Context(), dsn)
		require.NoError(t, err)
		defer other.Close(context.Background())
		_, err = other.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, migrationLockID)
		require.NoError(t, err)

		pool := dbtest.Pool(t, dsn)
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := opsmigrate.Migrate(ctx, pool, nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(start), 10*time.Second)
		require.Empty(t, res.Applied)

		// Once the other run ends, this one proceeds.
		_, err = other.Exec(t.Context(), `SELECT pg_advisory_unlock($1)`, migrationLockID)
		require.NoError(t, err)
		res, err = opsmigrate.Migrate(t.Context(), pool, nil)
		require.NoError(t, err)
		require.Equal(t, latest, res.To)
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
		res, err := opsmigrate.Migrate(t.Context(), dbtest.Pool(t, dsn), nil)
		require.NoError(t, err)
		require.Equal(t, latest, res.To)
	})

	t.Run("UnprivilegedRolesAreToldWhoMayMigrate", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		nobody := dbtest.NewPerson(t, d, "") // a login granted nothing
		dsn := emptyDatabase(t)
		for name, pool := range map[string]*pgxpool.Pool{
			// A plain login on a database it does not own.
			"empty database": dbtest.Pool(t, mustWithDatabase(t, nobody.DSN, dsn)),
			// A service's login on a migrated database.
			"service": d.Service,
		} {
			res, err := opsmigrate.Migrate(t.Context(), pool, nil)
			require.Error(t, err, name)
			require.ErrorContains(t, err, "superuser", name)
			require.ErrorContains(t, err, "CREATEROLE", name)
			require.ErrorContains(t, err, "nothing was changed", name)
			require.Empty(t, res.Applied, name)
		}
		admin := dbtest.Pool(t, dsn)
		var schema *string
		require.NoError(t, admin.QueryRow(t.Context(), `SELECT to_regnamespace('opsdesk')::text`).Scan(&schema))
		require.Nil(t, schema, "the refused run created nothing")
	})
}

// mustWithDatabase returns loginDSN (its role and password) on the
// database dbDSN names.
func mustWithDatabase(t *testing.T, loginDSN, dbDSN string) string {
	t.Helper()
	target, err := pgx.ParseConfig(dbDSN)
	require.NoError(t, err)
	dsn, err := dbtest.WithDatabase(loginDSN, target.Database, "", "")
	require.NoError(t, err)
	return dsn
}

func TestSchemaAhead(t *testing.T) {
	t.Parallel()
	latest := opsmigrate.LatestVersion()
	d := dbtest.New(t)
	// A newer opsdesk migrated this database: its version row, faked as
	// the superuser.
	_, err := d.Admin.Exec(t.Context(),
		`INSERT INTO opsdesk.schema_migrations (version_id, is_applied) VALUES ($1, true)`, latest+1)
	require.NoError(t, err)
	versions, objects := schemaRows(t, d.Admin)

	res, err := opsmigrate.Migrate(t.Context(), d.Admin, nil)
	require.ErrorIs(t, err, opsmigrate.ErrSchemaAhead)
	require.ErrorContains(t, err, "nothing was changed")
	require.Equal(t, opsmigrate.MigrateResult{From: latest + 1, To: latest + 1}, res)
	v, o := schemaRows(t, d.Admin)
	require.Equal(t, versions, v)
	require.Equal(t, objects, o)

	sv, err := opsmigrate.Version(t.Context(), d.Admin)
	require.NoError(t, err, "Version reports, Check judges")
	require.Equal(t, opsmigrate.SchemaVersion{Database: latest + 1, Library: latest}, sv)
	sv, err = opsmigrate.Check(t.Context(), d.Admin)
	require.ErrorIs(t, err, opsmigrate.ErrSchemaAhead)
	require.NotErrorIs(t, err, opsmigrate.ErrSchemaBehind)
	require.Equal(t, latest+1, sv.Database)
}

func TestSchemaBehind(t *testing.T) {
	t.Parallel()
	latest := opsmigrate.LatestVersion()
	d := dbtest.New(t)
	// An older opsdesk migrated this database: its latest row removed.
	_, err := d.Admin.Exec(t.Context(), `DELETE FROM opsdesk.schema_migrations WHERE version_id = $1`, latest)
	require.NoError(t, err)
	v, err := opsmigrate.Check(t.Context(), d.Admin)
	require.ErrorIs(t, err, opsmigrate.ErrSchemaBehind)
	require.NotErrorIs(t, err, opsmigrate.ErrSchemaAhead)
	require.Equal(t, opsmigrate.SchemaVersion{Database: latest - 1, Library: latest}, v)
}

func TestVersionNeedsARoleThatMayReadIt(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	viewer := dbtest.NewPerson(t, d, "viewer")
	v, err := opsmigrate.Check(t.Context(), viewer.Pool)
	require.NoError(t, err)
	require.Equal(t, opsmigrate.LatestVersion(), v.Database)

	// opsdesk_service is not granted the version table: the error says
	// who is.
	_, err = opsmigrate.Version(t.Context(), d.Service)
	require.ErrorContains(t, err, "opsdesk_viewer")
	require.NotErrorIs(t, err, opsmigrate.ErrSchemaBehind)
}

func TestNilPool(t *testing.T) {
	t.Parallel()
	_, err := opsmigrate.Migrate(t.Context(), nil, nil)
	require.ErrorContains(t, err, "nil pool")
	_, err = opsmigrate.Version(t.Context(), nil)
	require.ErrorContains(t, err, "nil pool")
	_, err = opsmigrate.Check(t.Context(), nil)
	require.ErrorContains(t, err, "nil pool")
}
