package db_test

import (
	"sort"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// The state machine's fast paths (migrations 00015 and 00018) check only the columns
// the service may insert or update: the service cannot write the others at
// all. A grant of one more column, or of the whole table, would let the
// service rewrite it while reserving or completing a record, so this test
// fails until the fast paths and the function have been checked for it.
func TestStateMachineFastPathsRelyOnTheseGrants(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	privileged := func(privilege string) []string {
		t.Helper()
		rows, err := d.Admin.Query(t.Context(), `
SELECT attname::text FROM pg_attribute
WHERE attrelid = 'opsdesk.operations'::regclass AND attnum > 0 AND NOT attisdropped
  AND has_column_privilege('opsdesk_service', 'opsdesk.operations', attname, $1)`, privilege)
		require.NoError(t, err)
		columns, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		sort.Strings(columns)
		return columns
	}
	require.Equal(t, []string{"attempt", "completed_at", "effect", "expires_at", "fingerprint", "intent", "key",
		"lease_expires_at", "leased_at", "outcome", "owner", "result", "result_ref", "state", "tenant", "tool",
		"tool_version"}, privileged("INSERT"),
		"the insert's WHEN condition (operations_state_machine_insert, migration 00018) checks state, attempt, "+
			"the lease, the effect and the completion columns only")
	// The completion's condition (operations_state_machine_update) checks
	// the columns it writes; operations_state_machine_kept, the others.
	kept := []string{"attempt", "conflict_count", "effect", "last_conflict_at", "lease_expires_at", "leased_at", "owner"}
	completion := []string{"completed_at", "expires_at", "outcome", "result", "result_ref", "state", "updated_at", "version"}
	require.ElementsMatch(t, append(kept, completion...), privileged("UPDATE"))
	rows, err := d.Admin.Query(t.Context(), `
SELECT a.attname::text FROM pg_trigger g JOIN pg_attribute a ON a.attrelid = g.tgrelid AND a.attnum = ANY (g.tgattr)
WHERE g.tgrelid = 'opsdesk.operations'::regclass AND g.tgname = 'operations_state_machine_kept'`)
	require.NoError(t, err)
	watched, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.ElementsMatch(t, kept, watched)

	// The defaults the reservation's condition relies on.
	var defaults int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `
SELECT count(*) FROM pg_attrdef a JOIN pg_attribute c ON c.attrelid = a.adrelid AND c.attnum = a.adnum
WHERE a.adrelid = 'opsdesk.operations'::regclass
  AND (c.attname, pg_get_expr(a.adbin, a.adrelid)) IN (('owner_role', 'SESSION_USER'), ('version', '1'),
      ('conflict_count', '0'), ('held', 'false'), ('created_at', 'now()'), ('updated_at', 'now()'))`).Scan(&defaults))
	require.Equal(t, 6, defaults)
}
