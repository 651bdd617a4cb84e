// Package db holds what every part of opsdesk needs to reach the operation
// store: the embedded schema migrations and connection pools.
package db

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/jackc/pgerrcode"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
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
var ErrSchemaBehind = errors.New("the database's opsdesk schema is older than this opsdesk: " +
	"migrate it (opsdesk migrate, or opsmigrate.Migrate)")

// ErrSchemaAhead means the database's schema was migrated by a newer opsdesk
// than this build: this build does not know what those migrations changed.
var ErrSchemaAhead = errors.New("the database's opsdesk schema is newer than this opsdesk: " +
	"upgrade opsdesk (the library or the command) to the version that migrated it")

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

// MigrationsDigest is a short hex digest of the embedded migrations' names
// and contents: two builds with the same digest install the same schema, so
// a migrated template database can be named after it and reused.
func MigrationsDigest() string {
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		panic(fmt.Sprintf("read embedded migrations: %v", err))
	}
	h := sha256.New()
	for _, e := range entries { // ReadDir sorts by name
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			panic(fmt.Sprintf("read embedded migration %s: %v", e.Name(), err))
		}
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(body))
		h.Write(body)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Migrate installs or upgrades the opsdesk schema in the database pool
// reaches, and refuses (ErrSchemaAhead, changing nothing) a schema a newer
// opsdesk migrated. It is idempotent and safe to run from several processes
// at once: runs are serialized by an advisory lock and a later run finds
// nothing to do. logger (nil: none) receives goose's record of each
// migration.
//
// The pool is lent, not closed; a run holds one of its connections at a
// time, and leaves none of them holding a lock or a changed setting.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (res MigrateResult, err error) {
	user := pool.Config().ConnConfig.User
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close() // the pool stays open

	if err := createSchema(ctx, sqlDB); err != nil {
		return res, fmt.Errorf("%w (nothing was changed)", privilegeHint(user, err))
	}
	p, err := newProvider(sqlDB, logger)
	if err != nil {
		return res, err
	}
	// Reading the version takes the migration lock: a run in progress
	// finishes first.
	if res.From, err = p.GetDBVersion(ctx); err != nil {
		return res, fmt.Errorf("read schema version: %w", privilegeHint(user, err))
	}
	res.To = res.From
	if err := refuseAhead(res.From); err != nil {
		return res, fmt.Errorf("%w (nothing was changed)", err)
	}
	var results []*goose.MigrationResult
	for attempt := 1; ; attempt++ {
		done, err2 := p.Up(ctx)
		var partial *goose.PartialError
		if errors.As(err2, &partial) {
			done = partial.Applied
		}
		results, err = append(results, done...), err2
		// The migration lock is the database's, but roles are the
		// cluster's: a migration of another database on the same cluster
		// may have created the same role or membership meanwhile. The
		// failed migration changed nothing, and run again it finds them.
		if !concurrentRoleChange(err) || attempt == 3 {
			break
		}
	}
	for _, r := range results {
		res.Applied = append(res.Applied, r.Source.Path)
		res.To = r.Source.Version
	}
	if err != nil {
		if len(res.Applied) == 0 {
			return res, fmt.Errorf("migrate (nothing was changed): %w", privilegeHint(user, err))
		}
		return res, fmt.Errorf("migrate: reached version %d, then a migration failed and changed nothing "+
			"(each runs in its own transaction): %w", res.To, privilegeHint(user, err))
	}
	if res.To, err = p.GetDBVersion(ctx); err != nil {
		return res, fmt.Errorf("read schema version: %w", err)
	}
	// A newer opsdesk may have migrated between the first read and Up:
	// Up then found nothing of this build's to apply.
	return res, refuseAhead(res.To)
}

// concurrentRoleChange tells whether err is another session's creation of
// the same role or role membership, on the cluster's catalogs.
func concurrentRoleChange(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == pgerrcode.UniqueViolation && strings.HasPrefix(pgErr.ConstraintName, "pg_auth")
}

// refuseAhead returns ErrSchemaAhead for a version this build does not know.
func refuseAhead(version int64) error {
	if latest := LatestVersion(); version > latest {
		return fmt.Errorf("schema version %d, this opsdesk knows up to %d: %w", version, latest, ErrSchemaAhead)
	}
	return nil
}

// privilegeHint says who may migrate when the server refused a privilege.
func privilegeHint(user string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.InsufficientPrivilege {
		return err
	}
	return fmt.Errorf("migrate as %q: %w; connect as a superuser or the database's owner with CREATEROLE, "+
		"or have an administrator create opsdesk's roles first (README, \"Installing the schema\")", user, err)
}

// SchemaVersion returns the database's schema version: 0 when it has no
// opsdesk schema.
func SchemaVersion(ctx context.Context, q Querier) (int64, error) {
	var exists bool
	err := q.QueryRow(ctx, `SELECT to_regclass('opsdesk.schema_migrations') IS NOT NULL`).Scan(&exists)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var version int64
	err = q.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM opsdesk.schema_migrations WHERE is_applied`).Scan(&version)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InsufficientPrivilege {
		return 0, fmt.Errorf("read schema version: this role may not read opsdesk.schema_migrations "+
			"(opsdesk_viewer and the migrating role may; opsdesk_service may not): %w", err)
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return version, nil
}

// CheckSchema returns the database's schema version, with ErrSchemaBehind
// when it is older than LatestVersion and ErrSchemaAhead when it is newer.
func CheckSchema(ctx context.Context, q Querier) (int64, error) {
	version, err := SchemaVersion(ctx, q)
	if err != nil {
		return 0, err
	}
	if version == 0 {
		return 0, fmt.Errorf("no opsdesk schema in this database: %w", ErrSchemaBehind)
	}
	if latest := LatestVersion(); version < latest {
		return version, fmt.Errorf("schema version %d, this opsdesk needs %d: %w", version, latest, ErrSchemaBehind)
	}
	return version, refuseAhead(version)
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

func newProvider(sqlDB *sql.DB, logger *slog.Logger) (*goose.Provider, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
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
		goose.WithSlog(logger),
	)
}
