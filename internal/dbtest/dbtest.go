// Package dbtest gives every test its own freshly migrated database on a real
// PostgreSQL: a throw-away cluster started for the test binary, or the server
// OPSDESK_TEST_DSN points at (make test points it at one throw-away cluster
// for every package: internal/pgcluster/testserver).
//
// A package's TestMain calls Main; each test calls New, which clones a
// migrated template database, so tests can run with t.Parallel(). The
// template and the clones come from internal/dbclone, which ops/opstest (the
// helper for services' tests) shares.
package dbtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbclone"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
)

// EnvDSN names the environment variable that points tests at an existing
// server (as a superuser, or a role that may create databases and roles).
const EnvDSN = "OPSDESK_TEST_DSN"

// server is the test binary's database server, set up by Main.
var server struct {
	adminDSN string
	clones   *dbclone.Server

	mu    sync.Mutex
	drops []func() error // databases Create made, dropped when the tests end

	// own is the cluster of NewOnOwnCluster, started by its first call.
	own struct {
		once    sync.Once
		cluster *pgcluster.Cluster
		clones  *dbclone.Server
		err     error
	}
}

// Main runs the package's tests against a throw-away cluster (or
// OPSDESK_TEST_DSN) and exits. The cluster is stopped and removed when the
// tests end, whether they passed or not. A missing server is a failure that
// says how to install one, never a skip.
//
// Main sets OPSDESK_TEST_DSN to the cluster it started, so that ops/opstest,
// which reads it as a service's tests would, uses the same server.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	server.adminDSN = os.Getenv(EnvDSN)
	if server.adminDSN == "" {
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: start PostgreSQL: %v\n", err)
			return 1
		}
		defer func() {
			if err := cluster.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "dbtest: stop PostgreSQL: %v\n", err)
			}
		}()
		server.adminDSN = cluster.DSN("postgres")
		if err := os.Setenv(EnvDSN, server.adminDSN); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
			return 1
		}
	}
	server.clones = dbclone.For(server.adminDSN)
	// Migrating the template once here, before any test, makes a broken
	// migration one clear failure instead of one per test.
	if _, err := server.clones.Template(); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: prepare template database: %v\n", err)
		return 1
	}
	cancel()
	code := m.Run()

	server.mu.Lock()
	for _, drop := range server.drops {
		if err := drop(); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
		}
	}
	server.mu.Unlock()
	if c := server.own.cluster; c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: stop the own cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// DB is one test's database.
type DB struct {
	// Name is the database's name.
	Name string
	// AdminDSN connects as the superuser: for setting up fixtures and
	// inspecting results, never for what a test proves about privileges.
	AdminDSN string
	// ServiceDSN connects as a login role granted opsdesk_service.
	ServiceDSN string
	// Admin and Service are pools for the two DSNs. Both set an empty
	// search_path, so a query that forgets the opsdesk schema fails.
	Admin   *pgxpool.Pool
	Service *pgxpool.Pool

	// clones is the server d is on, where its people's logins are made.
	clones *dbclone.Server
}

// New creates a fresh migrated database for t, dropped when t ends.
func New(t testing.TB) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, drop, err := Create(ctx)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return opened(t, d, drop)
}

// NewOnOwnCluster is New on a throw-away cluster of this test binary's own,
// which no other test binary shares (make test hands one server to every
// package's tests): for a test that counts what is cluster-wide, such as the
// login roles that can bypass the database, which another package's tests
// make and drop meanwhile. Cluster-wide things are still shared with the
// package's other tests that call it. The cluster is started by the first
// call and stopped when the tests end.
func NewOnOwnCluster(t testing.TB) *DB {
	t.Helper()
	if server.clones == nil {
		t.Fatal("dbtest: the package's TestMain must call dbtest.Main")
	}
	own := &server.own
	own.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if own.cluster, own.err = pgcluster.Start(ctx, pgcluster.Options{}); own.err != nil {
			return
		}
		own.clones = dbclone.For(own.cluster.DSN("postgres"))
	})
	if own.err != nil {
		t.Fatalf("dbtest: start a cluster of the test's own: %v", own.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := own.clones.Create(ctx)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return opened(t, &DB{Name: c.Name, AdminDSN: c.AdminDSN, ServiceDSN: c.ServiceDSN, clones: own.clones}, c.Drop)
}

// opened opens d's pools and drops d when t ends.
func opened(t testing.TB, d *DB, drop func() error) *DB {
	t.Helper()
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("dbtest: %v", err)
		}
	})
	d.Admin = Pool(t, d.AdminDSN)
	d.Service = Pool(t, d.ServiceDSN)
	return d
}

// Create creates a fresh migrated database outside a test (for examples);
// the pools are left nil. drop removes it and its service login; whatever is
// left is dropped when the tests end.
func Create(ctx context.Context) (d *DB, drop func() error, err error) {
	if server.clones == nil {
		return nil, nil, errors.New("the package's TestMain must call dbtest.Main")
	}
	c, err := server.clones.Create(ctx)
	if err != nil {
		return nil, nil, err
	}
	dropAtExit(c.Drop)
	return &DB{Name: c.Name, AdminDSN: c.AdminDSN, ServiceDSN: c.ServiceDSN, clones: server.clones}, c.Drop, nil
}

// CreateEmpty creates a database with no opsdesk schema, for tests and
// examples of migrating, and returns a superuser DSN for it. drop removes
// it; whatever is left is dropped when the tests end.
func CreateEmpty(ctx context.Context) (adminDSN string, drop func() error, err error) {
	if server.clones == nil {
		return "", nil, errors.New("the package's TestMain must call dbtest.Main")
	}
	c, err := server.clones.CreateEmpty(ctx)
	if err != nil {
		return "", nil, err
	}
	dropAtExit(c.Drop)
	return c.AdminDSN, c.Drop, nil
}

// dropAtExit makes Main call drop when the tests end: a database an example
// made, or one a test left behind when it crashed, goes then.
func dropAtExit(drop func() error) {
	server.mu.Lock()
	defer server.mu.Unlock()
	server.drops = append(server.drops, drop)
}

// Pool opens a pool on dsn with an empty search_path, closed when t ends.
func Pool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	return openPool(t, dsn, nil)
}

// LosingPool opens a pool as p, like p.Pool, whose session is ended (by
// the superuser: pg_terminate_backend) just before each statement that
// holds match is sent: a connection lost mid-way, on a real server, at a
// point the test chooses.
func LosingPool(t testing.TB, d *DB, p *Person, match string) *pgxpool.Pool {
	t.Helper()
	return openPool(t, p.DSN, losing{admin: d.Admin, match: match})
}

// losing is LosingPool's tracer.
type losing struct {
	admin *pgxpool.Pool
	match string
}

func (l losing) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, l.match) {
		// Waits (up to 10 s) until the session is gone; the statement
		// then fails on a closed connection.
		_, _ = l.admin.Exec(context.Background(), `SELECT pg_terminate_backend($1, 10000)`, conn.PgConn().PID())
	}
	return ctx
}

func (losing) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func openPool(t testing.TB, dsn string, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := db.PoolConfig(dsn, "opsdesk-test")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = ""
	cfg.ConnConfig.Tracer = tracer
	cfg.MaxConns = 16
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// WithDatabase returns dsn with its database replaced, and its user and
// password too when user is not empty. It understands both URL and
// keyword/value DSNs.
func WithDatabase(dsn, database, user, password string) (string, error) {
	return dbclone.WithDatabase(dsn, database, user, password)
}

// Person is a login role for one person, granted one of opsdesk's group
// roles, as `opsdesk access grant` would make it (or, from NewService, a
// service's login).
type Person struct {
	Role string
	DSN  string
	Pool *pgxpool.Pool
}

// NewPerson creates a login role in d's cluster with a random password,
// granted opsdesk_<level> (viewer, operator or admin; "" grants nothing)
// and mapped to tenants ("*": every tenant). Tests of what people may do
// connect as it, never as the superuser. It is dropped when t ends.
func NewPerson(t testing.TB, d *DB, level string, tenants ...string) *Person {
	t.Helper()
	group := ""
	if level != "" {
		group = "opsdesk_" + level
	}
	p := newLogin(t, d, "person", group)
	for _, tenant := range tenants {
		_, err := d.Admin.Exec(context.Background(), `INSERT INTO opsdesk.access (role, tenant, granted_by) VALUES ($1, $2, 'dbtest')`, p.Role, tenant)
		if err != nil {
			t.Fatalf("dbtest: map person to tenant: %v", err)
		}
	}
	return p
}

// NewService creates a second service login in d's cluster, granted
// opsdesk_service like d.Service's but a different role: tests of what one
// service may do to another's leases connect as it. It is dropped when t
// ends.
func NewService(t testing.TB, d *DB) *Person {
	t.Helper()
	return newLogin(t, d, "service", "opsdesk_service")
}

// newLogin creates a login role with a random password, granted group
// unless it is "", and a pool connected as it; both go when t ends.
func newLogin(t testing.TB, d *DB, kind, group string) *Person {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clones := d.clones
	if clones == nil { // a DB made by hand: the binary's server
		clones = server.clones
	}
	l, err := clones.NewLogin(ctx, d.Name, kind, group)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Drop(); err != nil {
			t.Errorf("dbtest: %v", err)
		}
	})
	return &Person{Role: l.Name, DSN: l.DSN, Pool: Pool(t, l.DSN)}
}
