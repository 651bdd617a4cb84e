package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/pgtime"
)

// ErrBadDSN is a DSN that does not parse. It carries none of pgx's message:
// that quotes the DSN, and its password redaction misses some valid
// spellings (password = x, URLs with @ in the password).
var ErrBadDSN = errors.New("the DSN does not parse: write key=value pairs (host=… dbname=… user=…) " +
	"or a URL (postgres://user@host:5432/dbname); its text is not shown because it may hold a password")

// PoolConfig parses a DSN (URL or keyword/value form, with libpq's
// environment variables as defaults) into a pool configuration that names
// the application in pg_stat_activity. Its connections read every
// timestamptz into a time.Time, 'infinity' and year 294276 included
// (package pgtime): one record a superuser or a backup gave such a time
// made every read of its tenant fail. A caller that sets AfterConnect
// calls the one it replaces.
func PoolConfig(dsn, application string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, ErrBadDSN
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = application
	}
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		pgtime.Register(conn.TypeMap())
		return nil
	}
	return cfg, nil
}

// Open creates a pool from cfg and pings the server, so that an unreachable
// or misconfigured database is an error here rather than at first use.
func Open(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", describe(cfg), err)
	}
	return pool, nil
}

// describe names a server and database without the password.
func describe(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("database %q on %s:%d as %q", c.Database, c.Host, c.Port, c.User)
}
