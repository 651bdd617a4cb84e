package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// audit seal seals what the operator's plain-SQL decisions queued, says
// how many, and, while a one-tenant viewer keeps a seal's transaction open
// on acme's head, how many still wait and who holds their chain. A login
// without opsdesk's roles seals nothing; a bad -o is a usage error.
func TestAuditSeal(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t) // 8 entries queued by plain SQL, none sealed yet
	var queued int
	require.NoError(t, s.d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit_queue`).Scan(&queued))
	require.Positive(t, queued)

	code, out, errOut := run("audit", "seal", "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "sealed ")
	require.NotContains(t, out, "still queued")
	code, out, errOut = run("audit", "seal", "-o", "json", "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	var got audit.Sealing
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Zero(t, got.Sealed, "nothing left to seal")

	// A viewer of acme seals a new entry and keeps its transaction open.
	s.decide(t, "run-42:create-ticket", 1)
	viewer := dbtest.NewPerson(t, s.d, "viewer", "acme")
	conn, err := pgx.Connect(t.Context(), viewer.DSN)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), `SELECT opsdesk.audit_seal()`)
	require.NoError(t, err)
	s.decide(t, "run-42:create-ticket", 1)
	code, out, errOut = run("audit", "seal", "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "still queued: their chains are being sealed by "+viewer.Role)
	require.NoError(t, tx.Rollback(t.Context()))
	code, out, errOut = run("audit", "seal", "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "sealed 2 entries")

	outsider := dbtest.NewPerson(t, s.d, "")
	code, _, errOut = run("audit", "seal", "--config", personConfig(t, outsider, ""))
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "permission denied")
	code, _, errOut = run("audit", "seal", "-o", "yaml", "--config", s.cfg)
	require.Equal(t, ExitUsage, code, errOut)
}
