package cli

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// TestConsoleVerifierOutlastsTheStatementTimeout: :verify reads every
// chain in one statement over the console's read pool, whose statement
// timeout (here 1ms) a long trail outlasts; it checks all of it as the
// person's role, reports its progress, and leaves the connection's
// timeout as it was.
func TestConsoleVerifierOutlastsTheStatementTimeout(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	_, err := d.Admin.Exec(ctx, `
INSERT INTO opsdesk.audit (tenant, seq, event_id, at, role, action, outcome, forced, override, hash, hash_version)
SELECT 'acme', i, gen_random_uuid(), now(), 'alice', 'decide:defer', 'succeeded', false, false, '\x00', 1
FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	cfg := viewer.Pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "1"
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	var last auditreport.Progress
	rep, err := consoleVerifier{pool: pool}.Verify(ctx, func(p auditreport.Progress) { last = p })
	require.NoError(t, err)
	require.Len(t, rep.Chains, 1)
	require.EqualValues(t, 20000, rep.Chains[0].Records, "every record read")
	require.NotNil(t, rep.Break, "the made-up hashes do not verify")
	require.Equal(t, viewer.Role, rep.Role)
	require.EqualValues(t, 20000, last.Records)
	var timeout string
	require.NoError(t, pool.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout))
	require.Equal(t, "1ms", timeout)
}
