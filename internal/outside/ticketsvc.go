// Package ticketsvc is a service outside opsdesk's module that adopts the
// library as the README shows, and nothing more: it installs the schema at
// start-up (ops/opsmigrate), creates tickets exactly once per key (ops.DoTx)
// and serves POST /tickets under the Idempotency-Key header (ops/idemhttp).
// Its tests run on a fresh store per test (ops/opstest). Being its own
// module, it can import only what opsdesk exports.
package ticketsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
	"github.com/opsdesk/opsdesk/ops/opsmigrate"
)

// Tools are the service's operations. create-ticket runs in the record's
// transaction (DoTx); post-ticket is the HTTP endpoint, whose handler
// writes outside it: an unknown outcome waits for an operator.
var Tools = map[string]ops.Policy{
	"create-ticket": {Effect: ops.EffectLocal},
	"post-ticket":   {Effect: ops.EffectUnknownOutcome},
}

// Ticket is what creating a ticket answers.
type Ticket struct {
	ID    int64  `json:"id"`
	Title string `json:"title"`
}

// CreateTicket creates a ticket once per (tenant, key): a retry replays the
// first answer.
func CreateTicket(ctx context.Context, store *ops.Store, tenant, key, title string) (ops.Reply[Ticket], error) {
	req := ops.Request{
		Identity: ops.Identity{Tenant: tenant, Tool: "create-ticket", Key: key},
		Version:  "1",
		Intent:   map[string]any{"title": title},
	}
	return ops.DoTx(ctx, store, req, func(ctx context.Context, tx pgx.Tx) (Ticket, error) {
		t := Ticket{Title: title}
		err := tx.QueryRow(ctx, `INSERT INTO tickets (tenant, title) VALUES ($1, $2) RETURNING id`, tenant, title).Scan(&t.ID)
		return t, err
	})
}

// Migrate installs or upgrades opsdesk's schema and the service's own
// table, as the database's administrator, and refuses a schema newer than
// the library.
func Migrate(ctx context.Context, admin *pgxpool.Pool) (opsmigrate.MigrateResult, error) {
	res, err := opsmigrate.Migrate(ctx, admin, nil) // idempotent, safe from several processes at once
	if errors.Is(err, opsmigrate.ErrSchemaAhead) {
		return res, fmt.Errorf("a newer opsdesk migrated this database: upgrade the library: %w", err)
	}
	if err != nil {
		return res, err
	}
	if _, err := admin.Exec(ctx, `
CREATE TABLE IF NOT EXISTS tickets (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text NOT NULL,
    title  text NOT NULL);
GRANT SELECT, INSERT ON tickets TO opsdesk_service;`); err != nil {
		return res, fmt.Errorf("create tickets: %w", err)
	}
	if _, err := opsmigrate.Check(ctx, admin); err != nil {
		return res, err
	}
	return res, nil
}

// Handler serves POST /tickets: JSON {"title": …} in, the ticket out, once
// per Idempotency-Key. The tenant is the caller's account, taken from
// authentication (here a bearer token "key-<account>"), never from a value
// the client chose freely.
func Handler(store *ops.Store, pool *pgxpool.Pool) (http.Handler, error) {
	idem, err := idemhttp.New(store, idemhttp.Config{
		Tool:   "post-ticket",
		Tenant: accountOf,
		// Problem documents name this service's own specification.
		ProblemBase: "https://tickets.example/problems/",
	})
	if err != nil {
		return nil, err
	}
	create := func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Title string `json:"title"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || strings.TrimSpace(in.Title) == "" {
			http.Error(w, "a JSON body with a title is required", http.StatusBadRequest)
			return
		}
		tenant, _ := accountOf(r)
		t := Ticket{Title: in.Title}
		if err := pool.QueryRow(r.Context(), `INSERT INTO tickets (tenant, title) VALUES ($1, $2) RETURNING id`,
			tenant, in.Title).Scan(&t.ID); err != nil {
			http.Error(w, "the ticket could not be created", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/tickets/%d", t.ID))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(t)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /tickets", idem.Wrap(http.HandlerFunc(create)))
	return mux, nil
}

// accountOf stands in for the service's authentication.
func accountOf(r *http.Request) (string, error) {
	account, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer key-")
	if !ok || account == "" {
		return "", &idemhttp.TenantError{Status: http.StatusUnauthorized, Detail: "send Authorization: Bearer key-<account>"}
	}
	return account, nil
}
