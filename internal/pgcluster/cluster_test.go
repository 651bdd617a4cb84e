package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestStartStop(t *testing.T) {
	c, err := Start(t.Context(), Options{})
	require.NoError(t, err)
	defer c.Stop()

	conn, err := pgx.Connect(t.Context(), c.DSN("postgres"))
	require.NoError(t, err)
	var listen string
	require.NoError(t, conn.QueryRow(t.Context(), `SHOW listen_addresses`).Scan(&listen))
	require.Empty(t, listen, "no TCP port")
	require.NoError(t, conn.Close(context.Background()))

	if os.Geteuid() == 0 {
		st, err := os.Stat(filepath.Join(c.Dir(), "data"))
		require.NoError(t, err)
		require.NotZero(t, st.Sys().(*syscall.Stat_t).Uid, "as root the server runs as an unprivileged user")
	}
	require.NoError(t, c.Stop())
	_, err = os.Stat(c.Dir())
	require.True(t, os.IsNotExist(err), "the cluster directory is removed")
	require.NoError(t, c.Stop(), "stopping twice is harmless")
}

func TestMissingServerSaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findBinDir(filepath.Join(t.TempDir(), "*", "bin"))
	require.ErrorIs(t, err, ErrServerNotInstalled)
	require.Contains(t, err.Error(), "apt-get install -y postgresql")
	require.Contains(t, err.Error(), "OPSDESK_TEST_DSN")
}

func TestAbandonedDirectoriesAreRemoved(t *testing.T) {
	dir, err := os.MkdirTemp("", dirPrefix)
	require.NoError(t, err)
	// A pid far above pid_max: its owner is certainly gone.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(1<<30)), 0o644))
	live, err := os.MkdirTemp("", dirPrefix)
	require.NoError(t, err)
	defer os.RemoveAll(live)
	require.NoError(t, os.WriteFile(filepath.Join(live, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644))

	removeAbandoned()
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err))
	_, err = os.Stat(live)
	require.NoError(t, err, "a live owner's cluster stays")
	require.True(t, strings.HasPrefix(filepath.Base(live), dirPrefix))
}

func TestStopAndKeep(t *testing.T) {
	c, err := Start(t.Context(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(c.Dir()) })
	require.NoError(t, c.StopAndKeep())
	require.NoError(t, c.Stop(), "a kept cluster's Stop is harmless")
	removeAbandoned()
	_, err = os.Stat(filepath.Join(c.Dir(), "data", "PG_VERSION"))
	require.NoError(t, err, "the data directory is kept")
	_, err = os.Stat(filepath.Join(c.Dir(), "data", "postmaster.pid"))
	require.True(t, os.IsNotExist(err), "the server shut down cleanly")
	require.Contains(t, c.StartCommand(), "-D "+filepath.Join(c.Dir(), "data"))
}
