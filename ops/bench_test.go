package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// The benchmarks run 8 concurrent clients over a pool of 8 connections, as
// a service role, on the throw-away cluster. `make bench` runs the pair
// DoTxCreate / RawCreate in one process per round and reports the ratio.

const benchClients = 8

type benchIntent struct {
	Title    string   `json:"title"`
	Priority int      `json:"priority"`
	Labels   []string `json:"labels"`
}

type benchResult struct {
	TicketID int64 `json:"ticket_id"`
}

var benchPolicies = map[string]Policy{
	"create-ticket": {Effect: EffectLocal},
	"send-email":    {Effect: EffectIdempotentProvider},
}

// benchSetup returns a pool of benchClients connections as the service role
// on a fresh database with a business table, and a store over it.
func benchSetup(b *testing.B) (*pgxpool.Pool, *Store) {
	b.Helper()
	return benchSetupWith(b, Config{})
}

// benchSetupWith is benchSetup with a store configured by cfg (its tools
// and owner set here).
func benchSetupWith(b *testing.B, cfg Config) (*pgxpool.Pool, *Store) {
	b.Helper()
	return benchSetupExtra(b, cfg, "")
}

// benchSetupExtra is benchSetupWith with ddl run as the superuser after
// the business tables are made.
func benchSetupExtra(b *testing.B, cfg Config, ddl string) (*pgxpool.Pool, *Store) {
	b.Helper()
	d := dbtest.New(b)
	_, err := d.Admin.Exec(context.Background(), `
CREATE SCHEMA biz;
CREATE TABLE biz.tickets (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL, title text NOT NULL);
-- BenchmarkNaiveCreate's hand-written idempotency table.
CREATE TABLE biz.idempotency_keys (
    tenant       text        NOT NULL,
    key          text        NOT NULL,
    request_hash bytea       NOT NULL,
    response     jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, key));
GRANT USAGE ON SCHEMA biz TO opsdesk_service;
GRANT SELECT, INSERT ON biz.tickets, biz.idempotency_keys TO opsdesk_service;`+ddl)
	if err != nil {
		b.Fatal(err)
	}
	pcfg, err := pgxpool.ParseConfig(d.ServiceDSN)
	if err != nil {
		b.Fatal(err)
	}
	pcfg.MaxConns, pcfg.MinConns = benchClients, benchClients
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	cfg.Tools, cfg.Owner = benchPolicies, "bench"
	store, err := New(pool, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return pool, store
}

// runClients runs body from benchClients goroutines over pool's
// connections. Besides the wall time it reports the CPU time each op cost
// the server (the pool's backends) and this process (the library, pgx and
// the benchmark's own loop): on this shared two-core machine the wall time
// moves with the load, the CPU per op much less, so a ratio of CPU per op
// tells where a change went even when the wall-time ratio is provisional.
func runClients(b *testing.B, pool *pgxpool.Pool, body func(ctx context.Context, i int64) error) {
	b.Helper()
	b.SetParallelism((benchClients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var seq atomic.Int64
	cpu := startCPU(b, pool)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := body(ctx, seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	cpu.report(b)
}

func insertTicket(ctx context.Context, tx pgx.Tx) (benchResult, error) {
	var r benchResult
	err := tx.QueryRow(ctx, `INSERT INTO biz.tickets (tenant, title) VALUES ('acme', 'Printer on fire') RETURNING id`).Scan(&r.TicketID)
	return r, err
}

func benchRequest(tool string, i int64) Request {
	return Request{
		Identity: Identity{Tenant: "acme", Tool: tool, Key: fmt.Sprintf("run-%d:%s", i, tool)},
		Version:  "1",
		Intent:   benchIntent{Title: "Printer on fire", Priority: 2, Labels: []string{"hardware", "urgent"}},
	}
}

// BenchmarkDoTxCreate: a new key each iteration, with a one-row business
// insert in the same transaction.
func BenchmarkDoTxCreate(b *testing.B) {
	pool, store := benchSetup(b)
	runClients(b, pool, func(ctx context.Context, i int64) error {
		_, err := DoTx(ctx, store, benchRequest("create-ticket", i), insertTicket)
		return err
	})
}

// BenchmarkDoTxCreateEncrypted is BenchmarkDoTxCreate with Config.Keyring
// set: the intent and result sealed with AES-256-GCM, the fingerprint an
// HMAC.
func BenchmarkDoTxCreateEncrypted(b *testing.B) {
	key, fp := bytes.Repeat([]byte{1}, KeyBytes), bytes.Repeat([]byte{2}, KeyBytes)
	kr, err := NewLocalKeyring("k1", []string{"fp"}, map[string][]byte{"k1": key, "fp": fp})
	if err != nil {
		b.Fatal(err)
	}
	pool, store := benchSetupWith(b, Config{Keyring: kr})
	runClients(b, pool, func(ctx context.Context, i int64) error {
		_, err := DoTx(ctx, store, benchRequest("create-ticket", i), insertTicket)
		return err
	})
}

// BenchmarkRawCreate issues the statements DoTx issues for a new key (the
// read that finds no record, begin, business insert, then the record
// inserted completed and the commit in one round trip) directly with pgx:
// the library's SQL without the library, so DoTxCreate's ratio to it is the
// library's Go overhead.
func BenchmarkRawCreate(b *testing.B) {
	pool, _ := benchSetup(b)
	fp := sha256.Sum256([]byte("fixed"))
	// The canonical request the library stores, of the size DoTxCreate's.
	intent := []byte(`{"intent":{"labels":["hardware","urgent"],"priority":2,"title":"Printer on fire"},"tool":"create-ticket","version":"1"}`)
	retention := DefaultRetention.Microseconds()
	runClients(b, pool, func(ctx context.Context, i int64) error {
		return createByHand(ctx, pool, fmt.Sprintf("run-%d:create-ticket", i), func(ctx context.Context, conn *pgxpool.Conn, key string) (bool, error) {
			_, _, found, err := peek(ctx, conn, Identity{Tenant: "acme", Tool: "create-ticket", Key: key})
			return found, err
		}, func(batch *pgx.Batch, key string, ticket int64, ref *string, id *int64) {
			batch.Queue(insertCompletedStmt, "acme", "create-ticket", key, "1", fp[:], "bench", intent,
				OutcomeSucceeded, []byte(fmt.Sprintf(`{"ticket_id":%d}`, ticket)), ref, retention).
				QueryRow(func(row pgx.Row) error { return row.Scan(id) })
		})
	})
}

// BenchmarkNaiveCreate is what a service author writes by hand without
// opsdesk: the business insert and one row in their own idempotency table
// (the key, a SHA-256 of the request, the response as jsonb) in one
// transaction, no read first, no lease, no console. DoTxCreate's ratio to
// it is what the library's guarantees cost.
func BenchmarkNaiveCreate(b *testing.B) {
	pool, _ := benchSetup(b)
	intent := benchIntent{Title: "Printer on fire", Priority: 2, Labels: []string{"hardware", "urgent"}}
	runClients(b, pool, func(ctx context.Context, i int64) error {
		key := fmt.Sprintf("run-%d:create-ticket", i)
		body, err := json.Marshal(intent)
		if err != nil {
			return err
		}
		hash := sha256.Sum256(body)
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		r, err := insertTicket(ctx, tx)
		if err != nil {
			return err
		}
		response, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO biz.idempotency_keys (tenant, key, request_hash, response) VALUES ($1, $2, $3, $4)`,
			"acme", key, hash[:], response); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// BenchmarkDoTxReplay: every iteration replays one of 1,000 completed
// operations.
func BenchmarkDoTxReplay(b *testing.B) {
	pool, store := benchSetup(b)
	const keys = 1000
	for i := range int64(keys) {
		if _, err := DoTx(context.Background(), store, benchRequest("create-ticket", i), insertTicket); err != nil {
			b.Fatal(err)
		}
	}
	runClients(b, pool, func(ctx context.Context, i int64) error {
		out, err := DoTx(ctx, store, benchRequest("create-ticket", i%keys), insertTicket)
		if err == nil && out.Disposition != Replayed {
			err = fmt.Errorf("disposition %s, want replayed", out.Disposition)
		}
		return err
	})
}

// BenchmarkDoExternal: a new key each iteration; the reservation commits
// before a provider call that answers at once, then completion commits.
func BenchmarkDoExternal(b *testing.B) {
	pool, store := benchSetup(b)
	runClients(b, pool, func(ctx context.Context, i int64) error {
		_, err := DoExternal(ctx, store, benchRequest("send-email", i), func(_ context.Context, a Attempt) (benchResult, error) {
			return benchResult{TicketID: a.OperationID}, nil
		})
		return err
	})
}

// BenchmarkDoTxCreateMetrics is BenchmarkDoTxCreate with the Prometheus
// metrics hook (ops/opsprom) set: the hook's overhead is the difference.
func BenchmarkDoTxCreateMetrics(b *testing.B) {
	pool, _ := benchSetup(b)
	if BenchMetrics == nil {
		b.Fatal("BenchMetrics is not set: metrics_test.go sets it")
	}
	store, err := New(pool, Config{Tools: benchPolicies, Owner: "bench", Metrics: BenchMetrics()})
	if err != nil {
		b.Fatal(err)
	}
	runClients(b, pool, func(ctx context.Context, i int64) error {
		_, err := DoTx(ctx, store, benchRequest("create-ticket", i), insertTicket)
		return err
	})
}
