package audited

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestRefusalsMatchTheirCode: a refusal's code is the error errors.Is
// finds, whatever wraps it; a code this build does not know matches none.
func TestRefusalsMatchTheirCode(t *testing.T) {
	t.Parallel()
	for code, want := range codes {
		err := fmt.Errorf("wrapped: %w", Result{Outcome: Denied, Code: code, Tenant: "acme", Entry: 3}.Err())
		require.ErrorIs(t, err, want, code)
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Contains(t, err.Error(), "acme entry 3 (queued", code)
	}
	err := Result{Outcome: FailedOut, Code: "from_the_future", Tenant: "", Seq: 9}.Err()
	for _, known := range codes {
		require.NotErrorIs(t, err, known)
	}
	require.Contains(t, err.Error(), "audit record #9")
	require.NoError(t, Result{Outcome: Succeeded}.Err())
}

// TestMapErrorNamesTheGrant: a missing privilege is ErrNotPermitted,
// naming the group role to grant; any other error, the server's or not,
// is left as it is.
func TestMapErrorNamesTheGrant(t *testing.T) {
	t.Parallel()
	denied := fmt.Errorf("call: %w", &pgconn.PgError{Code: pgerrcode.InsufficientPrivilege, Message: "permission denied for function decide"})
	err := MapError(denied, "opsdesk_operator")
	require.ErrorIs(t, err, ErrNotPermitted)
	require.ErrorContains(t, err, "permission denied for function decide (is the role granted opsdesk_operator?")
	for _, other := range []error{&pgconn.PgError{Code: pgerrcode.LockNotAvailable}, errors.New("connection refused"), nil} {
		require.Equal(t, other, MapError(other, "opsdesk_operator"))
	}
	require.Equal(t, pgerrcode.LockNotAvailable, SQLState(fmt.Errorf("x: %w", &pgconn.PgError{Code: pgerrcode.LockNotAvailable})))
	require.Empty(t, SQLState(errors.New("not the server's")))
}

// TestTenantNameQuotesWhatWouldReadAlike: the ” chain, and names with
// spaces or invisible characters, cannot be mistaken for another chain.
func TestTenantNameQuotesWhatWouldReadAlike(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "''", "acme": "acme", "ac me": `"ac me"`, "acme\u200b": `"acme\u200b"`, "a\xffb": `"a\xffb"`} {
		require.Equal(t, want, TenantName(in), "%q", in)
	}
}
