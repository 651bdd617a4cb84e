package opstest_test

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opstest"
)

// TestMain starts a throw-away server and sets OPSDESK_TEST_DSN to it, as a
// service's CI would point it at theirs.
func TestMain(m *testing.M) { dbtest.Main(m) }

var ticketTools = ops.Config{Tools: map[string]ops.Policy{"create-ticket": {Effect: ops.EffectLocal}}}

var ticketReq = ops.Request{
	Identity: ops.Identity{Tenant: "acme", Tool: "create-ticket", Key: "k1"},
	Version:  "1",
	Intent:   map[string]any{"title": "Printer on fire"},
}

// noEffect is a local effect that writes nothing of its own.
func noEffect(context.Context, pgx.Tx) (string, error) { return "done", nil }

// serverAdmin connects to the test server as its administrator, outside
// any test database: to see what is left once a test ends.
func serverAdmin(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), os.Getenv(opstest.EnvDSN))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("ServiceLoginRunsTheLibraryAndNoMore", func(t *testing.T) {
		t.Parallel()
		db := opstest.New(t, &opstest.Opts{Config: ops.Config{Tools: ticketTools.Tools, Owner: "worker-7"}})
		require.Equal(t, "worker-7", db.Store.Owner(), "the store has the given Config")
		out, err := ops.DoTx(t.Context(), db.Store, ticketReq, noEffect)
		require.NoError(t, err)
		require.Equal(t, ops.Created, out.Disposition)

		var super, createRole, createDB bool
		var groups []string
		require.NoError(t, db.Pool.QueryRow(t.Context(), `
SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb,
       ARRAY(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid)
FROM pg_roles r WHERE r.rolname = session_user`).Scan(&super, &createRole, &createDB, &groups))
		require.False(t, super)
		require.False(t, createRole)
		require.False(t, createDB)
		require.Equal(t, []string{"opsdesk_service"}, groups)

		for _, sql := range []string{
			`DELETE FROM opsdesk.operations`,
			`TRUNCATE opsdesk.operations`,
			`DELETE FROM opsdesk.conflicts`,
			`SELECT count(*) FROM opsdesk.schema_migrations`,
			`CREATE TABLE opsdesk.extra (id int)`,
			`DROP TABLE opsdesk.operations`,
		} {
			_, err := db.Pool.Exec(t.Context(), sql)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, sql)
			require.Equal(t, "42501", pgErr.Code, "%s: %v", sql, err) // insufficient_privilege
		}
		var records int
		require.NoError(t, db.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.operations`).Scan(&records))
		require.Equal(t, 1, records)
	})

	t.Run("DatabasesAreIndependentAndDropped", func(t *testing.T) {
		t.Parallel()
		var names, roles []string
		t.Run("Inner", func(t *testing.T) {
			a := opstest.New(t, &opstest.Opts{Config: ticketTools})
			b := opstest.New(t, &opstest.Opts{Config: ticketTools})
			names, roles = []string{a.Name, b.Name}, []string{a.ServiceRole, b.ServiceRole}
			require.NotEqual(t, a.Name, b.Name)
			require.NotEqual(t, a.ServiceRole, b.ServiceRole)

			_, err := ops.DoTx(t.Context(), a.Store, ticketReq, noEffect)
			require.NoError(t, err)
			rec, err := b.Store.Read(t.Context(), ticketReq.Identity)
			require.NoError(t, err)
			require.Equal(t, ops.StateAbsent, rec.State, "b does not see a's record")
			out, err := ops.DoTx(t.Context(), b.Store, ticketReq, noEffect)
			require.NoError(t, err)
			require.Equal(t, ops.Created, out.Disposition)
		})
		admin := serverAdmin(t)
		var left int
		require.NoError(t, admin.QueryRow(t.Context(),
			`SELECT (SELECT count(*) FROM pg_database WHERE datname = ANY($1))
			      + (SELECT count(*) FROM pg_roles WHERE rolname = ANY($2))`, names, roles).Scan(&left))
		require.Zero(t, left, "databases %v and logins %v are dropped when the test ends", names, roles)
	})

	t.Run("ParallelTestsGetTheirOwn", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		seen := map[string]bool{}
		t.Run("Group", func(t *testing.T) {
			for range 6 {
				t.Run("Test", func(t *testing.T) {
					t.Parallel()
					db := opstest.New(t, &opstest.Opts{Config: ticketTools})
					// The same identity in every test: each is
					// created, none replayed from another test.
					out, err := ops.DoTx(t.Context(), db.Store, ticketReq, noEffect)
					require.NoError(t, err)
					require.Equal(t, ops.Created, out.Disposition)
					mu.Lock()
					seen[db.Name] = true
					mu.Unlock()
				})
			}
		})
		require.Len(t, seen, 6)
	})
}

// TestNewFailsSayingWhatToSet watches New fail on a stand-in: a server that
// is not installed, unreachable or not a superuser's fails the test (never a
// skip) and says what to install or set.
// It changes the environment, so it does not run in parallel.
func TestNewFailsSayingWhatToSet(t *testing.T) {
	for name, tc := range map[string]struct {
		env, dsn string
		want     []string
	}{
		"NoServerInstalled": {want: []string{"no PostgreSQL server", "apt-get install -y postgresql", "set OPSDESK_TEST_DSN", "Opts.DSN"}},
		"BlankDSNNoServer":  {env: " \t\n\u3000", want: []string{"apt-get install -y postgresql", "set OPSDESK_TEST_DSN"}},
		"Unreachable":       {dsn: "host=" + t.TempDir() + " user=x password=sekrit dbname=y connect_timeout=2", want: []string{"connect", "Opts.DSN", "superuser"}},
		"UnreachableEnv":    {env: "host=" + t.TempDir() + " user=x password=sekrit dbname=y connect_timeout=2", want: []string{"connect", "OPSDESK_TEST_DSN", "superuser"}},
		"BadDSN":            {env: "postgres://u:sekrit@[bad", want: []string{"OPSDESK_TEST_DSN", "does not parse"}},
		"NotASuperuser":     {dsn: nobodyDSN(t), want: []string{"permission denied", "Opts.DSN", "superuser"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(opstest.EnvDSN, tc.env)
			// No DSN: the default cluster, here on a machine without
			// the server binaries.
			defer opstest.WithDefaultStart(func(context.Context) (*pgcluster.Cluster, error) {
				return nil, pgcluster.ErrServerNotInstalled
			})()
			reached := false
			ran := runTest(io.Discard, func(t *standInT) {
				opstest.New(t, &opstest.Opts{DSN: tc.dsn})
				reached = true
			})
			require.True(t, ran.Failed())
			require.False(t, reached, "New stops the test")
			for _, want := range tc.want {
				require.Contains(t, ran.Messages(), want)
			}
			require.NotContains(t, ran.Messages(), "sekrit")
		})
	}
}

// nobodyDSN is a DSN of a login granted nothing, on a database of its own.
func nobodyDSN(t *testing.T) string {
	t.Helper()
	d := dbtest.New(t)
	return dbtest.NewPerson(t, d, "").DSN
}
