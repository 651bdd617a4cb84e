// Package opstest gives each test of a service its own fresh, migrated
// opsdesk database on the PostgreSQL server the service's tests already use,
// with a login granted opsdesk_service (and nothing else, so a test proves
// the service's grants suffice) and a ready *ops.Store:
//
//	func TestCreateTicket(t *testing.T) {
//		t.Parallel()
//		db := opstest.New(t, &opstest.Options{Config: ops.Config{Tools: tools}})
//		out, err := ops.DoTx(t.Context(), db.Store, req, create)
//		…
//	}
//
// The server is named by an administrator's DSN (a superuser's): Options.DSN,
// or else the environment variable OPSDESK_TEST_DSN. Without one, or when the
// server cannot be reached, the test fails and says what to set; it is never
// skipped. opstest starts no server of its own.
//
// Each database is a clone of a template database migrated once per server
// and build of opsdesk, so New is cheap and tests may run with t.Parallel.
// The database and its login are dropped when the test ends. The template,
// opsdesk_template_v<version>_<digest>, is kept for later runs (drop it
// whenever you like); opsdesk's group roles, which are cluster-wide, stay too.
package opstest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbclone"
	"github.com/opsdesk/opsdesk/ops"
)

// EnvDSN names the environment variable New reads the server's DSN from when
// Options.DSN is empty.
const EnvDSN = "OPSDESK_TEST_DSN"

// Options configures New; nil means all defaults.
type Options struct {
	// DSN connects to the test server as a superuser (URL or key=value).
	// Default: the environment variable OPSDESK_TEST_DSN.
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
// cannot be reached, or a DSN that is missing or not a superuser's, fails t.
func New(t testing.TB, opts *Options) *DB {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	dsn, source := o.DSN, "Options.DSN"
	if strings.TrimSpace(dsn) == "" {
		dsn, source = os.Getenv(EnvDSN), EnvDSN
	}
	if strings.TrimSpace(dsn) == "" {
		t.Fatalf("opstest: no PostgreSQL server to test on: set %s to a superuser DSN of the server your tests use "+
			"(for example %s='postgres://postgres@localhost:5432/postgres'), or pass Options.DSN", EnvDSN, EnvDSN)
	}
	if _, err := db.PoolConfig(dsn, "opstest"); err != nil {
		t.Fatalf("opstest: %s: %v", source, err)
	}

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
