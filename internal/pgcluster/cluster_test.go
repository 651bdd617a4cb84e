package pgcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// helperEnv makes the test binary a process that owns a restarted cluster
// and never stops it (see TestRestartedServerDiesWithItsOwner).
const helperEnv = "OPSDESK_PGCLUSTER_OWNER_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		ownRestartedCluster()
		return
	}
	os.Exit(m.Run())
}

// ownRestartedCluster starts a cluster, restarts it from a goroutine that
// then ends, prints the cluster's directory and server pid, and waits to
// be killed.
func ownRestartedCluster() {
	ctx := context.Background()
	c, err := Start(ctx, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	done := make(chan error)
	go func() {
		// A caller on a locked thread that ends with its goroutine must
		// not take the restarted server with it.
		runtime.LockOSThread()
		done <- c.Restart(ctx)
	}()
	if err := <-done; err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(c.Dir(), c.srv.cmd.Process.Pid)
	select {}
}

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

// TestRestart: data committed before a restart is there after it, on the
// same DSN; the server is a new process; Stop after a restart stops it and
// removes the directory.
func TestRestart(t *testing.T) {
	c, err := Start(t.Context(), Options{})
	require.NoError(t, err)
	defer c.Stop()
	dsn := c.DSN("postgres")

	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), `CREATE TABLE survivor (v text); INSERT INTO survivor VALUES ('before')`)
	require.NoError(t, err)
	postmaster := serverPID(t, c)

	require.NoError(t, c.Restart(t.Context()))
	restarted := serverPID(t, c)
	require.NotEqual(t, postmaster, restarted, "a new server process")
	require.Equal(t, dsn, c.DSN("postgres"), "the same socket")
	_, err = conn.Exec(t.Context(), `SELECT 1`)
	require.Error(t, err, "a session open across the restart is ended")
	_ = conn.Close(context.Background())

	conn, err = pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var v string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT v FROM survivor`).Scan(&v))
	require.Equal(t, "before", v, "the table created before the restart is there after it")
	log, err := os.ReadFile(filepath.Join(c.Dir(), "postgres.log"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, strings.Count(string(log), "database system is ready to accept connections"), 2,
		"the log keeps the first run's lines")
	require.NoError(t, conn.Close(context.Background()))

	require.NoError(t, c.Stop())
	require.False(t, alive(restarted), "Stop after a restart stops the restarted server")
	_, err = os.Stat(c.Dir())
	require.True(t, os.IsNotExist(err), "Stop after a restart removes the directory")
	require.Error(t, c.StartServer(t.Context()), "nothing to start once Stop removed the cluster")
}

// TestStopServerStartServer: the server can be taken away and brought back
// later; while it is down connections fail, the directory stays and stays
// the process's own (a sweep leaves it), and the data survives.
func TestStopServerStartServer(t *testing.T) {
	c, err := Start(t.Context(), Options{})
	require.NoError(t, err)
	defer c.Stop()
	dsn := c.DSN("postgres")
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), `CREATE TABLE survivor (v text); INSERT INTO survivor VALUES ('before')`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(context.Background()))

	require.Error(t, c.StartServer(t.Context()), "the server is already running")
	for range 2 {
		require.NoError(t, c.StopServer())
		require.NoError(t, c.StopServer(), "stopping a stopped server is harmless")
		_, err = pgx.Connect(t.Context(), dsn)
		require.Error(t, err, "no server while stopped")
		removeAbandoned()
		_, err = os.Stat(filepath.Join(c.Dir(), "data", "PG_VERSION"))
		require.NoError(t, err, "the data directory stays while the server is stopped")
		_, err = os.Stat(filepath.Join(c.Dir(), "data", "postmaster.pid"))
		require.True(t, os.IsNotExist(err), "the server shut down cleanly")

		require.NoError(t, c.StartServer(t.Context()))
		conn, err = pgx.Connect(t.Context(), dsn)
		require.NoError(t, err, "StartServer returns once the server accepts connections")
		var v string
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT v FROM survivor`).Scan(&v))
		require.Equal(t, "before", v)
		require.NoError(t, conn.Close(context.Background()))
	}
	require.NoError(t, c.Stop())
	_, err = os.Stat(c.Dir())
	require.True(t, os.IsNotExist(err), "Stop removes the directory")
}

// serverPID is the postmaster's process id.
func serverPID(t *testing.T, c *Cluster) int {
	t.Helper()
	require.True(t, c.running())
	return c.srv.cmd.Process.Pid
}

// TestRestartedServerDiesWithItsOwner: a restarted server still stops when
// the process that owns it dies without calling Stop (the parent-death
// signal of the first start), and it outlives the goroutine that called
// Restart.
func TestRestartedServerDiesWithItsOwner(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	owner := exec.Command(os.Args[0], "-test.run=^$")
	owner.Env = append(os.Environ(), helperEnv+"=1")
	out, err := owner.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, owner.Start())
	t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	var dir string
	var pid int
	_, err = fmt.Sscan(line, &dir, &pid)
	require.NoError(t, err, "the owner said %q", line)
	require.True(t, strings.HasPrefix(filepath.Base(dir), dirPrefix), "the owner said %q", line)
	t.Cleanup(func() { os.RemoveAll(dir) })

	// The restarted server answers after the goroutine that restarted it
	// ended (and its locked thread with it).
	c := &Cluster{dir: dir}
	conn, err := pgx.Connect(t.Context(), c.DSN("postgres"))
	require.NoError(t, err)
	require.NoError(t, conn.Close(context.Background()))

	require.NoError(t, owner.Process.Kill())
	_ = owner.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the restarted server (pid %d) outlived its owner", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive tells whether a process runs (a zombie waiting for its new
// parent to reap it does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}
