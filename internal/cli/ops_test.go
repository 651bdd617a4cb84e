package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

const opsFixtures = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at, result_ref)
VALUES
 ('acme', 'create-ticket', 'run-42:create-ticket', '1', decode(repeat('03', 32), 'hex'), 'external_unknown', 'pending', NULL, 'worker-3',
  now() - interval '42m', now() - interval '41m', now() - interval '42m', NULL, NULL, NULL),
 ('acme', 'charge-card', 'ord-1', '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', NULL, 'worker-1',
  now() - interval '3s', now() + interval '27s', now() - interval '3s', NULL, NULL, NULL),
 ('globex', 'send-email', 'mail-1', '1', decode(repeat('02', 32), 'hex'), 'external_idempotent', 'completed', 'succeeded', 'worker-2',
  now() - interval '1h', now() - interval '1h', now() - interval '1h', now() - interval '1h', now() + interval '6d', 'MSG-1');`

// storeConfig writes a config file whose only context reaches a fresh
// database with fixtures, and returns its path.
func storeConfig(t *testing.T) (path string, d *dbtest.DB) {
	t.Helper()
	d = dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), opsFixtures)
	require.NoError(t, err)
	path = filepath.Join(t.TempDir(), "config.yaml")
	content := "contexts:\n  test:\n    dsn: " + strconv.Quote(d.AdminDSN) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path, d
}

func TestOpsList(t *testing.T) {
	t.Parallel()
	cfg, _ := storeConfig(t)

	code, out, errOut := run("ops", "list", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "ID  TENANT")
	require.Contains(t, out, "⚠ stuck")
	require.Contains(t, out, "◷ pending")
	require.Contains(t, out, "✓ completed")
	require.Contains(t, out, "41m ago")

	code, out, errOut = run("ops", "list", "--config", cfg, "--state", "stuck", "-o", "json")
	require.Equal(t, ExitOK, code, errOut)
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &items))
	require.Len(t, items, 1)
	it := items[0]
	for _, field := range []string{"id", "tenant", "tool", "key", "state", "stuck", "owner", "attempt",
		"lease_age_seconds", "lease_expires_in_seconds", "expires_at", "version"} {
		require.Contains(t, it, field)
	}
	require.Equal(t, "stuck", it["state"])
	require.Equal(t, true, it["stuck"])
	require.InDelta(t, 42*60, it["lease_age_seconds"], 2)
	require.InDelta(t, -41*60, it["lease_expires_in_seconds"], 2)

	code, out, _ = run("ops", "list", "--config", cfg, "--tenant", "globex", "--filter", "tool:send-email", "-o", "json")
	require.Equal(t, ExitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &items))
	require.Len(t, items, 1)
	require.Equal(t, "mail-1", items[0]["key"])
	require.Nil(t, items[0]["lease_age_seconds"], "a completed record has no lease to age")

	code, out, _ = run("ops", "list", "--config", cfg, "--filter", "tenant:nobody")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "(no operations match)")

	// A cut list says so, on stderr.
	code, out, errOut = run("ops", "list", "--config", cfg, "--limit", "2", "-o", "json")
	require.Equal(t, ExitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &items))
	require.Len(t, items, 2)
	require.Contains(t, errOut, "showing the first 2 operations; more match")
	_, _, errOut = run("ops", "list", "--config", cfg, "--limit", "1")
	require.Contains(t, errOut, "showing the first 1 operation; more match")
	_, _, errOut = run("ops", "list", "--config", cfg, "--limit", "3")
	require.NotContains(t, errOut, "more match")
}

func TestOpsListUsageErrors(t *testing.T) {
	t.Parallel()
	cfg, _ := storeConfig(t)
	for _, args := range [][]string{
		{"--state", "stuk"},
		{"--filter", "state:stuck", "--state", "pending"},
		{"--filter", "colour:red"},
		{"-o", "yaml"},
		{"--limit", "0"},
		{"--sort", "random"},
		{"--dsn", "host=h password = Hunter2Secret port=abc"},
	} {
		code, _, errOut := run(append([]string{"ops", "list", "--config", cfg}, args...)...)
		require.Equal(t, ExitUsage, code, "%v: %s", args, errOut)
		require.NotEmpty(t, errOut)
		require.NotContains(t, errOut, "Hunter2")
	}
}

func TestOpsShowAndGet(t *testing.T) {
	t.Parallel()
	cfg, d := storeConfig(t)
	var id int64
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT id FROM opsdesk.operations WHERE key = 'mail-1'`).Scan(&id))

	code, out, errOut := run("ops", "show", strconv.FormatInt(id, 10), "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "globex/send-email/mail-1")
	require.Contains(t, out, "MSG-1")
	require.Regexp(t, `fingerprint +fp:[0-9a-f]{12} \(keyed tag`, out)
	require.NotContains(t, out, "020202020202", "the fingerprint itself stays hidden")
	require.Contains(t, out, "hidden")

	code, out, _ = run("ops", "show", strconv.FormatInt(id, 10), "--config", cfg, "-o", "json")
	require.Equal(t, ExitOK, code)
	var detail map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &detail))
	require.Equal(t, "MSG-1", detail["result_ref"])

	code, _, errOut = run("ops", "show", "999999", "--config", cfg)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "no operation 999999")
	code, _, _ = run("ops", "show", "abc", "--config", cfg)
	require.Equal(t, ExitUsage, code)

	code, out, _ = run("ops", "get", "--config", cfg, "--tenant", "acme", "--tool", "create-ticket", "--key", "run-42:create-ticket")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "⚠ stuck")

	code, out, _ = run("ops", "get", "--config", cfg, "--tenant", "acme", "--tool", "create-ticket", "--key", "never-used")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "absent")
	require.Contains(t, out, "no attempt was ever recorded")
	require.Contains(t, out, "check the key")
	code, out, _ = run("ops", "get", "--config", cfg, "--tenant", "acme", "--tool", "create-tickett", "--key", "never-used", "-o", "json")
	require.Equal(t, ExitOK, code)
	var absent map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &absent))
	require.Equal(t, "absent", absent["state"])
	require.Contains(t, absent["check"], `no records of the tool "create-tickett"`)
	code, out, _ = run("ops", "get", "--config", cfg, "--tenant", "acmee", "--tool", "create-ticket", "--key", "never-used")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, `the tenant "acmee" has no records you can see`)

	// A purged identity says so, from its tombstone.
	_, err := d.Admin.Exec(t.Context(), `INSERT INTO opsdesk.tombstones (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at)
VALUES ('acme', 'create-ticket', 'run-7', 31007, decode(repeat('ab', 32), 'hex'), now() - interval '2 days', now() + interval '5 days')`)
	require.NoError(t, err)
	code, out, _ = run("ops", "get", "--config", cfg, "--tenant", "acme", "--tool", "create-ticket", "--key", "run-7")
	require.Equal(t, ExitOK, code)
	require.Regexp(t, `acme/create-ticket/run-7: purged\nrecord 31007 was purged .* \(2d ago\); its tombstone lasts until `, out)
	require.Contains(t, out, "reject answers ErrExpired")
	code, out, _ = run("ops", "get", "--config", cfg, "--tenant", "acme", "--tool", "create-ticket", "--key", "run-7", "-o", "json")
	require.Equal(t, ExitOK, code)
	var purged map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &purged))
	require.Equal(t, "purged", purged["state"])
	require.EqualValues(t, 31007, purged["operation_id"])

	code, _, errOut = run("ops", "get", "--config", cfg, "--tenant", "acme")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--key")
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	cfg, _ := storeConfig(t)
	code, out, errOut := run("doctor", "--config", cfg)
	require.Equal(t, ExitOK, code, out+errOut)
	for _, want := range []string{"context test", "✓ reachable", "✓ schema", "⚠ role", "superuser", "✓ clock", "✓ rows", "1 stuck"} {
		require.Contains(t, out, want)
	}
	require.Contains(t, out, "connect as an operator or admin", "a superuser's context is a warning, not a green check")

	// People see their level and tenants; a role without access is told
	// how to get it.
	_, d := storeConfig(t)
	for _, tc := range []struct {
		person *dbtest.Person
		want   string
		code   int
	}{
		{dbtest.NewPerson(t, d, "operator", "acme", "globex"), "operator: decide, acknowledge, reveal; tenants acme, globex", ExitOK},
		{dbtest.NewPerson(t, d, "admin", "*"), "admin: decide, acknowledge, reveal, grant access; every tenant", ExitOK},
		{dbtest.NewPerson(t, d, "viewer"), "viewer: read states and the audit trail; no tenant yet", ExitOK},
		{dbtest.NewPerson(t, d, ""), "may not read the operation store; an opsdesk admin runs: opsdesk access grant", ExitFailure},
	} {
		code, out, _ = run("doctor", "--dsn", tc.person.DSN)
		require.Equal(t, tc.code, code, out)
		require.Contains(t, out, tc.person.Role)
		require.Contains(t, out, tc.want)
		if strings.Contains(out, "access grant") {
			// The suggested command is one that works: it names a tenant.
			require.Contains(t, out, "opsdesk access grant "+tc.person.Role+" --as viewer --tenant T --reason …")
		}
	}

	code, out, _ = run("doctor", "--dsn", "host="+t.TempDir()+" user=x password=sekrit dbname=y connect_timeout=2")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, out, "✗ reachable")
	require.NotContains(t, out, "sekrit")
}

func TestConfigErrorsAreUsageErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("contexts:\n  a:\n    dsn: x\n    refesh: 2s\n"), 0o600))
	code, _, errOut := run("ops", "list", "--config", path)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, path)
	require.Contains(t, errOut, "refesh")

	code, _, errOut = run("doctor", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.Equal(t, ExitUsage, code)
	require.True(t, strings.Contains(errOut, "missing.yaml"), errOut)
}

func TestUnknownSubcommandIsAUsageError(t *testing.T) {
	t.Parallel()
	code, _, errOut := run("ops", "lsit")
	require.Equal(t, ExitUsage, code, errOut)
	code, _, _ = run("ops")
	require.Equal(t, ExitUsage, code)
	code, _, _ = run("lsit")
	require.Equal(t, ExitUsage, code)
}

func TestStoredTextCannotDriveTheTerminal(t *testing.T) {
	t.Parallel()
	cfg, d := storeConfig(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
VALUES ('acme', 'create-ticket', E'evil\x1b[2J\x1b]0;pwned\x07', '1', decode(repeat('09', 32), 'hex'), 'local', 'pending',
        E'worker\x1b[31m', now(), now() + interval '1m')`)
	require.NoError(t, err)
	for _, args := range [][]string{
		{"ops", "list", "--config", cfg},
		{"ops", "get", "--config", cfg, "--tenant", "acme", "--tool", "create-ticket", "--key", "evil\x1b[2J\x1b]0;pwned\x07"},
	} {
		code, out, errOut := run(args...)
		require.Equal(t, ExitOK, code, errOut)
		require.NotContains(t, out, "\x1b", args)
		require.NotContains(t, out, "\x07", args)
	}
}
