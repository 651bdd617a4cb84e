// Package pgcluster starts a throw-away PostgreSQL cluster from the server
// binaries installed on this machine: tests, benchmarks and the demo use it.
//
// The cluster lives in a temporary directory, listens only on a Unix socket
// in that directory (no TCP port), trusts local connections, and runs as an
// unprivileged OS user when the process runs as root. Nothing is downloaded.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the bootstrap superuser of a throw-away cluster.
const Superuser = "postgres"

// port only names the socket file (.s.PGSQL.5432); nothing listens on TCP.
const port = 5432

// dirPrefix names the temporary directories of clusters, so that a later
// start can remove the ones a killed process left behind.
const dirPrefix = "opsdesk-pg-"

// ErrServerNotInstalled means the PostgreSQL server binaries were not found.
var ErrServerNotInstalled = errors.New("PostgreSQL server binaries (initdb, postgres) not found " +
	"on PATH or under /usr/lib/postgresql/*/bin; install them " +
	"(Debian/Ubuntu: apt-get install -y postgresql; macOS: brew install postgresql) " +
	"or point OPSDESK_TEST_DSN at an existing server")

// Options tune a throw-away cluster.
type Options struct {
	// Durable keeps fsync and synchronous commit on. Tests leave it off:
	// a throw-away cluster need not survive a power cut.
	Durable bool
	// MaxConnections defaults to 200.
	MaxConnections int
}

// Cluster is a throw-away PostgreSQL cluster: its directory and, while it
// runs, its server. Its methods are not safe for concurrent use.
type Cluster struct {
	dir    string
	binDir string
	runAs  *syscall.Credential
	// args are the server's command-line arguments, the same for every
	// start of the cluster.
	args []string
	// srv is the server of the latest start; nil before the first.
	srv  *server
	kept bool
}

// server is one run of the postgres process.
type server struct {
	cmd *exec.Cmd
	// exited is closed once the process has exited; waitErr is its exit
	// status, set before exited closes.
	exited  chan struct{}
	waitErr error
}

// running tells whether the server of the latest start is still up.
func (c *Cluster) running() bool {
	if c.srv == nil {
		return false
	}
	select {
	case <-c.srv.exited:
		return false
	default:
		return true
	}
}

// Start creates and starts a cluster. The caller must call Stop, which also
// removes the cluster's directory.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	binDir, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	removeAbandoned()

	runAs, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	c := &Cluster{dir: dir, binDir: binDir, runAs: runAs}
	if err := c.start(ctx, runAs, opts); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, runAs *syscall.Credential, opts Options) error {
	if err := os.WriteFile(filepath.Join(c.dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("write owner pid: %w", err)
	}
	if runAs != nil {
		// initdb and postgres refuse to run as root: hand the directory to
		// the unprivileged user they run as.
		if err := os.Chown(c.dir, int(runAs.Uid), int(runAs.Gid)); err != nil {
			return fmt.Errorf("hand cluster directory to uid %d: %w", runAs.Uid, err)
		}
	}

	data := filepath.Join(c.dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(c.binDir, "initdb"),
		"--pgdata", data, "--username", Superuser, "--auth", "trust",
		"--encoding", "UTF8", "--no-locale", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: runAs}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}

	maxConns := opts.MaxConnections
	if maxConns == 0 {
		maxConns = 200
	}
	c.args = []string{
		"-D", data,
		"-k", c.dir,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=",
		"-c", "max_connections=" + strconv.Itoa(maxConns),
		"-c", "shared_buffers=128MB",
	}
	if !opts.Durable {
		c.args = append(c.args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	return c.launch(ctx)
}

// launch starts the server on the cluster's data directory and socket and
// waits until it accepts connections.
func (c *Cluster) launch(ctx context.Context) error {
	// Append: a restart keeps the log of the earlier runs.
	logFile, err := os.OpenFile(filepath.Join(c.dir, "postgres.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close()

	// The server runs as our child rather than through pg_ctl, so that the
	// kernel stops it when this process dies (see serverProcAttr). Not
	// CommandContext: the server outlives the start-up context.
	srv := &server{cmd: exec.Command(filepath.Join(c.binDir, "postgres"), c.args...), exited: make(chan struct{})}
	srv.cmd.Stdout = logFile
	srv.cmd.Stderr = logFile
	srv.cmd.SysProcAttr = serverProcAttr(c.runAs)
	c.srv = srv
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that started the
		// server exits, not the process: keep this goroutine on its own
		// thread, alive for as long as the server runs.
		runtime.LockOSThread()
		defer close(srv.exited)
		if err := srv.cmd.Start(); err != nil {
			srv.waitErr = err
			started <- err
			return
		}
		started <- nil
		srv.waitErr = srv.cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	return c.waitReady(ctx)
}

// waitReady connects until the server answers, the server exits, or 60
// seconds pass.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-c.srv.exited:
			return fmt.Errorf("postgres exited during start-up: %v\n%s", c.srv.waitErr, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections: %w\n%s", err, c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DSN returns a keyword/value connection string for a database of the
// cluster, as its superuser.
func (c *Cluster) DSN(database string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", c.dir, port, Superuser, database)
}

// Dir is the cluster's directory: its data, socket and server log.
func (c *Cluster) Dir() string { return c.dir }

// Stop shuts the server down (fast shutdown, then kill after 30 seconds) and
// removes the cluster's directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	err := c.stopServer()
	if c.kept {
		return err
	}
	if rerr := os.RemoveAll(c.dir); rerr != nil && err == nil {
		err = fmt.Errorf("remove cluster directory: %w", rerr)
	}
	return err
}

// StopAndKeep shuts the server down but keeps its directory (data and
// server log) for later inspection: a later Start does not sweep it, and a
// later Stop does not remove it. StartCommand says how to start it again.
func (c *Cluster) StopAndKeep() error {
	err := c.stopServer()
	if rerr := os.Remove(filepath.Join(c.dir, "owner.pid")); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	c.kept = true
	return err
}

// StopServer shuts the server down (fast shutdown: open sessions are
// ended, committed data stays) and keeps the cluster's directory, so that
// StartServer can start it again; tests use it to take the database away
// mid-session. Unlike StopAndKeep it keeps the cluster throw-away: Stop
// still removes the directory, and a later Start of another process still
// sweeps it if this process dies. Stopping a stopped server is harmless.
func (c *Cluster) StopServer() error {
	return c.stopServer()
}

// StartServer starts the server of a cluster stopped by StopServer (or
// StopAndKeep) again, on the same data directory and socket, so DSN is
// unchanged, and waits until it accepts connections. The server again
// stops when this process dies. It is an error while the server runs or
// after Stop removed the directory.
func (c *Cluster) StartServer(ctx context.Context) error {
	if c.running() {
		return errors.New("postgres is already running")
	}
	if _, err := os.Stat(filepath.Join(c.dir, "data", "PG_VERSION")); err != nil {
		return fmt.Errorf("no cluster to start in %s: %w", c.dir, err)
	}
	if err := c.launch(ctx); err != nil {
		// Leave no half-started server behind: the caller may Stop, or
		// try StartServer again.
		_ = c.stopServer()
		return err
	}
	return nil
}

// Restart stops the server (fast shutdown) and starts it again on the same
// data directory and socket, waiting until it accepts connections. Open
// connections are ended; data committed before the restart is kept.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.StopServer(); err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	return c.StartServer(ctx)
}

// StartCommand is a shell command that starts the server of a kept cluster
// again, as the user that owns its data.
func (c *Cluster) StartCommand() string {
	cmd := fmt.Sprintf("%s -D %s -k %s -p %d -c listen_addresses=",
		filepath.Join(c.binDir, "postgres"), filepath.Join(c.dir, "data"), c.dir, port)
	if c.runAs != nil {
		if u, err := user.LookupId(strconv.Itoa(int(c.runAs.Uid))); err == nil {
			cmd = "runuser -u " + u.Username + " -- " + cmd
		}
	}
	return cmd
}

func (c *Cluster) stopServer() error {
	if !c.running() {
		return nil
	}
	srv := c.srv
	_ = srv.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	select {
	case <-srv.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = srv.cmd.Process.Kill()
		<-srv.exited
		return errors.New("postgres did not shut down within 30s and was killed")
	}
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "server log:\n" + strings.Join(lines, "\n")
}

// FindBinDir returns the directory holding initdb and postgres: the one on
// PATH, else the newest under /usr/lib/postgresql (Debian's layout).
func FindBinDir() (string, error) {
	return findBinDir("/usr/lib/postgresql/*/bin")
}

func findBinDir(debianGlob string) (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); hasServer(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(debianGlob)
	slices.SortFunc(dirs, func(a, b string) int { return majorOf(b) - majorOf(a) })
	for _, dir := range dirs {
		if hasServer(dir) {
			return dir, nil
		}
	}
	return "", ErrServerNotInstalled
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// majorOf reads the major version from /usr/lib/postgresql/<major>/bin.
func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// serverUser returns the credential to run the server with: nil when not
// root, else the postgres user, else nobody.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("running as root and neither a postgres nor a nobody user exists to run the server as")
}

// removeAbandoned removes the directories of clusters whose owning process
// is gone (killed before it could call Stop). Their servers died with it:
// see serverProcAttr.
func removeAbandoned() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
