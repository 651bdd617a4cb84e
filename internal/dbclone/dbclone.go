// Package dbclone hands out fresh, migrated opsdesk databases on a
// PostgreSQL server, each with its own login granted opsdesk_service: clones
// of a template database migrated once. ops/opstest (services' tests) and
// internal/dbtest (opsdesk's own) are built on it.
//
// The template is named after the embedded migrations' digest and kept on
// the server, so that later test runs of the same build clone it instead of
// migrating again; a build whose migrations differ makes its own. Test
// binaries sharing a server wait for one another while it is built.
package dbclone

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/internal/db"
)

// templateLockID serializes test binaries building the template on one
// server (advisory locks are per database: every binary locks in the admin
// DSN's database).
const templateLockID int64 = 0x6f70737465737431 // "opstest1"

// Server is a PostgreSQL server reached through an administrator's DSN (a
// superuser, or a role with CREATEDB and CREATEROLE).
type Server struct {
	adminDSN string
	template string
	ready    func() error
	seq      atomic.Int64
}

var servers sync.Map // admin DSN → *Server

// For returns the Server of adminDSN: the same one for every call with that
// DSN in this process, so its template is looked for once.
func For(adminDSN string) *Server {
	if s, ok := servers.Load(adminDSN); ok {
		return s.(*Server)
	}
	s := newServer(adminDSN, fmt.Sprintf("opsdesk_template_v%d_%s", db.LatestVersion(), db.MigrationsDigest()))
	actual, _ := servers.LoadOrStore(adminDSN, s)
	return actual.(*Server)
}

func newServer(adminDSN, template string) *Server {
	s := &Server{adminDSN: adminDSN, template: template}
	s.ready = sync.OnceValue(s.createTemplate)
	return s
}

// Template makes sure the migrated template exists and returns its name.
func (s *Server) Template() (string, error) {
	return s.template, s.ready()
}

// createTemplate migrates the template unless a test binary already did. It
// is built under another name and renamed when complete, so a binary killed
// while building leaves nothing that looks finished.
func (s *Server) createTemplate() (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return fmt.Errorf("connect to the test server: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLockID); err != nil {
		return fmt.Errorf("wait for other test binaries: %w", err)
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, templateLockID); uerr != nil && err == nil {
			err = uerr
		}
	}()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, s.template).Scan(&exists); err != nil {
		return fmt.Errorf("look for template database: %w", err)
	}
	if exists {
		return nil
	}
	build := pgx.Identifier{s.template + "_build"}.Sanitize()
	for _, sql := range []string{
		`DROP DATABASE IF EXISTS ` + build + ` WITH (FORCE)`, // left by a killed binary
		`CREATE DATABASE ` + build,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("create template database: %w", err)
		}
	}
	if err := s.migrate(ctx, s.template+"_build"); err != nil {
		return err
	}
	for _, sql := range []string{
		// Nobody may connect to it: a connection would make every clone
		// fail ("source database is being accessed by other users").
		`ALTER DATABASE ` + build + ` WITH ALLOW_CONNECTIONS false`,
		`ALTER DATABASE ` + build + ` RENAME TO ` + pgx.Identifier{s.template}.Sanitize(),
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("finish template database: %w", err)
		}
	}
	return nil
}

// migrate migrates database as the administrator and closes every
// connection it opened, so that the database can be renamed.
func (s *Server) migrate(ctx context.Context, database string) error {
	dsn, err := WithDatabase(s.adminDSN, database, "", "")
	if err != nil {
		return err
	}
	cfg, err := db.PoolConfig(dsn, "opsdesk-test")
	if err != nil {
		return err
	}
	cfg.MaxConns = 2
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := db.Migrate(ctx, pool, nil); err != nil {
		return fmt.Errorf("migrate template database: %w", err)
	}
	return nil
}

// Database is a fresh migrated database and the login made for it.
type Database struct {
	// Name is the database's name.
	Name string
	// AdminDSN connects to it as the server's administrator.
	AdminDSN string
	// ServiceRole is a login granted opsdesk_service and nothing else.
	ServiceRole string
	// ServiceDSN connects to it as ServiceRole.
	ServiceDSN string
	// Drop drops the database, then the login. Later calls return the
	// first call's error.
	Drop func() error
}

// Create clones the template into a fresh database and creates its service
// login. Drop removes both.
func (s *Server) Create(ctx context.Context) (*Database, error) {
	if err := s.ready(); err != nil {
		return nil, fmt.Errorf("prepare template database: %w", err)
	}
	d := &Database{Name: fmt.Sprintf("opsdesk_test_%s_%d", randomHex(4), s.seq.Add(1))}
	// The login comes first and goes last: the database (and whatever a
	// test made the login own in it) is dropped before it.
	role, err := s.NewLogin(ctx, d.Name, "service", "opsdesk_service")
	if err != nil {
		return nil, err
	}
	d.ServiceRole, d.ServiceDSN = role.Name, role.DSN
	if d.AdminDSN, err = WithDatabase(s.adminDSN, d.Name, "", ""); err != nil {
		return nil, errors.Join(err, role.Drop())
	}
	err = s.exec(ctx, `CREATE DATABASE `+pgx.Identifier{d.Name}.Sanitize()+` TEMPLATE `+pgx.Identifier{s.template}.Sanitize())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create database: %w", err), role.Drop())
	}
	d.Drop = sync.OnceValue(func() error {
		if err := s.dropDatabase(d.Name); err != nil {
			return err
		}
		return role.Drop()
	})
	return d, nil
}

// CreateEmpty creates a database with no opsdesk schema, for tests of
// migrating; its Service fields are empty. Drop removes it.
func (s *Server) CreateEmpty(ctx context.Context) (*Database, error) {
	d := &Database{Name: fmt.Sprintf("opsdesk_empty_%s_%d", randomHex(4), s.seq.Add(1))}
	var err error
	if d.AdminDSN, err = WithDatabase(s.adminDSN, d.Name, "", ""); err != nil {
		return nil, err
	}
	if err := s.exec(ctx, `CREATE DATABASE `+pgx.Identifier{d.Name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	d.Drop = sync.OnceValue(func() error { return s.dropDatabase(d.Name) })
	return d, nil
}

// dropDatabase drops a database, closing the sessions still connected to it.
func (s *Server) dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// Login is a login role with a random password.
type Login struct {
	// Name is the role's name.
	Name string
	// DSN connects as it to the database it was made for.
	DSN string
	// Drop drops the role; later calls return the first call's error.
	Drop func() error
}

// NewLogin creates a login role named opsdesk_test_<kind>_…, granted group
// unless it is "", with a DSN for database.
func (s *Server) NewLogin(ctx context.Context, database, kind, group string) (*Login, error) {
	l := &Login{Name: fmt.Sprintf("opsdesk_test_%s_%s_%d", kind, randomHex(4), s.seq.Add(1))}
	password := randomHex(16)
	var err error
	if l.DSN, err = WithDatabase(s.adminDSN, database, l.Name, password); err != nil {
		return nil, err
	}
	sql := fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, pgx.Identifier{l.Name}.Sanitize(), password)
	if group != "" {
		sql += " IN ROLE " + pgx.Identifier{group}.Sanitize()
	}
	if err := s.exec(ctx, sql); err != nil {
		return nil, fmt.Errorf("create %s login: %w", kind, err)
	}
	l.Drop = sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.exec(ctx, `DROP ROLE IF EXISTS `+pgx.Identifier{l.Name}.Sanitize()); err != nil {
			return fmt.Errorf("drop role %s: %w", l.Name, err)
		}
		return nil
	})
	return l, nil
}

// exec runs one statement on a connection of its own to the admin DSN's
// database: CREATE and DROP DATABASE cannot run in the database they name.
func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return fmt.Errorf("connect to the test server: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// WithDatabase returns dsn with its database replaced, and its user and
// password too when user is not empty. It understands both URL and
// keyword/value DSNs.
func WithDatabase(dsn, database, user, password string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", db.ErrBadDSN // url's error quotes the DSN, password and all
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b)
}
