// Package demo gives a newcomer a realistic operation store to look at: it
// runs everyday agent tools through the real ops library against a fake
// provider, so that every state of the state machine appears.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/ops"
)

// Tools are the demo's tools and their policies.
var Tools = map[string]ops.Policy{
	"create-ticket": {Effect: ops.EffectLocal},
	"send-email":    {Effect: ops.EffectIdempotentProvider, Lease: time.Second},
	"charge-card":   {Effect: ops.EffectUnknownOutcome, Lease: time.Second},
}

// Schema creates the business table create-ticket writes to, and lets the
// service role use it. It runs as the database owner.
const Schema = `
CREATE SCHEMA IF NOT EXISTS demo;
CREATE TABLE IF NOT EXISTS demo.tickets (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text NOT NULL,
    title text NOT NULL
);
GRANT USAGE ON SCHEMA demo TO opsdesk_service;
GRANT SELECT, INSERT ON demo.tickets TO opsdesk_service;`

type ticket struct {
	Title    string `json:"title"`
	Priority int    `json:"priority"`
}

type ticketResult struct {
	TicketID int64 `json:"ticket_id"`
}

func (r ticketResult) ResultRef() string { return fmt.Sprintf("T-%d", r.TicketID) }

type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

type charge struct {
	Order       string `json:"order"`
	AmountCents int64  `json:"amount_cents"`
}

type providerRef struct {
	Ref string `json:"ref"`
}

func (r providerRef) ResultRef() string { return r.Ref }

// provider is a fake external provider that honours idempotency keys.
type provider struct {
	mu   sync.Mutex
	sent map[string]string // key -> reference
}

func (p *provider) send(key string) providerRef {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ref, ok := p.sent[key]; ok {
		return providerRef{Ref: ref}
	}
	ref := fmt.Sprintf("MSG-%d", 1000+len(p.sent))
	p.sent[key] = ref
	return providerRef{Ref: ref}
}

// errTimeout is what a caller sees when the provider does not answer.
var errTimeout = errors.New("provider timed out after 10s")

// Run plays the scenario on pool (a role granted opsdesk_service), narrating
// to w, and ends with the records it left.
func Run(ctx context.Context, w io.Writer, pool *pgxpool.Pool) error {
	store, err := ops.New(pool, ops.Config{Tools: Tools, Owner: "demo-worker-1"})
	if err != nil {
		return err
	}
	p := &provider{sent: map[string]string{}}
	say := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	id := func(tool, key string) ops.Identity { return ops.Identity{Tenant: "acme", Tool: tool, Key: key} }

	// 1. A local effect, retried after a lost response: replayed.
	ticketReq := ops.Request{Identity: id("create-ticket", "run-42:create-ticket"), Version: "1",
		Intent: ticket{Title: "Printer on fire", Priority: 2}}
	createTicket := func(ctx context.Context, tx pgx.Tx) (ticketResult, error) {
		var r ticketResult
		err := tx.QueryRow(ctx, `INSERT INTO demo.tickets (tenant, title) VALUES ('acme', 'Printer on fire') RETURNING id`).Scan(&r.TicketID)
		return r, err
	}
	for _, what := range []string{"first call", "retry after a lost response"} {
		out, err := ops.DoTx(ctx, store, ticketReq, createTicket)
		if err != nil {
			return err
		}
		say("create-ticket %-28s -> %s ticket %s", what, out.Disposition, out.Result.ResultRef())
	}

	// 2. The same key with a changed intent: refused and recorded.
	changed := ticketReq
	changed.Intent = ticket{Title: "Printer on fire", Priority: 1}
	_, err = ops.DoTx(ctx, store, changed, createTicket)
	if !errors.Is(err, ops.ErrIntentConflict) {
		return fmt.Errorf("expected an intent conflict, got %v", err)
	}
	say("create-ticket %-28s -> %v", "same key, priority changed", err)

	// 3. A provider that honours the key: the timed-out attempt is taken
	// over at once and the provider sends one email.
	emailReq := ops.Request{Identity: id("send-email", "run-42:notify"), Version: "1",
		Intent: email{To: "oncall@acme.example", Subject: "Printer on fire"}}
	_, err = ops.DoExternal(ctx, store, emailReq, func(_ context.Context, a ops.Attempt) (providerRef, error) {
		p.send(a.Key) // the provider acted, but its answer was lost
		return providerRef{}, errTimeout
	})
	say("send-email    %-28s -> %v", "first call", err)
	out, err := ops.DoExternal(ctx, store, emailReq, func(_ context.Context, a ops.Attempt) (providerRef, error) {
		return p.send(a.Key), nil
	})
	if err != nil {
		return err
	}
	say("send-email    %-28s -> %s %s (attempt %d; the provider sent %d email)", "retry", out.Disposition, out.Result.Ref, out.Attempt, len(p.sent))

	// 4. A charge whose outcome nobody saw: never retried blindly.
	chargeReq := ops.Request{Identity: id("charge-card", "order-77:charge"), Version: "1",
		Intent: charge{Order: "order-77", AmountCents: 4200}}
	_, err = ops.DoExternal(ctx, store, chargeReq, func(context.Context, ops.Attempt) (providerRef, error) {
		return providerRef{}, errTimeout
	})
	say("charge-card   %-28s -> %v", "first call", err)
	_, err = ops.DoExternal(ctx, store, chargeReq, func(context.Context, ops.Attempt) (providerRef, error) {
		return providerRef{}, errors.New("must not be called")
	})
	say("charge-card   %-28s -> %v", "retry at once", err)
	if err := waitStuck(ctx, store, chargeReq.Identity); err != nil {
		return err
	}
	_, err = ops.DoExternal(ctx, store, chargeReq, func(context.Context, ops.Attempt) (providerRef, error) {
		return providerRef{}, errors.New("must not be called")
	})
	if !errors.Is(err, ops.ErrNeedsReconciliation) {
		return fmt.Errorf("expected needs reconciliation, got %v", err)
	}
	say("charge-card   %-28s -> %v", "retry after the lease", err)

	say("")
	return printRecords(ctx, w, store, ticketReq.Identity, emailReq.Identity, chargeReq.Identity)
}

// waitStuck waits until the record's lease expires by the database clock.
func waitStuck(ctx context.Context, store *ops.Store, id ops.Identity) error {
	for {
		rec, err := store.Lookup(ctx, id)
		if err != nil {
			return err
		}
		if rec.Stuck() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(rec.LeaseRemaining(), 10*time.Millisecond)):
		}
	}
}

func printRecords(ctx context.Context, w io.Writer, store *ops.Store, ids ...ops.Identity) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tTOOL\tKEY\tSTATE\tTRY\tREF\tCONFLICTS")
	for _, id := range ids {
		rec, err := store.Lookup(ctx, id)
		if err != nil {
			return err
		}
		state := string(rec.State)
		switch {
		case rec.Stuck():
			state = "stuck (pending, lease expired)"
		case rec.State == ops.StateCompleted:
			state = "completed " + rec.Outcome
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%d\n", rec.ID, rec.Tenant, rec.Tool, rec.Key, state, rec.Attempt, rec.ResultRef, rec.ConflictCount)
	}
	return tw.Flush()
}
