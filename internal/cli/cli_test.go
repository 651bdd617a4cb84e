package cli

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func run(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := run("version")
	require.Equal(t, ExitOK, code)
	require.Regexp(t, `^opsdesk \S+ \(schema \d+, go\S+\)\n$`, out)
	code, _, errOut := run("version", "--dsn", " \t\n")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--dsn is blank")

	t.Run("ComparesTheDatabase", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		viewer := dbtest.NewPerson(t, d, "viewer")
		code, out, errOut := run("version", "--dsn", viewer.DSN)
		require.Equal(t, ExitOK, code, errOut)
		require.Regexp(t, `\ndatabase schema `+itoa(db.LatestVersion())+`\n$`, out)

		// A newer opsdesk migrated it: this one says so and fails.
		_, err := d.Admin.Exec(t.Context(), `INSERT INTO opsdesk.schema_migrations (version_id, is_applied) VALUES ($1, true)`,
			db.LatestVersion()+1)
		require.NoError(t, err)
		code, _, errOut = run("version", "--dsn", viewer.DSN)
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, "newer than this opsdesk")
		code, _, errOut = run("migrate", "--dsn", d.AdminDSN)
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, "newer than this opsdesk")
		require.Contains(t, errOut, "nothing was changed")
	})
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()

	t.Run("UsageErrorsExitTwo", func(t *testing.T) {
		t.Parallel()
		code, _, errOut := run("migrate")
		require.Equal(t, ExitUsage, code)
		require.Contains(t, errOut, "--dsn is required")

		code, _, errOut = run("migrate", "--dsn", "postgres://u:sekrit@[bad")
		require.Equal(t, ExitUsage, code)
		require.NotContains(t, errOut, "sekrit", "passwords never appear in output")

		code, _, _ = run("migrate", "--no-such-flag")
		require.Equal(t, ExitUsage, code)
		code, _, _ = run("version", "extra")
		require.Equal(t, ExitUsage, code)
	})

	t.Run("UnreachableDatabaseExitsOne", func(t *testing.T) {
		t.Parallel()
		code, _, errOut := run("migrate", "--dsn", "host="+t.TempDir()+" user=x password=sekrit dbname=y connect_timeout=2")
		require.Equal(t, ExitFailure, code)
		require.NotEmpty(t, errOut)
		require.NotContains(t, errOut, "sekrit")
	})

	t.Run("InstallsThenReportsNothingToDo", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		name := d.Name + "_fresh"
		_, err := d.Admin.Exec(t.Context(), `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
		require.NoError(t, err)
		t.Cleanup(func() {
			_, _ = d.Admin.Exec(context.Background(), `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
		})
		dsn, err := dbtest.WithDatabase(d.AdminDSN, name, "", "")
		require.NoError(t, err)

		code, out, errOut := run("migrate", "--dsn", dsn)
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, out, "schema migrated from version 0 to ")
		code, out, _ = run("migrate", "--dsn", dsn)
		require.Equal(t, ExitOK, code)
		require.Equal(t, "schema already at version "+itoa(db.LatestVersion())+"\n", out)
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
