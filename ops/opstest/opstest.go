// Package opstest gives each test of a service its own fresh, migrated
// opsdesk database on a real PostgreSQL server, with a login granted
// opsdesk_service (and nothing else, so a test proves the service's grants
// suffice) and a ready *ops.Store:
//
//	func TestCreateTicket(t *testing.T) {
//		t.Parallel()
//		db := opstest.New(t, &opstest.Opts{Config: ops.Config{Tools: tools}})
//		out, err := ops.DoTx(t.Context(), db.Store, req, create)
//		…
//	}
//
// The server is, in this order: Opts.DSN; the environment variable
// OPSDESK_TEST_DSN (an administrator's DSN, a superuser's); or, by default,
// a throw-away cluster that opstest starts from the PostgreSQL server
// binaries installed on the machine (initdb and postgres, on PATH or under
// /usr/lib/postgresql/*/bin; Debian/Ubuntu: apt-get install -y postgresql),
// as make test does for opsdesk itself. Nothing is downloaded. The cluster
// listens only on a Unix socket in a temporary directory, runs as the
// postgres (or nobody) OS user when the tests run as root, and is started
// once per test binary, by the first New. Call Main from TestMain to stop it
// and remove its directory when the tests end:
//
//	func TestMain(m *testing.M) { opstest.Main(m) }
//
// Without Main, on Linux the server dies with the test binary and the next
// start removes its directory. A server that cannot be started or reached
// fails the test and says what to install or set; it is never skipped.
//
// Each database is a clone of a template database migrated once per server
// and build of opsdesk, so New is cheap and tests may run with t.Parallel.
// The database and its login are dropped when the test ends. On a server of
// your own, the template, opsdesk_template_v<version>_<digest>, is kept for
// later runs (drop it whenever you like); opsdesk's group roles, which are
// cluster-wide, stay too.
package opstest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbclone"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
	"github.com/opsdesk/opsdesk/ops"
)

// EnvDSN names the environment variable New reads the server's DSN from when
// Opts.DSN is empty.
const EnvDSN = "OPSDESK_TEST_DSN"

// Opts configures New; nil means all defaults.
type Opts struct {
	// DSN connects to the test server as a superuser (URL or key=value).
	// Default: the environment variable OPSDESK_TEST_DSN, else a
	// throw-away cluster started for the test binary.
	DSN string
	// Config configures DB.Store.
	Config ops.Config
}

// DB is one test's fresh opsdesk database.
type DB struct {
	// Name is the database's name.
	Name string
	// AdminDSN and Admin connect as the administrator: for the service's
	// own schema and fixtures, never for what a test proves.
	AdminDSN string
	Admin    *pgxpool.Pool
	// ServiceRole is the login the service connects as, granted
	// opsdesk_service and nothing else: grant your own tables to it (or to
	// opsdesk_service).
	ServiceRole string
	// ServiceDSN connects as ServiceRole.
	ServiceDSN string
	// Pool connects as ServiceRole; Store runs over it.
	Pool  *pgxpool.Pool
	Store *ops.Store
}

// New creates a fresh migrated database for t, a login granted
// opsdesk_service, pools for both and a Store configured with
// opts.Config. Everything is dropped or closed when t ends. A server that
// cannot be started or reached, or a DSN that is not a superuser's, fails t.
func New(t testing.TB, opts *Opts) *DB {
	t.Helper()
	var o Opts
	if opts != nil {
		o = *opts
	}
	dsn, source := serverDSN(t, o.DSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clone, err := dbclone.For(dsn).Create(ctx)
	if err != nil {
		t.Fatalf("opstest: %v (is the server %s names running, and is the DSN a superuser's?)", err, source)
	}
	t.Cleanup(func() {
		if err := clone.Drop(); err != nil {
			t.Errorf("opstest: %v", err)
		}
	})
	d := &DB{Name: clone.Name, AdminDSN: clone.AdminDSN, ServiceRole: clone.ServiceRole, ServiceDSN: clone.ServiceDSN}
	d.Admin = openPool(t, d.AdminDSN, 4)
	d.Pool = openPool(t, d.ServiceDSN, 0)
	if d.Store, err = ops.New(d.Pool, o.Config); err != nil {
		t.Fatalf("opstest: %v", err)
	}
	return d
}

// openPool opens a pool on dsn, closed when t ends; maxConns 0 keeps
// pgxpool's default.
func openPool(t testing.TB, dsn string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := db.PoolConfig(dsn, "opstest")
	if err != nil {
		t.Fatalf("opstest: %v", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("opstest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewEmpty creates a database with no opsdesk schema on the test server
// (opts.DSN, OPSDESK_TEST_DSN or the default cluster, as for New) and
// returns a superuser DSN for it: for testing a service's own migration.
// The database is dropped when t ends.
func NewEmpty(t testing.TB, opts *Opts) string {
	t.Helper()
	var o Opts
	if opts != nil {
		o = *opts
	}
	dsn, source := serverDSN(t, o.DSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clones := dbclone.For(dsn)
	// The template's migration creates opsdesk's cluster-wide roles: made
	// first, they are there before the service migrates its empty database
	// (two first migrations at once on one cluster can collide on them).
	if _, err := clones.Template(); err != nil {
		t.Fatalf("opstest: prepare template database: %v (is the server %s names running, and is the DSN a superuser's?)", err, source)
	}
	empty, err := clones.CreateEmpty(ctx)
	if err != nil {
		t.Fatalf("opstest: %v (is the server %s names running, and is the DSN a superuser's?)", err, source)
	}
	t.Cleanup(func() {
		if err := empty.Drop(); err != nil {
			t.Errorf("opstest: %v", err)
		}
	})
	return empty.AdminDSN
}

// serverDSN is the administrator's DSN of the server t tests on, and what
// named it: dsn, else OPSDESK_TEST_DSN, else the default cluster, started
// if need be. It fails t when there is none.
func serverDSN(t testing.TB, dsn string) (adminDSN, source string) {
	t.Helper()
	source = "Opts.DSN"
	if strings.TrimSpace(dsn) == "" {
		dsn, source = os.Getenv(EnvDSN), EnvDSN
	}
	if strings.TrimSpace(dsn) == "" {
		var err error
		if dsn, err = defaultCluster.dsn(); err != nil {
			t.Fatalf("opstest: no PostgreSQL server to test on: start a throw-away one: %v; "+
				"or set %s to a superuser DSN of a server (for example %s='postgres://postgres@localhost:5432/postgres'), "+
				"or pass Opts.DSN", err, EnvDSN, EnvDSN)
		}
		return dsn, "the throw-away cluster"
	}
	if _, err := db.PoolConfig(dsn, "opstest"); err != nil {
		t.Fatalf("opstest: %s: %v", source, err)
	}
	return dsn, source
}

// Main runs a package's tests (m.Run) and exits with their status, having
// stopped the default cluster, if New started one, and removed its
// directory, whether the tests passed or not. Call it from TestMain:
//
//	func TestMain(m *testing.M) { opstest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := defaultCluster.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "opstest: stop PostgreSQL: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// defaultCluster is the test binary's throw-away cluster, started by the
// first New that has no DSN.
var defaultCluster = &cluster{start: func(ctx context.Context) (*pgcluster.Cluster, error) {
	return pgcluster.Start(ctx, pgcluster.Options{})
}}

// cluster starts a throw-away cluster once and remembers the outcome: a
// server that could not be started is one clear error per test, not one
// start per test.
type cluster struct {
	start func(context.Context) (*pgcluster.Cluster, error)

	mu      sync.Mutex
	started bool
	c       *pgcluster.Cluster
	err     error
}

// dsn starts the cluster unless it was started before, and returns its
// superuser's DSN.
func (c *cluster) dsn() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		c.started = true
		// Not the test's context: the cluster outlives the test.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c.c, c.err = c.start(ctx)
	}
	if c.err != nil {
		return "", c.err
	}
	return c.c.DSN("postgres"), nil
}

// stop stops the cluster, if it was started, and removes its directory.
func (c *cluster) stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return nil
	}
	err := c.c.Stop()
	c.c, c.err = nil, fmt.Errorf("the throw-away cluster was stopped")
	return err
}
