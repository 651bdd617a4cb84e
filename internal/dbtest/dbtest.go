// Package dbtest gives every test its own freshly migrated database on a real
// PostgreSQL: a throw-away cluster started for the test binary, or the server
// OPSDESK_TEST_DSN points at.
//
// A package's TestMain calls Main; each test calls New, which clones a
// migrated template database, so tests can run with t.Parallel().
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
)

// EnvDSN names the environment variable that points tests at an existing
// server (as a superuser, or a role that may create databases and roles).
const EnvDSN = "OPSDESK_TEST_DSN"

// server is the test binary's database server, set up by Main.
var server struct {
	adminDSN string
	template string
	seq      atomic.Int64
	// serviceRole is this test binary's login role granted
	// opsdesk_service, with a random password: the library's tests connect
	// as it, never as the superuser, so they prove the grants suffice. It
	// is dropped when the tests end.
	serviceRole     string
	servicePassword string

	mu    sync.Mutex
	drops []func() error // databases Create made, dropped when the tests end
}

// Main runs the package's tests against a throw-away cluster (or
// OPSDESK_TEST_DSN) and exits. The cluster is stopped and removed when the
// tests end, whether they passed or not. A missing server is a failure that
// says how to install one, never a skip.
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
	}
	suffix := randomSuffix()
	server.template = "opsdesk_tmpl_" + suffix
	server.serviceRole = "opsdesk_test_service_" + suffix
	server.servicePassword = randomSuffix() + randomSuffix()
	if err := createTemplate(ctx); err != nil {
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

	dropCtx, dropCancel := context.WithTimeout(context.Background(), time.Minute)
	defer dropCancel()
	if err := exec(dropCtx, server.adminDSN, `DROP DATABASE IF EXISTS `+pgx.Identifier{server.template}.Sanitize()+` WITH (FORCE)`); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: drop template database: %v\n", err)
	}
	if err := exec(dropCtx, server.adminDSN, `DROP ROLE IF EXISTS `+pgx.Identifier{server.serviceRole}.Sanitize()); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: drop role: %v\n", err)
	}
	return code
}

// createTemplate creates and migrates the database every test clones, and
// the login role tests connect as.
func createTemplate(ctx context.Context) error {
	if err := exec(ctx, server.adminDSN, `CREATE DATABASE `+pgx.Identifier{server.template}.Sanitize()); err != nil {
		return err
	}
	dsn, err := WithDatabase(server.adminDSN, server.template, "", "")
	if err != nil {
		return err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	if _, err := db.Migrate(ctx, cfg); err != nil {
		return err
	}
	return exec(ctx, server.adminDSN, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE opsdesk_service`,
		pgx.Identifier{server.serviceRole}.Sanitize(), server.servicePassword))
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
// the pools are left nil. drop removes it; whatever is left is dropped when
// the tests end.
func Create(ctx context.Context) (d *DB, drop func() error, err error) {
	if server.template == "" {
		return nil, nil, errors.New("the package's TestMain must call dbtest.Main")
	}
	name := fmt.Sprintf("opsdesk_test_%s_%d", randomSuffix(), server.seq.Add(1))
	err = exec(ctx, server.adminDSN, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`,
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{server.template}.Sanitize()))
	if err != nil {
		return nil, nil, fmt.Errorf("create database: %w", err)
	}
	drop = sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := exec(ctx, server.adminDSN, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	})
	server.mu.Lock()
	server.drops = append(server.drops, drop)
	server.mu.Unlock()
	d = &DB{Name: name}
	if d.AdminDSN, err = WithDatabase(server.adminDSN, name, "", ""); err == nil {
		d.ServiceDSN, err = WithDatabase(server.adminDSN, name, server.serviceRole, server.servicePassword)
	}
	if err != nil {
		return nil, nil, errors.Join(err, drop())
	}
	return d, drop, nil
}

// Pool opens a pool on dsn with an empty search_path, closed when t ends.
func Pool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := db.PoolConfig(dsn, "opsdesk-test")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = ""
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
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvDSN, err)
		}
		u.Path = "/" + database
		if user != "" {
			u.User = url.UserPassword(user, password)
		}
		return u.String(), nil
	}
	// In keyword/value form a later keyword overrides an earlier one.
	out := dsn + " dbname=" + quote(database)
	if user != "" {
		out += " user=" + quote(user) + " password=" + quote(password)
	}
	return out, nil
}

func quote(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

func exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b)
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
	ctx := context.Background()
	p := &Person{Role: fmt.Sprintf("opsdesk_test_%s_%s_%d", kind, randomSuffix(), server.seq.Add(1))}
	password := randomSuffix() + randomSuffix()
	sql := fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, pgx.Identifier{p.Role}.Sanitize(), password)
	if group != "" {
		sql += " IN ROLE " + pgx.Identifier{group}.Sanitize()
	}
	if _, err := d.Admin.Exec(ctx, sql); err != nil {
		t.Fatalf("dbtest: create %s: %v", kind, err)
	}
	t.Cleanup(func() {
		if _, err := d.Admin.Exec(context.Background(), `DROP ROLE `+pgx.Identifier{p.Role}.Sanitize()); err != nil {
			t.Errorf("dbtest: drop %s: %v", kind, err)
		}
	})
	var err error
	if p.DSN, err = WithDatabase(server.adminDSN, d.Name, p.Role, password); err != nil {
		t.Fatal(err)
	}
	p.Pool = Pool(t, p.DSN)
	return p
}
