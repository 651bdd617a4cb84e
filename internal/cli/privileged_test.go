package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

// privilegedLine is what the line of out that lists a class's logins
// says after the class's label ("" if no line does).
func privilegedLine(out string, class storeview.PrivilegeClass) string {
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, privilegedClassWords[class]+": "); i >= 0 {
			return line[i+len(privilegedClassWords[class])+2:]
		}
	}
	return ""
}

// requireListed checks that out lists each class's attacker, by the role
// it is of the class through, and never the innocent roles.
func requireListed(t *testing.T, out string, a dbtest.Bypassers, innocent ...*dbtest.Person) {
	t.Helper()
	require.Contains(t, privilegedLine(out, storeview.ClassSuperuser), a.Super.Role, out)
	require.Contains(t, privilegedLine(out, storeview.ClassTableOwner), a.TableOwner.Role, out)
	require.Contains(t, privilegedLine(out, storeview.ClassOpsdeskOwner), a.Nested.Role+" (through "+a.Group+" → opsdesk_owner)", out)
	require.Contains(t, privilegedLine(out, storeview.ClassWriteAllData), a.WriteAllData.Role+" (through pg_write_all_data)", out)
	if a.PrePG16 {
		require.Contains(t, privilegedLine(out, storeview.ClassCreateRole), a.CreateRole.Role, out)
	} else {
		require.NotContains(t, privilegedLine(out, storeview.ClassCreateRole), a.CreateRole.Role, out)
	}
	for _, p := range innocent {
		for _, class := range storeview.PrivilegeClasses {
			require.NotContains(t, privilegedLine(out, class), p.Role, "%s is no %s", p.Role, class)
		}
	}
}

// Every login that can bypass the database is named by doctor (connected
// as a plain viewer) and migrate, by class; plain people are not. Each
// class's login then does what its listing warns of, connected as itself.
func TestPrivilegedLoginsAreNamed(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "acme")
	operator := dbtest.NewPerson(t, d, "operator", "*")
	a := dbtest.NewBypassers(t, d)

	code, out, errOut := run("doctor", "--dsn", viewer.DSN)
	require.Equal(t, ExitOK, code, "a warning, not a failure: %s%s", out, errOut)
	require.Regexp(t, `⚠ privileged   \d+ logins can bypass what the database enforces: forge audit records`, out)
	requireListed(t, out, a, viewer, operator)

	code, out, errOut = run("migrate", "--dsn", d.AdminDSN)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, "schema already at version "+itoa(db.LatestVersion())+"\n", out, "stdout stays the version reached")
	require.Contains(t, errOut, "warning: ")
	requireListed(t, errOut, a, viewer, operator)

	ctx := t.Context()
	// The viewer of acme sees acme only, until an attacker widens it.
	seesEvery := func() bool {
		t.Helper()
		var every bool
		require.NoError(t, viewer.Pool.QueryRow(ctx, `SELECT opsdesk.sees_every_tenant()`).Scan(&every))
		return every
	}
	require.False(t, seesEvery())

	t.Run("CreateRoleGrantsItselfOpsdeskOwner", func(t *testing.T) {
		_, err := a.CreateRole.Pool.Exec(ctx, `GRANT opsdesk_owner TO `+pgx.Identifier{a.CreateRole.Role}.Sanitize())
		if !a.PrePG16 {
			require.Error(t, err, "PostgreSQL 16 keeps CREATEROLE to the roles it administers")
			return
		}
		require.NoError(t, err)
		_, out, _ := run("doctor", "--dsn", viewer.DSN)
		require.Contains(t, privilegedLine(out, storeview.ClassOpsdeskOwner), a.CreateRole.Role+" (through opsdesk_owner)", out)
	})

	t.Run("OpsdeskOwnerMemberForgesAuditAndGivesEveryTenant", func(t *testing.T) {
		tx, err := a.Nested.Pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // committed below
		_, err = tx.Exec(ctx, `SET LOCAL ROLE opsdesk_owner`)
		require.NoError(t, err, "through its NOLOGIN group")
		_, err = tx.Exec(ctx, `
INSERT INTO opsdesk.audit (tenant, seq, event_id, at, role, action, outcome, reason, forced, override, hash, hash_version)
VALUES ('acme', 1000000, gen_random_uuid(), now(), $1, 'decide:completed', 'succeeded', 'never happened', false, false, '\x00', 1)`,
			operator.Role)
		require.NoError(t, err, "an audit record in another person's name")
		_, err = tx.Exec(ctx, `INSERT INTO opsdesk.access (role, tenant, granted_by) VALUES ($1, '*', 'nobody')`, viewer.Role)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		require.True(t, seesEvery(), "the viewer of acme now sees every tenant, and no grant was audited")
	})

	t.Run("WriteAllDataGivesEveryTenant", func(t *testing.T) {
		_, err := a.WriteAllData.Pool.Exec(ctx, `INSERT INTO opsdesk.access (role, tenant, granted_by) VALUES ($1, '*', 'nobody')`, a.WriteAllData.Role)
		require.NoError(t, err, "opsdesk.access has no row-level security")
	})
}
