package storeview

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// What each role may do with migration 00022's summary and 00021's purge
// count, as that role: no role but the triggers' owner writes
// record_conflicts, directly or through its functions (a trigger of the
// role's own on a table it owns, named like the store's, would make
// record_conflicts_track empty or clear the summary on a TRUNCATE); a
// person reads their tenants' rows only; the service reads none; the
// unfinished purge count is a number for roles that see every tenant only;
// and a conflict the service writes without counting it leaves the review's
// figure true.
func TestRecordConflictsAndPurgeCountAsEachRole(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	adminExec(t, d, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at, conflict_count)
SELECT tenant, 'create-ticket', tenant || '-1', '1', sha256(tenant::bytea), 'local', 'completed', 'succeeded', 'w',
    now() - interval '9d', now() - interval '9d', now() - interval '9d', now() - interval '2d', 1
FROM unnest(ARRAY['acme', 'globex']) tenant;
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '1', sha256('other'), fingerprint, 'w' FROM opsdesk.operations;
INSERT INTO opsdesk.purge_runs (role, tool, before, tombstone_for, reason) VALUES ('bob', NULL, now(), '{}', 'unfinished')`)
	requireSummaryTrue(t, d, "fixtures")

	type role struct {
		name string
		pool *pgxpool.Pool
		// sees is the tenants of the rows the role reads (nil: it may not
		// read the table); purges the count it reads (nil: NULL).
		sees   []string
		purges *int64
	}
	one := int64(1)
	roles := []role{
		{"service", d.Service, nil, nil},
		{"viewer of acme", dbtest.NewPerson(t, d, "viewer", "acme").Pool, []string{"acme"}, nil},
		{"viewer of every tenant", dbtest.NewPerson(t, d, "viewer", "*").Pool, []string{"acme", "globex"}, &one},
		{"operator", dbtest.NewPerson(t, d, "operator", "*").Pool, []string{"acme", "globex"}, &one},
		{"admin of acme", dbtest.NewPerson(t, d, "admin", "acme").Pool, []string{"acme"}, nil},
	}
	// Writes each role tries; every one must be refused for want of the
	// privilege (42501), before it changes anything.
	writes := []string{
		`INSERT INTO opsdesk.record_conflicts (tenant, tool, key, unreviewed, tracked, state, held, expires_at)
VALUES ('acme', 'create-ticket', 'forged', true, true, 'completed', false, now() - interval '1d')`,
		`UPDATE opsdesk.record_conflicts SET unreviewed = false`,
		`UPDATE opsdesk.record_conflicts SET held = true WHERE tenant = 'acme'`,
		`DELETE FROM opsdesk.record_conflicts`,
		`TRUNCATE opsdesk.record_conflicts`,
		`SELECT opsdesk.record_conflicts_refresh('acme', 'create-ticket', 'acme-1')`,
		`SELECT opsdesk.record_conflicts_track()`,
		// A table of the role's own, in its temporary schema, named as the
		// store's: the function's TRUNCATE branch would clear every row.
		`CREATE TEMP TABLE conflicts (tenant text, tool text, key text);
CREATE TRIGGER forged AFTER TRUNCATE ON conflicts FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.record_conflicts_track()`,
		`CREATE TEMP TABLE operations (tenant text, tool text, key text);
CREATE TRIGGER forged AFTER INSERT ON operations FOR EACH ROW EXECUTE FUNCTION opsdesk.record_conflicts_track()`,
	}
	for _, r := range roles {
		t.Run(r.name, func(t *testing.T) {
			for _, sql := range writes {
				err := execOnOwnConn(ctx, r.pool, sql)
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr, "%s: %s", r.name, sql)
				require.Equal(t, "42501", pgErr.Code, "%s: %s: %v", r.name, sql, err)
				require.Contains(t, pgErr.Message, "record_conflicts", "refused for the summary, not for a step before it")
			}

			rows, err := r.pool.Query(ctx, `SELECT tenant FROM opsdesk.record_conflicts ORDER BY tenant`)
			require.NoError(t, err)
			tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if r.sees == nil {
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr, "the service reads no summary")
				require.Equal(t, "42501", pgErr.Code)
			} else {
				require.NoError(t, err)
				require.Equal(t, r.sees, tenants, "the policy's tenants")
			}

			var purges *int64
			err = r.pool.QueryRow(ctx, `SELECT opsdesk.unfinished_purge_runs()`).Scan(&purges)
			if r.name == "service" {
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr, "the service may not ask")
				require.Equal(t, "42501", pgErr.Code)
				return
			}
			require.NoError(t, err)
			require.Equal(t, r.purges, purges, "a number for roles that see every tenant only")
		})
	}
	requireSummaryTrue(t, d, "after every role's tries")

	// The one role that writes conflicts by hand, the service, inserting
	// one it does not count (conflict_count stays 0), as a writer other
	// than the library might: the row is untracked and the review reads
	// its record, so the figure still tells the truth.
	adminExec(t, d, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at)
VALUES ('acme', 'create-ticket', 'acme-0', '1', sha256('acme-0'), 'local', 'completed', 'succeeded', 'w',
    now() - interval '9d', now() - interval '9d', now() - interval '9d', now() - interval '2d')`)
	viewer := New(roles[2].pool, Config{})
	requireConflicted(t, d, viewer, "before the service's conflict", map[string]int64{"create-ticket": 2})
	_, err := d.Service.Exec(ctx, `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '1', sha256('uncounted'), fingerprint, 'svc' FROM opsdesk.operations WHERE key = 'acme-0'`)
	require.NoError(t, err)
	requireConflicted(t, d, viewer, "the service's uncounted conflict", map[string]int64{"create-ticket": 3})
}

// execOnOwnConn runs sql (statements separated by semicolons) in a
// transaction of its own that it rolls back, so that temporary tables
// stay with it.
func execOnOwnConn(ctx context.Context, pool *pgxpool.Pool, sql string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, sql)
	return errors.Join(err, ignoreAborted(tx.Rollback(context.WithoutCancel(ctx))))
}

func ignoreAborted(err error) error {
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}
