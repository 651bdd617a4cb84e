package cli

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// accessRows is role's rows of opsdesk.access, read as the superuser
// (inspection only).
func accessRows(t *testing.T, d *dbtest.DB, role string) []string {
	t.Helper()
	var tenants []string
	require.NoError(t, d.Admin.QueryRow(t.Context(),
		`SELECT coalesce(array_agg(tenant ORDER BY tenant), '{}') FROM opsdesk.access WHERE role = $1`, role).Scan(&tenants))
	return tenants
}

// A grant without --tenant grants nothing: it is a usage error, before
// anything is written or audited. Every tenant takes --all-tenants.
func TestAccessGrantNeedsATenant(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	cfg := personConfig(t, admin, "")
	alice := dbtest.NewPerson(t, d, "")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--as", "operator"}, "--tenant T is required"},
		{[]string{"--as", "operator", "--tenant", ""}, "--tenant T is required"},
		{[]string{"--as", "operator", "--tenant", " "}, "--tenant T is required"},
		{[]string{"--as", "operator", "--tenant", "*"}, "say --all-tenants"},
		{[]string{"--as", "operator", "--tenant", "acme", "--all-tenants"}, "give one"},
	} {
		args := append([]string{"access", "grant", alice.Role, "--reason", "joins", "--config", cfg}, tc.args...)
		code, out, errOut := run(args...)
		require.Equal(t, ExitUsage, code, "%v: %s%s", tc.args, out, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
	require.Empty(t, accessRows(t, d, alice.Role), "nothing granted")
	require.Zero(t, auditCount(t, d), "nothing audited")
	var member bool
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT pg_has_role($1, 'opsdesk_viewer', 'MEMBER')`, alice.Role).Scan(&member))
	require.False(t, member, "no level granted")

	code, out, errOut := run("access", "grant", alice.Role, "--as", "operator", "--all-tenants", "--reason", "runs the rota", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, alice.Role+" is operator of every tenant")
	require.Equal(t, []string{"*"}, accessRows(t, d, alice.Role))
}

// A grant says what is in force afterwards, and a grant that leaves the
// tenants a role sees unchanged says so and how to narrow them; doctor,
// connected as the role, agrees. As a plain admin, who may not read
// opsdesk.access (its tenants then come from the audit trail), and as a
// superuser, who reads the table.
func TestAccessGrantSaysWhatStaysInForce(t *testing.T) {
	t.Parallel()
	for _, grantor := range []string{"Admin", "Superuser"} {
		t.Run(grantor, func(t *testing.T) {
			t.Parallel()
			cfg, d := storeConfig(t)
			if grantor == "Admin" {
				cfg = personConfig(t, dbtest.NewPerson(t, d, "admin", "*"), "")
			}
			alice := dbtest.NewPerson(t, d, "")
			grant := func(level string, scope ...string) (stdout, stderr string) {
				t.Helper()
				args := append([]string{"access", "grant", alice.Role, "--as", level, "--reason", "rota", "--config", cfg}, scope...)
				code, out, errOut := run(args...)
				require.Equal(t, ExitOK, code, "%v: %s", scope, errOut)
				return out, errOut
			}
			doctor := func() string {
				t.Helper()
				code, out, _ := run("doctor", "--dsn", alice.DSN)
				require.Equal(t, ExitOK, code, out)
				return out
			}

			out, errOut := grant("operator", "--all-tenants")
			require.Contains(t, out, "decided: "+alice.Role+" is operator of every tenant; audit record")
			require.NotContains(t, errOut, "warning")

			// The reported case: a narrower grant over every tenant.
			out, errOut = grant("viewer", "--tenant", "acme")
			require.Contains(t, out, alice.Role+" is viewer of every tenant;")
			require.NotContains(t, out, "viewer of acme")
			require.Contains(t, errOut, "warning: "+alice.Role+" already sees every tenant: the grant of acme made it viewer "+
				"of every tenant, not of acme alone; to narrow it, revoke "+alice.Role+" first (opsdesk access revoke "+alice.Role)
			require.Contains(t, doctor(), "viewer: read states and the audit trail; every tenant")
			out, errOut = grant("viewer", "--tenant", "acme")
			require.Contains(t, out, alice.Role+" is viewer of every tenant;")
			require.Contains(t, errOut, alice.Role+" already sees every tenant as viewer: the grant of acme changes nothing; to narrow it")
			require.Equal(t, []string{"*", "acme"}, accessRows(t, d, alice.Role))

			// Revoked, then granted tenant by tenant: each grant says every
			// tenant in force.
			code, _, errOut := run("access", "revoke", alice.Role, "--reason", "narrow", "--config", cfg)
			require.Equal(t, ExitOK, code, errOut)
			out, errOut = grant("operator", "--tenant", "acme")
			require.Contains(t, out, alice.Role+" is operator of acme;")
			require.NotContains(t, errOut, "warning")
			out, errOut = grant("operator", "--tenant", "globex")
			require.Contains(t, out, alice.Role+" is operator of acme, globex;")
			require.NotContains(t, errOut, "warning")
			require.Contains(t, doctor(), "operator: decide, acknowledge, reveal; tenants acme, globex")
			_, errOut = grant("operator", "--tenant", "globex")
			require.Contains(t, errOut, "warning: "+alice.Role+" was already operator of acme, globex: the grant of globex changes nothing")
			out, _ = grant("viewer", "--tenant", "globex")
			require.Contains(t, out, alice.Role+" is viewer of acme, globex;", "the level changed: no warning needed")
			require.Equal(t, []string{"acme", "globex"}, accessRows(t, d, alice.Role))
		})
	}
}
