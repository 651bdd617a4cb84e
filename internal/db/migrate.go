// Package db holds what every part of opsdesk needs to reach the operation
// store: the embedded schema migrations and connection pools.
package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Schema is the PostgreSQL schema that holds every opsdesk table.
const Schema = "opsdesk"

// versionTable records the applied migrations, inside the opsdesk schema so
// that nothing of opsdesk lands in public.
const versionTable = Schema + ".schema_migrations"

// migrationLockID is the advisory lock that serializes concurrent migrations
// of one database (advisory locks are per database).
const migrationLockID int64 = 0x6f70736465736b // "opsdesk"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrSchemaBehind means the database has not been migrated to the schema this
// build of opsdesk needs.
var ErrSchemaBehind = errors.New("schema is behind: run opsdesk migrate")

// MigrateResult tells what a migration run did.
type MigrateResult struct {
	// From is the schema version before the run (0: no schema).
	From int64
	// To is the version the run reached.
	To int64
	// Applied lists the migrations this run applied, in order.
	Applied []string
}

// LatestVersion is the schema version this build of opsdesk installs.
func LatestVersion() int64 {
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		// The migrations are embedded at build time: a missing directory
		// is a build defect that every test catches.
		panic(fmt.Sprintf("read embedded migrations: %v", err))
	}
	var latest int64
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			panic(fmt.Sprintf("embedded migration %s: %v", e.Name(), err))
		}
		latest = max(latest, v)
	}
	return latest
}

// Migrate installs or upgrades the opsdesk schema in the database cfg points
// at. It is idempotent and safe to run from several processes at once: runs
// are serialized by an advisory lock and a later run finds nothing to do.
func Migrate(ctx context.Context, cfg *pgx.ConnConfig) (MigrateResult, error) {
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()

	if err := createSchema(ctx, sqlDB); err != nil {
		return MigrateResult{}, err
	}
	p, err := newProvider(sqlDB)
	if err != nil {
		return MigrateResult{}, err
	}
	from, err := p.GetDBVersion(ctx)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("read schema version: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil && !errors.Is(err, goose.ErrNoNextVersion) {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			return MigrateResult{}, fmt.Errorf("migrate as %q: %s; connect as a superuser or the database's owner "+
				"with CREATEROLE, or have an administrator create opsdesk's roles first (README, \"Installing the schema\") "+
				"(nothing was changed: each migration runs in one transaction)", cfg.User, pgErr.Message)
		}
		return MigrateResult{}, fmt.Errorf("migrate: %w", err)
	}
	to, err := p.GetDBVersion(ctx)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("read schema version: %w", err)
	}
	res := MigrateResult{From: from, To: to}
	for _, r := range results {
		res.Applied = append(res.Applied, r.Source.Path)
	}
	return res, nil
}

// CheckSchema returns the database's schema version, and ErrSchemaBehind
// when it is older than LatestVersion.
func CheckSchema(ctx context.Context, q Querier) (int64, error) {
	var exists bool
	err := q.QueryRow(ctx, `SELECT to_regclass('opsdesk.schema_migrations') IS NOT NULL`).Scan(&exists)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, fmt.Errorf("no opsdesk schema in this database: %w", ErrSchemaBehind)
	}
	var version int64
	err = q.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM opsdesk.schema_migrations WHERE is_applied`).Scan(&version)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if latest := LatestVersion(); version < latest {
		return version, fmt.Errorf("schema version %d, this opsdesk needs %d: %w", version, latest, ErrSchemaBehind)
	}
	return version, nil
}

// Querier is the part of a pool, connection or transaction that runs queries.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// createSchema creates the opsdesk schema that the migration version table
// lives in. CREATE SCHEMA IF NOT EXISTS is not safe against a concurrent
// twin, so it runs under the migration lock.
func createSchema(ctx context.Context, sqlDB *sql.DB) error {
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLockID); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	_, err = conn.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+Schema)
	if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLockID); uerr != nil && err == nil {
		err = uerr
	}
	if err != nil {
		return fmt.Errorf("create schema %s: %w", Schema, err)
	}
	return nil
}

func newProvider(sqlDB *sql.DB) (*goose.Provider, error) {
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(migrationLockID),
		// Poll every second for up to ten minutes: a concurrent run
		// usually finishes in well under a second.
		lock.WithLockTimeout(1, 600),
	)
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, sqlDB, fsys,
		goose.WithTableName(versionTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(slog.New(slog.DiscardHandler)),
	)
}
