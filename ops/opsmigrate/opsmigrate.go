// Package opsmigrate installs and upgrades the opsdesk schema from Go, and
// tells whether a database's schema is the one this build of the library
// was written for. It runs the same embedded migrations as `opsdesk migrate`.
//
// Migrating needs a connection as a superuser, or as the database's owner
// with CREATEROLE (the first run creates opsdesk's group roles); a service
// then connects as its own login granted opsdesk_service. Migrate is
// idempotent and safe to run from several processes at once, so a service
// may run it at every start with an administrator's pool.
//
// ops.New does no I/O and checks nothing: a service that wants to refuse to
// start on a schema it does not match calls Check (with a role that may read
// the version table, see Check).
package opsmigrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/db"
)

// ErrSchemaBehind means the database's schema is older than this library
// needs (or absent): run Migrate. The library's calls may fail on it.
var ErrSchemaBehind = db.ErrSchemaBehind

// ErrSchemaAhead means a newer opsdesk migrated the database: this build does
// not know what those migrations changed. Migrate refuses to run on it and
// changes nothing; upgrade the library instead.
var ErrSchemaAhead = db.ErrSchemaAhead

// MigrateOpts are Migrate's optional settings; nil means all defaults.
type MigrateOpts struct {
	// Logger receives a record of each migration applied (default: none).
	Logger *slog.Logger
}

// MigrateResult tells what a Migrate call did.
type MigrateResult struct {
	// From is the schema version before the call (0: no opsdesk schema).
	From int64
	// To is the version the call reached; From when nothing was applied.
	To int64
	// Applied names the migration files this call applied, in order;
	// empty when the schema was already current.
	Applied []string
}

// Migrate installs or upgrades the opsdesk schema in the database pool
// reaches, to LatestVersion. A second call, or a concurrent one from another
// process, finds nothing to do. A schema newer than this library is refused
// with ErrSchemaAhead and left as it is.
//
// pool must connect as a superuser, or as the database's owner with
// CREATEROLE (or an owner granted opsdesk_owner once an administrator has
// created the roles); the error says so when it does not. The pool is lent,
// not closed: Migrate holds one of its connections at a time. On an error
// the result still tells what was applied before it.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *MigrateOpts) (MigrateResult, error) {
	if pool == nil {
		return MigrateResult{}, errors.New("opsmigrate: nil pool")
	}
	var logger *slog.Logger
	if opts != nil {
		logger = opts.Logger
	}
	res, err := db.Migrate(ctx, pool, logger)
	out := MigrateResult{From: res.From, To: res.To, Applied: res.Applied}
	if err != nil {
		return out, fmt.Errorf("opsmigrate: %w", err)
	}
	return out, nil
}

// LatestVersion is the schema version this build of the library installs and
// expects.
func LatestVersion() int64 { return db.LatestVersion() }

// SchemaVersion compares a database's schema with this library's.
type SchemaVersion struct {
	// Database is the version the database was migrated to (0: no
	// opsdesk schema).
	Database int64
	// Library is LatestVersion: the version this build expects.
	Library int64
}

// Version reads the database's schema version. It reports and does not
// judge: Check does.
//
// Reading the version table needs the migrating role, a superuser or a role
// granted opsdesk_viewer: opsdesk_service alone may not read it, and the
// error says so.
func Version(ctx context.Context, pool *pgxpool.Pool) (SchemaVersion, error) {
	if pool == nil {
		return SchemaVersion{}, errors.New("opsmigrate: nil pool")
	}
	v := SchemaVersion{Library: db.LatestVersion()}
	var err error
	if v.Database, err = db.SchemaVersion(ctx, pool); err != nil {
		return v, fmt.Errorf("opsmigrate: %w", err)
	}
	return v, nil
}

// Check reads the database's schema version like Version, and returns
// ErrSchemaBehind when it is older than this library's (or absent) and
// ErrSchemaAhead when it is newer. Both are reasons not to start: behind,
// the library's statements may fail; ahead, a newer opsdesk changed what
// this build relies on, and nothing promises that an older library works
// on it. During a rolling upgrade, processes already running are not
// re-checked.
func Check(ctx context.Context, pool *pgxpool.Pool) (SchemaVersion, error) {
	if pool == nil {
		return SchemaVersion{}, errors.New("opsmigrate: nil pool")
	}
	v := SchemaVersion{Library: db.LatestVersion()}
	var err error
	if v.Database, err = db.CheckSchema(ctx, pool); err != nil {
		return v, fmt.Errorf("opsmigrate: %w", err)
	}
	return v, nil
}
