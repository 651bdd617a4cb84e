package ops_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

// requireRefusedBy asserts that err is ErrStoreRefused, alone, for SQLSTATE code,
// with the server's error in its chain.
func requireRefusedBy(t *testing.T, err error, code string) *ops.StoreRefusedError {
	t.Helper()
	requireClass(t, err, ops.ErrStoreRefused)
	var refused *ops.StoreRefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, code, refused.SQLState, "%v", err)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code)
	return refused
}

// A refusal by the database is its own class: nothing was written, and a
// retry fails the same way until someone fixes the cause.
func TestRefusedByTheDatabase(t *testing.T) {
	t.Parallel()

	t.Run("RoleWithoutGrant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		nobody := dbtest.NewPerson(t, b.db, "")
		// New records the tools' policies, and so meets the refusal first.
		_, err := ops.New(nobody.Pool, ops.Config{Owner: "worker-x", Tools: testTools})
		require.ErrorContains(t, requireRefusedBy(t, err, "42501"), "granted opsdesk_service")
		require.ErrorContains(t, err, "record tool")
		// Without tools there is nothing to record: the calls are refused.
		store, err := ops.New(nobody.Pool, ops.Config{Owner: "worker-x", Tools: map[string]ops.Policy{}})
		require.NoError(t, err)
		_, err = store.Read(b.ctx, ops.Identity{Tenant: "acme", Tool: toolTicket, Key: "k1"})
		requireRefusedBy(t, err, "42501")
		require.Zero(t, b.count(t, `SELECT count(*) FROM opsdesk.operations`))
	})

	t.Run("SchemaMissing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.db.Admin.Exec(b.ctx, `DROP SCHEMA opsdesk CASCADE`)
		require.NoError(t, err)

		_, err = ops.DoTx(b.ctx, b.store, ticketReq("acme", "k1", printer), createTicket("acme", "k1", printer.Title))
		require.ErrorContains(t, requireRefusedBy(t, err, "42P01"), "run opsdesk migrate")
		_, err = ops.DoExternal(b.ctx, b.store, emailReq("k1"), neverCalled[receipt](t))
		requireRefusedBy(t, err, "42P01")
		_, err = b.store.Read(b.ctx, ops.Identity{Tenant: "acme", Tool: toolTicket, Key: "k1"})
		requireRefusedBy(t, err, "42P01")
		require.Zero(t, b.tickets(t))
	})

	t.Run("StateMachineRefusesTakingOverAHeldRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newProvider()
		_, err := ops.DoExternal(b.ctx, b.store, emailReq("k1"), p.failWith(ops.NotApplied(errors.New("declined"))))
		require.ErrorIs(t, err, ops.ErrNotApplied)
		// An admin holds the released record (as the superuser here, for
		// the fixture): the library's takeover does not check holds, the
		// database's state machine does.
		_, err = b.db.Admin.Exec(b.ctx, `UPDATE opsdesk.operations SET held = true WHERE key = 'k1'`)
		require.NoError(t, err)
		before := b.lookup(t, toolEmail, "acme", "k1")

		_, err = ops.DoExternal(b.ctx, b.store, emailReq("k1"), neverCalled[receipt](t))
		require.ErrorContains(t, requireRefusedBy(t, err, "23514"), "legal hold")
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "operations_state_machine", pgErr.ConstraintName)
		after := b.lookup(t, toolEmail, "acme", "k1")
		require.Equal(t, before.Version, after.Version)
		require.Equal(t, ops.StateReleased, after.State)
		require.Len(t, p.attempts("k1"), 1)
	})

	t.Run("BusinessWriteViolatesAConstraint", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.db.Admin.Exec(b.ctx, `CREATE UNIQUE INDEX ON biz.tickets (tenant, title);
INSERT INTO biz.tickets (tenant, key, title) VALUES ('acme', 'by-hand', 'Printer on fire')`)
		require.NoError(t, err)

		_, err = b.doTicket(t, "acme", "k1", printer)
		requireRefusedBy(t, err, "23505")
		require.Equal(t, ops.StateAbsent, b.lookup(t, toolTicket, "acme", "k1").State)
		require.Equal(t, 1, b.tickets(t))

		// An error of fn's own is returned as it is.
		mine := errors.New("no printer")
		_, err = ops.DoTx(b.ctx, b.store, ticketReq("acme", "k2", printer), func(context.Context, pgx.Tx) (ticketResult, error) {
			return ticketResult{}, mine
		})
		require.Same(t, mine, err)
	})
}
