package db_test

import (
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// The library's completion skips the state machine's function when the
// update trigger's WHEN condition recognises it (migration 00015), so the
// condition must hold every column the completion does not write to its
// old value: a column added to opsdesk.operations later would otherwise be
// the service's to rewrite while completing a record. Adding one means
// naming it there (and, if the service may write it, in the function).
func TestCompletionFastPathNamesEveryColumn(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	var def string
	require.NoError(t, d.Admin.QueryRow(ctx, `
SELECT pg_get_triggerdef(oid) FROM pg_trigger
WHERE tgrelid = 'opsdesk.operations'::regclass AND tgname = 'operations_state_machine_update'`).Scan(&def))
	rows, err := d.Admin.Query(ctx, `
SELECT attname::text FROM pg_attribute
WHERE attrelid = 'opsdesk.operations'::regclass AND attnum > 0 AND NOT attisdropped`)
	require.NoError(t, err)
	columns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, columns, "owner_role")

	written := map[string]bool{"state": true, "outcome": true, "result": true, "result_ref": true,
		"completed_at": true, "expires_at": true, "updated_at": true, "version": true}
	for _, col := range columns {
		if written[col] {
			continue
		}
		// PostgreSQL stores the row comparison column by column.
		kept := regexp.MustCompile(`\(new\.` + col + ` IS DISTINCT FROM old\.` + col + `\)`)
		require.True(t, kept.MatchString(def),
			"column %s is not held to its old value by the completion's WHEN condition:\n%s", col, def)
	}
}
