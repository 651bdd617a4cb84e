package auditcall

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/audited"
)

// TestMapErrorNamesTheGrant: a missing privilege is audited.ErrNotPermitted,
// naming the group role to grant; any other error, the server's or not,
// is left as it is.
func TestMapErrorNamesTheGrant(t *testing.T) {
	t.Parallel()
	denied := fmt.Errorf("call: %w", &pgconn.PgError{Code: pgerrcode.InsufficientPrivilege, Message: "permission denied for function decide"})
	err := MapError(denied, "opsdesk_operator")
	require.ErrorIs(t, err, audited.ErrNotPermitted)
	require.ErrorContains(t, err, "permission denied for function decide (is the role granted opsdesk_operator?")
	for _, other := range []error{&pgconn.PgError{Code: pgerrcode.LockNotAvailable}, errors.New("connection refused"), nil} {
		require.Equal(t, other, MapError(other, "opsdesk_operator"))
	}
	require.Equal(t, pgerrcode.LockNotAvailable, SQLState(fmt.Errorf("x: %w", &pgconn.PgError{Code: pgerrcode.LockNotAvailable})))
	require.Empty(t, SQLState(errors.New("not the server's")))
}
