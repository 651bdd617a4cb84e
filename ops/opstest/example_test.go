package opstest_test

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opstest"
)

// The README's "Testing a service": a service's test on a fresh store. An
// Example has no *testing.T, so the test's body runs on a stand-in whose
// t.Log prints; in a service it is the body of
// func TestCreateTicket(t *testing.T).
func Example() {
	ran := runTest(os.Stdout, func(t *standInT) {
		t.Parallel()                        // each test has its own database
		db := opstest.New(t, &opstest.Opts{ // the server: OPSDESK_TEST_DSN, else a throw-away cluster
			Config: ops.Config{Tools: map[string]ops.Policy{"create-ticket": {Effect: ops.EffectLocal}}},
		})
		// The service's own schema, made as the administrator; the
		// service's login is granted opsdesk_service.
		if _, err := db.Admin.Exec(t.Context(), `
CREATE TABLE tickets (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, title text NOT NULL);
GRANT SELECT, INSERT ON tickets TO opsdesk_service;`); err != nil {
			t.Fatal(err)
		}

		req := ops.Request{
			Identity: ops.Identity{Tenant: "acme", Tool: "create-ticket", Key: "run-42:create-ticket"},
			Version:  "1",
			Intent:   map[string]any{"title": "Printer on fire"},
		}
		create := func(ctx context.Context, tx pgx.Tx) (int64, error) {
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO tickets (title) VALUES ('Printer on fire') RETURNING id`).Scan(&id)
			return id, err
		}
		for i, want := range []ops.Disposition{ops.Created, ops.Replayed} { // the second call is a retry
			out, err := ops.DoTx(t.Context(), db.Store, req, create)
			if err != nil {
				t.Fatal(err)
			}
			if out.Disposition != want {
				t.Fatalf("call %d: %s, want %s", i+1, out.Disposition, want)
			}
			t.Log(out.Disposition, "ticket", out.Result)
		}
		var tickets int
		if err := db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM tickets`).Scan(&tickets); err != nil {
			t.Fatal(err)
		}
		t.Log("tickets:", tickets)
	})
	if ran.Failed() {
		fmt.Println("FAIL:", ran.Messages())
	}

	// Output:
	// created ticket 1
	// replayed ticket 1
	// tickets: 1
}
