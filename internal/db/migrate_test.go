package db_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The migrate tests are in ops/opsmigrate: every caller (the command, the
// demo, the tests' template) migrates through it.

func TestServiceRoleIsNotALoginRole(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	var canLogin bool
	require.NoError(t, d.Admin.QueryRow(t.Context(),
		`SELECT rolcanlogin FROM pg_roles WHERE rolname = 'opsdesk_service'`).Scan(&canLogin))
	require.False(t, canLogin)
}

func TestBadDSNNeverShowsThePassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"host=h password = Hunter2Secret port=abc",
		"postgres://u:Hunter2@Secret@h:x/db",
		`host=h password=Hunter2\ Secret port=x`,
		"postgres://u:Hunter2Secret@[bad",
		"host=h password='Hunter2Secret' sslmode=bogus",
	} {
		_, err := db.PoolConfig(dsn, "test")
		require.ErrorIs(t, err, db.ErrBadDSN, dsn)
		for _, secret := range []string{"Hunter2", "Secret"} {
			require.NotContains(t, err.Error(), secret)
		}
	}
}
