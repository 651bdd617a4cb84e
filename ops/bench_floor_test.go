package ops

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkCreateFloor measures what a redesign of the create path could
// reach (issue 20 §1): DoTx's statements (the peek, BEGIN, the business
// insert, the record's insert sent with COMMIT) against a record table
// narrower than opsdesk.operations, with the guarantees added back one at
// a time, beside NaiveCreate and RawCreate in the same process. No library
// code runs in the narrow variants, so each is an upper bound for a design
// that keeps completed local records in such a table:
//
//   - Narrow: (tenant, tool, key) primary key, the columns a replay reads,
//     no other index, no row-level security, no trigger;
//   - NarrowRLS: row-level security forced, the service policy as on
//     operations;
//   - NarrowRLSTrigger: and a BEFORE INSERT trigger in PL/pgSQL that checks
//     six of the rules a completed insert must keep, as the state
//     machine's insert path does (fewer than it checks: a lower bound of
//     its cost);
//   - NarrowAll: and the console's indexes of completed records (by id,
//     by expiry, by tenant, tool and expiry).
//
// Run it alone, every variant once per round, and quote each one's ratio
// to Naive in the same round (docs/benchmarks.md, issue 20, seventh
// session):
//
//	for r in 1 2 3; do go test ./ops -run '^$' -bench CreateFloor -benchtime 3s -count 1; done
func BenchmarkCreateFloor(b *testing.B) {
	b.Run("Naive", BenchmarkNaiveCreate)
	b.Run("Raw", BenchmarkRawCreate)
	// Each variant adds its part to the one before.
	var ddl string
	for _, v := range []struct{ name, part string }{
		{"Narrow", ""},
		{"NarrowRLS", floorRLS},
		{"NarrowRLSTrigger", floorTrigger},
		{"NarrowAll", floorIndexes},
	} {
		ddl += v.part
		b.Run(v.name, func(b *testing.B) { benchNarrowCreate(b, ddl) })
	}
}

const floorRLS = `
ALTER TABLE biz.completed ENABLE ROW LEVEL SECURITY;
ALTER TABLE biz.completed FORCE ROW LEVEL SECURITY;
CREATE POLICY service ON biz.completed TO opsdesk_service USING (true) WITH CHECK (true);`

const floorTrigger = `
CREATE FUNCTION biz.completed_rules() RETURNS trigger LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp' AS $$
BEGIN
    IF octet_length(NEW.key) NOT BETWEEN 1 AND 255 OR octet_length(NEW.fingerprint) <> 32
       OR NEW.outcome NOT IN ('succeeded', 'rejected')
       OR NEW.created_at NOT BETWEEN clock_timestamp() - interval '10 seconds' AND clock_timestamp()
       OR NEW.expires_at NOT BETWEEN NEW.created_at AND NEW.created_at + interval '100 years'
       OR NEW.owner_role IS DISTINCT FROM session_user THEN
        RAISE EXCEPTION 'completed record breaks a rule' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER completed_rules BEFORE INSERT ON biz.completed FOR EACH ROW EXECUTE FUNCTION biz.completed_rules();
ALTER TABLE biz.completed ENABLE ALWAYS TRIGGER completed_rules;`

const floorIndexes = `
CREATE INDEX ON biz.completed (id);
CREATE INDEX ON biz.completed (expires_at) INCLUDE (tenant);
CREATE INDEX ON biz.completed (tenant, tool, expires_at);
-- Statistics, as a store in use has them: on an empty table the planner
-- may read a replay's key through the tool-expiry index.
INSERT INTO biz.completed (tenant, tool, key, tool_version, fingerprint, outcome, created_at, expires_at)
SELECT 'tenant-' || i % 20, 'tool-' || i % 4, 'seed-' || i, '1', sha256(i::text::bytea), 'succeeded', clock_timestamp(), clock_timestamp()
FROM generate_series(1, 20000) i;
ANALYZE biz.completed;`

// benchNarrowCreate runs DoTx's create statements against biz.completed,
// set up with ddl.
func benchNarrowCreate(b *testing.B, ddl string) {
	pool, _ := benchSetupExtra(b, Config{}, `
CREATE TABLE biz.completed (
    tenant       text        NOT NULL,
    tool         text        NOT NULL,
    key          text        NOT NULL,
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    tool_version text        NOT NULL,
    fingerprint  bytea       NOT NULL,
    intent       json,
    outcome      text        NOT NULL,
    result       json,
    result_ref   text,
    owner_role   text        NOT NULL DEFAULT session_user,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant, tool, key));
GRANT SELECT, INSERT ON biz.completed TO opsdesk_service;`+ddl)
	if strings.Contains(ddl, floorTrigger) {
		// The variant measures the trigger only if it runs for the
		// service's inserts: a 31-byte fingerprint must be refused.
		_, err := pool.Exec(context.Background(), `INSERT INTO biz.completed (tenant, tool, key, tool_version, fingerprint, outcome, created_at, expires_at)
VALUES ('acme', 'create-ticket', 'short', '1', decode(repeat('01', 31), 'hex'), 'succeeded', clock_timestamp(), clock_timestamp())`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			b.Fatalf("the rules' trigger let a bad record in: %v", err)
		}
	}
	fp := sha256.Sum256([]byte("fixed"))
	intent := []byte(`{"intent":{"labels":["hardware","urgent"],"priority":2,"title":"Printer on fire"},"tool":"create-ticket","version":"1"}`)
	retention := DefaultRetention.Microseconds()
	runClients(b, pool, func(ctx context.Context, i int64) error {
		return createByHand(ctx, pool, fmt.Sprintf("run-%d:create-ticket", i), func(ctx context.Context, conn *pgxpool.Conn, key string) (bool, error) {
			err := conn.QueryRow(ctx, `SELECT id, tool_version, fingerprint, result, result_ref, now() FROM biz.completed
WHERE tenant = $1 AND tool = $2 AND key = $3`, "acme", "create-ticket", key).Scan(nil, nil, nil, nil, nil, nil)
			if errors.Is(err, pgx.ErrNoRows) {
				return false, nil
			}
			return err == nil, err
		}, func(batch *pgx.Batch, key string, ticket int64, ref *string, id *int64) {
			batch.Queue(`INSERT INTO biz.completed (tenant, tool, key, tool_version, fingerprint, intent, outcome, result, result_ref, created_at, expires_at)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, clock.t, clock.t + $10 * interval '1 microsecond'
FROM (SELECT clock_timestamp() AS t) clock RETURNING id`, "acme", "create-ticket", key, "1", fp[:], intent,
				OutcomeSucceeded, []byte(fmt.Sprintf(`{"ticket_id":%d}`, ticket)), ref, retention).
				QueryRow(func(row pgx.Row) error { return row.Scan(id) })
		})
	})
}

// createByHand is DoTx's create as its statements, without the library:
// peek, then BEGIN, the ticket, and the record's insert (queued by insert)
// sent with COMMIT.
func createByHand(ctx context.Context, pool *pgxpool.Pool, key string,
	peek func(context.Context, *pgxpool.Conn, string) (found bool, err error),
	insert func(batch *pgx.Batch, key string, ticket int64, ref *string, id *int64)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if found, err := peek(ctx, conn, key); err != nil || found {
		return fmt.Errorf("read %s: found %v: %w", key, found, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	r, err := insertTicket(ctx, tx)
	if err != nil {
		tx.Rollback(ctx) //nolint:errcheck
		return err
	}
	ref := fmt.Sprintf("T-%d", r.TicketID)
	var id int64
	var batch pgx.Batch
	insert(&batch, key, r.TicketID, &ref, &id)
	batch.Queue("COMMIT")
	if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
		tx.Rollback(ctx) //nolint:errcheck
		return err
	}
	return nil
}
