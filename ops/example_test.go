package ops_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

// CreateTicket is a tool's intent: the validated request, without the key.
type CreateTicket struct {
	Title    string `json:"title"`
	Priority int    `json:"priority"`
}

// Validate is called by ops.DecodeIntent.
func (c CreateTicket) Validate() error {
	if c.Title == "" {
		return errors.New("title is required")
	}
	return nil
}

type Ticket struct {
	ID int64 `json:"id"`
}

// The README's example: a local effect in one transaction with its record,
// retried with the same key.
func Example() {
	dsn := exampleDSN()
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, dsn) // dsn: a role granted opsdesk_service
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := ops.New(pool, ops.Config{
		Tools: map[string]ops.Policy{"create-ticket": {Effect: ops.EffectLocal}},
	})
	if err != nil {
		log.Fatal(err)
	}

	// Raw arguments from an agent: unknown fields are refused, Validate is called.
	intent, err := ops.DecodeIntent[CreateTicket]([]byte(`{"title": "Printer on fire", "priority": 2}`))
	if err != nil {
		log.Fatal(err)
	}
	req := ops.Request{
		Identity: ops.Identity{Tenant: "acme", Tool: "create-ticket", Key: "run-42:create-ticket"},
		Version:  "1",
		Intent:   intent,
	}
	create := func(ctx context.Context, tx pgx.Tx) (Ticket, error) {
		var t Ticket
		err := tx.QueryRow(ctx, `INSERT INTO biz.tickets (tenant, key, title) VALUES ('acme', 'run-42', $1) RETURNING id`,
			intent.Title).Scan(&t.ID)
		return t, err
	}

	// Retry waits out another attempt's lease (ErrInProgress) and an
	// unreachable store (ErrUnavailable), and tries again with the same
	// key, within the deadline.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for range 2 { // the second call is a retry after a lost response
		out, err := ops.Retry(ctx, nil, func(ctx context.Context) (ops.Reply[Ticket], error) {
			return ops.DoTx(ctx, store, req, create)
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(out.Disposition, "ticket", out.Result.ID)
	}

	// The same key with another intent is refused, and recorded.
	req.Intent = CreateTicket{Title: "Printer on fire", Priority: 1}
	_, err = ops.DoTx(ctx, store, req, create)
	fmt.Println(errors.Is(err, ops.ErrIntentConflict))

	// Output:
	// created ticket 1
	// replayed ticket 1
	// true
}

// A provider account shared by two tenants: the same raw key gives each
// its own provider key.
func ExampleIdentity_ProviderKey() {
	acme := ops.Identity{Tenant: "acme", Tool: "charge-card", Key: "order-7"}
	globex := ops.Identity{Tenant: "globex", Tool: "charge-card", Key: "order-7"}
	fmt.Println(acme.ProviderKey())
	fmt.Println(globex.ProviderKey())
	fmt.Println(acme.ProviderKey() == globex.ProviderKey())
	// Output:
	// opsdesk1_xd5alxash2b3ljvcybzinizkxdqui4sbymbcgfol26tkrx6ueniq
	// opsdesk1_prfc6r4cjrlaelddcnyla346ojn6zgbm3cqeu732dznvkzlsvwqa
	// false
}

// An external call whose result is over the store's limit: the caller
// gets it this once, and retries learn that the effect happened.
func ExampleReply_notStored() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := ops.New(pool, ops.Config{
		Tools:          map[string]ops.Policy{"export-report": {Effect: ops.EffectIdempotentProvider}},
		MaxResultBytes: 1 << 10, // 1 KiB, to show it; the default is 1 MiB
	})
	if err != nil {
		log.Fatal(err)
	}
	req := ops.Request{
		Identity: ops.Identity{Tenant: "acme", Tool: "export-report", Key: "run-7:export"},
		Version:  "1",
		Intent:   map[string]string{"month": "2025-06"},
	}
	export := func(ctx context.Context, a ops.Attempt) (Report, error) {
		// Send a.ProviderKey() as the provider's idempotency key.
		return Report{ID: "rep_77", CSV: strings.Repeat("row\n", 1000)}, nil
	}

	out, err := ops.DoExternal(ctx, store, req, export)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Disposition, len(out.Result.CSV), "bytes;", out.NotStored.Reason)

	_, err = ops.DoExternal(ctx, store, req, export) // a retry: nothing runs
	var notStored *ops.ResultNotStoredError
	if errors.As(err, &notStored) {
		fmt.Println("took effect before, reference", notStored.ResultRef)
	}
	// Output:
	// created 4000 bytes; is 5024 bytes, over the limit of 1024 (Config.MaxResultBytes)
	// took effect before, reference rep_77
}

// Report is an export's result; its ID is the provider's reference.
type Report struct {
	ID  string `json:"id"`
	CSV string `json:"csv"`
}

// ResultRef is stored with the record, also when the report is not.
func (r Report) ResultRef() string { return r.ID }

// exampleDSN prepares a fresh database like the tests' and returns the
// service role's DSN. It is dropped when the test binary exits.
func exampleDSN() string {
	ctx := context.Background()
	d, _, err := dbtest.Create(ctx)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, d.AdminDSN)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
CREATE SCHEMA biz;
CREATE TABLE biz.tickets (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL, key text NOT NULL, title text NOT NULL);
GRANT USAGE ON SCHEMA biz TO opsdesk_service;
GRANT SELECT, INSERT ON biz.tickets TO opsdesk_service;`); err != nil {
		log.Fatal(err)
	}
	return d.ServiceDSN
}
