package ticketsvc_test

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"example.com/ticketsvc"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmigrate"
	"github.com/opsdesk/opsdesk/ops/opstest"
)

// TestMain stops the throw-away PostgreSQL cluster that opstest starts when
// no server is configured (OPSDESK_TEST_DSN), once the tests end.
func TestMain(m *testing.M) { opstest.Main(m) }

// TestCreateTicketOnce runs the library on a fresh store, as the service's
// login, and retries.
func TestCreateTicketOnce(t *testing.T) {
	t.Parallel()
	// Intents and results encrypted at rest, under a key of the test's
	// own; a service loads its keys with ops.LoadKeyFile.
	key := make([]byte, ops.KeyBytes)
	_, _ = rand.Read(key)
	keyring, err := ops.NewLocalKeyring("test-1", []string{"test-1"}, map[string][]byte{"test-1": key})
	if err != nil {
		t.Fatal(err)
	}
	db := opstest.New(t, &opstest.Opts{Config: ops.Config{Tools: ticketsvc.Tools, Keyring: keyring}})
	if _, err := ticketsvc.Migrate(t.Context(), db.Admin); err != nil {
		t.Fatal(err)
	}
	var first ticketsvc.Ticket
	for i, want := range []ops.Disposition{ops.Created, ops.Replayed} { // the second call is a retry
		out, err := ticketsvc.CreateTicket(t.Context(), db.Store, "acme", "run-42", "Printer on fire")
		if err != nil || out.Disposition != want {
			t.Fatalf("call %d: %v %v, want %s", i+1, out.Disposition, err, want)
		}
		if i == 0 {
			first = out.Result
		} else if out.Result != first {
			t.Fatalf("replay answered %+v, the first call %+v", out.Result, first)
		}
	}
	_, err = ticketsvc.CreateTicket(t.Context(), db.Store, "acme", "run-42", "Printer still on fire")
	if !errors.Is(err, ops.ErrIntentConflict) {
		t.Fatalf("the key reused for another ticket: %v, want ErrIntentConflict", err)
	}
	requireTickets(t, db, 1)
}

// requireTickets counts the tickets in db, as its administrator.
func requireTickets(t *testing.T, db *opstest.DB, want int) {
	t.Helper()
	var n int
	if err := db.Admin.QueryRow(t.Context(), `SELECT count(*) FROM tickets`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("%d tickets, want %d", n, want)
	}
}

// TestInstallOnAnEmptyDatabase installs the schema where there was none,
// as the service does at start-up, and again (a no-op).
func TestInstallOnAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	admin, err := pgxpool.New(t.Context(), opstest.NewEmpty(t, nil)) // an empty database, as a superuser
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	res, err := ticketsvc.Migrate(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	if res.From != 0 || res.To != opsmigrate.LatestVersion() || len(res.Applied) == 0 {
		t.Fatalf("first install: %+v, want 0 → %d", res, opsmigrate.LatestVersion())
	}
	again, err := ticketsvc.Migrate(t.Context(), admin)
	if err != nil || len(again.Applied) != 0 || again.To != res.To {
		t.Fatalf("second install: %+v, %v: want nothing applied", again, err)
	}
}

// TestPostTicketByIdempotencyKey serves the endpoint and calls it as a
// client that retries after a lost answer, then reuses the key.
func TestPostTicketByIdempotencyKey(t *testing.T) {
	t.Parallel()
	db := opstest.New(t, &opstest.Opts{Config: ops.Config{Tools: ticketsvc.Tools}})
	if _, err := ticketsvc.Migrate(t.Context(), db.Admin); err != nil {
		t.Fatal(err)
	}
	h, err := ticketsvc.Handler(db.Store, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	post := func(key, body string) (*http.Response, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/tickets", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer key-acme")
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}

	first, firstBody := post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{"title": "Printer on fire"}`)
	retry, retryBody := post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{"title":"Printer on fire"}`) // same JSON, other spacing
	if first.StatusCode != http.StatusCreated || retry.StatusCode != http.StatusCreated {
		t.Fatalf("statuses %d and %d, want 201 twice", first.StatusCode, retry.StatusCode)
	}
	if retryBody != firstBody || retry.Header.Get("Location") != first.Header.Get("Location") {
		t.Fatalf("the retry answered %q at %q, the first call %q at %q", retryBody, retry.Header.Get("Location"),
			firstBody, first.Header.Get("Location"))
	}
	if first.Header.Get("Idempotent-Replayed") != "" || retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("Idempotent-Replayed: %q then %q", first.Header.Get("Idempotent-Replayed"), retry.Header.Get("Idempotent-Replayed"))
	}
	if reused, body := post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{"title": "Another printer"}`); reused.StatusCode != http.StatusUnprocessableEntity ||
		reused.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("the key reused for another request: %d %s %s, want 422 problem+json", reused.StatusCode,
			reused.Header.Get("Content-Type"), body)
	}
	if missing, _ := post("", `{"title": "Printer on fire"}`); missing.StatusCode != http.StatusBadRequest {
		t.Fatalf("no key: %d, want 400", missing.StatusCode)
	}
	// Problem documents name the service's own specification.
	_, body := post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{"title": "Another printer"}`)
	var problem struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(body), &problem); err != nil || !strings.HasPrefix(problem.Type, "https://tickets.example/problems/") {
		t.Fatalf("problem type %q (%v), want one under https://tickets.example/problems/", problem.Type, err)
	}
	// A caller without credentials is told so, with the status the
	// service chose.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/tickets", strings.NewReader(`{"title": "x"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", `"a1"`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "Bearer key-") {
		t.Fatalf("unauthenticated: %d %s, want 401 saying what to send", resp.StatusCode, b)
	}
	requireTickets(t, db, 1)
}
