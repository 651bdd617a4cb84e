package ops_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
)

// The table's rules were ten CHECK constraints until migration 00026, which
// moved them into the state machine's function (the server prepared the
// CHECKs again for every statement). They still hold for every writer,
// superusers included, and are refused as the CHECKs refused them: the
// constraint's name, check_violation.

// requireRule requires err to be the refusal of the table rule named
// constraint.
func requireRule(t *testing.T, err error, constraint, stmt string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "not refused: %s", stmt)
	require.Equal(t, "23514", pgErr.Code, "%s: %s", stmt, pgErr.Message)
	require.Equal(t, constraint, pgErr.ConstraintName, "%s: %s", stmt, pgErr.Message)
	require.Contains(t, pgErr.Message, `violates check constraint "`+constraint+`"`, stmt)
}

func TestTableRulesHoldForEveryWriter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	printer := ticketIntent{Title: "Printer on fire", Priority: 2}
	first, err := b.doTicket(t, "acme", "k1", printer)
	require.NoError(t, err)
	id := first.OperationID
	_, fp, err := ops.Canonical(toolTicket, "1", printer)
	require.NoError(t, err)

	// A pending record as the superuser writes one, with one column
	// changed: each breaks exactly one rule.
	insert := func(pool *pgxpool.Pool, key, effect, state string, fingerprint []byte) error {
		_, err := pool.Exec(b.ctx, `INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint,
    effect, state, owner, leased_at, lease_expires_at)
VALUES ('acme', 'create-ticket', $1, '1', $4, $2, $3, 'w', clock_timestamp(), clock_timestamp() + interval '1 minute')`,
			key, effect, state, fingerprint)
		return err
	}
	short := []byte{1}
	t.Run("SuperuserInsert", func(t *testing.T) {
		fpLit := fp[:]
		require.NoError(t, insert(b.db.Admin, "fine", "local", "pending", fpLit), "the fixture itself is allowed")
		requireRule(t, insert(b.db.Admin, "", "local", "pending", fpLit), "operations_key_length", "empty key")
		requireRule(t, insert(b.db.Admin, "short-fp", "local", "pending", short), "operations_fingerprint_length", "short fingerprint")
		requireRule(t, insert(b.db.Admin, "bad-effect", "remote", "pending", fpLit), "operations_effect", "unknown effect")
		requireRule(t, insert(b.db.Admin, "bad-state", "local", "lost", fpLit), "operations_state", "unknown state")
		requireRule(t, insert(b.db.Admin, "no-expiry", "local", "completed", fpLit), "operations_completed_expiry", "completed without expiry")
	})

	// The superuser updating the library's completed record.
	t.Run("SuperuserUpdate", func(t *testing.T) {
		for _, c := range []struct{ set, constraint string }{
			{"outcome = 'maybe'", "operations_outcome"},
			{"state = 'pending', outcome = NULL, owner = NULL", "operations_pending_lease"},
			{"attempt = 0", "operations_attempt"},
			{"version = 0", "operations_version"},
			{"conflict_count = -1", "operations_conflict_count"},
			{"expires_at = NULL", "operations_completed_expiry"},
		} {
			before := b.rowText(t, id)
			stmt := `UPDATE opsdesk.operations SET ` + c.set + ` WHERE id = $1`
			_, err := b.db.Admin.Exec(b.ctx, stmt, id)
			requireRule(t, err, c.constraint, stmt)
			require.Equal(t, before, b.rowText(t, id), "the record changed: %s", stmt)
		}
	})

	// A service login writing SQL by hand: a write the state machine
	// allows but a rule refuses.
	t.Run("ServiceInsert", func(t *testing.T) {
		requireRule(t, insert(b.db.Service, "short-fp", "local", "pending", short), "operations_fingerprint_length", "short fingerprint")
		requireRule(t, insert(b.db.Service, "bad-effect", "remote", "pending", fp[:]), "operations_effect", "unknown effect")
	})
}
