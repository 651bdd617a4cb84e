package ops_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

// envHelperRole marks a helper process of process_test.go: it is given its
// database in the environment and needs no server of its own.
const envHelperRole = "OPSDESK_HELPER_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(envHelperRole) != "" {
		os.Exit(m.Run())
	}
	dbtest.Main(m)
}

// Tools the tests run: mirrors of everyday agent tools.
const (
	toolTicket = "create-ticket" // local
	toolEmail  = "send-email"    // provider honours the key
	toolCharge = "charge-card"   // unknown outcome
	testLease  = time.Second
)

var testTools = map[string]ops.Policy{
	toolTicket:    {Effect: ops.EffectLocal},
	"create-note": {Effect: ops.EffectLocal},
	toolEmail:     {Effect: ops.EffectIdempotentProvider, Lease: testLease},
	toolCharge:    {Effect: ops.EffectUnknownOutcome, Lease: testLease},
}

type ticketIntent struct {
	Title    string   `json:"title"`
	Priority int      `json:"priority"`
	Labels   []string `json:"labels,omitempty"`
}

func (t ticketIntent) Validate() error {
	if t.Title == "" {
		return errors.New("title is required")
	}
	if t.Priority < 1 || t.Priority > 5 {
		return fmt.Errorf("priority %d is not between 1 and 5", t.Priority)
	}
	return nil
}

type ticketResult struct {
	TicketID int64 `json:"ticket_id"`
}

func (r ticketResult) ResultRef() string { return fmt.Sprintf("T-%d", r.TicketID) }

// bundle is what a test works with.
type bundle struct {
	ctx   context.Context
	db    *dbtest.DB
	store *ops.Store
}

// setup gives a test its own database with a business table the service
// role may write, and a store connected as the service role.
func setup(t *testing.T) *bundle {
	t.Helper()
	d := dbtest.New(t)
	ctx := t.Context()
	_, err := d.Admin.Exec(ctx, `
CREATE SCHEMA biz;
CREATE TABLE biz.tickets (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL, key text NOT NULL, title text NOT NULL);
GRANT USAGE ON SCHEMA biz TO opsdesk_service;
GRANT SELECT, INSERT ON biz.tickets TO opsdesk_service;`)
	require.NoError(t, err)
	return &bundle{ctx: ctx, db: d, store: newStore(t, d.Service, ops.Config{Owner: "worker-1"})}
}

func newStore(t *testing.T, pool *pgxpool.Pool, cfg ops.Config) *ops.Store {
	t.Helper()
	if cfg.Tools == nil {
		cfg.Tools = testTools
	}
	s, err := ops.New(pool, cfg)
	require.NoError(t, err)
	return s
}

func ticketReq(tenant, key string, intent any) ops.Request {
	return ops.Request{Identity: ops.Identity{Tenant: tenant, Tool: toolTicket, Key: key}, Version: "1", Intent: intent}
}

// createTicket is a local effect: one business row in the caller's
// transaction.
func createTicket(tenant, key, title string) func(context.Context, pgx.Tx) (ticketResult, error) {
	return func(ctx context.Context, tx pgx.Tx) (ticketResult, error) {
		var r ticketResult
		err := tx.QueryRow(ctx, `INSERT INTO biz.tickets (tenant, key, title) VALUES ($1, $2, $3) RETURNING id`,
			tenant, key, title).Scan(&r.TicketID)
		return r, err
	}
}

func (b *bundle) doTicket(t *testing.T, tenant, key string, intent ticketIntent) (ops.Reply[ticketResult], error) {
	t.Helper()
	return ops.DoTx(b.ctx, b.store, ticketReq(tenant, key, intent), createTicket(tenant, key, intent.Title))
}

// count runs a count query as the superuser (inspection only).
func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

func (b *bundle) tickets(t *testing.T) int { return b.count(t, `SELECT count(*) FROM biz.tickets`) }

func (b *bundle) lookup(t *testing.T, tool, tenant, key string) ops.Record {
	t.Helper()
	rec, err := b.store.Read(b.ctx, ops.Identity{Tenant: tenant, Tool: tool, Key: key})
	require.NoError(t, err)
	return rec
}

// waitStuck polls until the record's lease has expired by the database
// clock. It waits for a condition, not for a fixed time.
func (b *bundle) waitStuck(t *testing.T, tool, tenant, key string) ops.Record {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec := b.lookup(t, tool, tenant, key)
		if rec.Stuck() {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("record %s/%s/%s never became stuck: state %s, lease left %v", tenant, tool, key, rec.State, rec.LeaseRemaining())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLookupAbsent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.lookup(t, toolTicket, "acme", "never-used")
	require.Equal(t, ops.StateAbsent, rec.State)
	require.Zero(t, rec.ID)
}

func TestServiceRolePrivileges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.doTicket(t, "acme", "k1", ticketIntent{Title: "Printer on fire", Priority: 2})
	require.NoError(t, err)

	// The library's role may reserve and complete records, never remove
	// them, rewrite their identity or read the conflicts under review.
	for _, stmt := range []string{
		`DELETE FROM opsdesk.operations`,
		`TRUNCATE opsdesk.operations`,
		`UPDATE opsdesk.operations SET fingerprint = fingerprint`,
		`UPDATE opsdesk.operations SET key = 'other'`,
		`SELECT fingerprint, owner FROM opsdesk.conflicts`,
		`SELECT intent FROM opsdesk.conflicts`,
		`INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, intent)
		 SELECT tenant, tool, key, id, tool_version, fingerprint, fingerprint, 'w', '{}' FROM opsdesk.operations RETURNING intent`,
		`DELETE FROM opsdesk.conflicts`,
		`UPDATE opsdesk.conflicts SET reviewed_at = now(), reviewed_by = 'me'`,
		`CREATE TABLE opsdesk.sneaky (id int)`,
	} {
		_, err := b.db.Service.Exec(b.ctx, stmt)
		require.ErrorContains(t, err, "permission denied", stmt)
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations`))
}

func TestLogsNeverCarryIntentOrResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var buf strings.Builder
	store := newStore(t, b.db.Service, ops.Config{Owner: "worker-log", Logger: newJSONLogger(&buf)})
	req := ticketReq("acme", "k-log", ticketIntent{Title: "Secret printer", Priority: 2})
	for range 2 {
		_, err := ops.DoTx(b.ctx, store, req, createTicket("acme", "k-log", "Secret printer"))
		require.NoError(t, err)
	}
	// Errors from fn can quote the intent: their text is not logged either.
	_, err := ops.DoTx(b.ctx, store, ticketReq("acme", "k-log-2", ticketIntent{Title: "Secret printer", Priority: 2}),
		func(context.Context, pgx.Tx) (ticketResult, error) {
			return ticketResult{}, errors.New("Secret printer jammed")
		})
	require.Error(t, err)
	logs := buf.String()
	require.Contains(t, logs, `"disposition":"error"`)
	require.Contains(t, logs, `"disposition":"created"`)
	require.Contains(t, logs, `"disposition":"replayed"`)
	require.Contains(t, logs, `"key":"k-log"`)
	require.Contains(t, logs, `"fingerprint":"sha256:`)
	require.Contains(t, logs, `"latency"`)
	require.NotContains(t, logs, "Secret printer")
	require.NotContains(t, logs, "ticket_id")
}

func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, nil))
}
