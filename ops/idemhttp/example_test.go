package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
)

// The README's example: a POST endpoint served by the draft, called twice
// with one key (a retry after a lost answer) and once with the key reused
// for another request.
func Example() {
	dsn := exampleServiceDSN() // a role granted opsdesk_service
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := ops.New(pool, ops.Config{
		// The handler's effects are outside the record's transaction:
		// its tool is external. Unknown outcome: a request that died
		// midway waits for an operator instead of running again.
		Tools: map[string]ops.Policy{"create-payment": {Effect: ops.EffectUnknownOutcome}},
	})
	if err != nil {
		log.Fatal(err)
	}
	idem, err := idemhttp.New(store, idemhttp.Config{
		Tool: "create-payment",
		// The tenant comes from your authentication, never from a value
		// the client chose.
		Tenant: func(r *http.Request) (string, error) { return accountOf(r) },
	})
	if err != nil {
		log.Fatal(err)
	}
	var payments atomic.Int64
	createPayment := func(w http.ResponseWriter, r *http.Request) {
		id := payments.Add(1) // the effect: runs once per key
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/payments/pay-%d", id))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id": "pay-%d"}`, id)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", idem.Wrap(http.HandlerFunc(createPayment)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(key, body string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer key-acme")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			log.Fatal(err)
		}
		if resp.Header.Get("Content-Type") == idemhttp.ProblemContentType {
			var p idemhttp.Problem
			if err := json.Unmarshal(answer, &p); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%d %s (retry with the same key: %t)\n", resp.StatusCode, p.Title, p.RetryWithSameKey)
			return
		}
		fmt.Printf("%d replayed=%q %s\n", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), answer)
	}
	const key = `"8e03978e-40d5-43e8-bc93-6894a57f9324"`
	post(key, `{"amount": 4200, "currency": "EUR"}`)
	post(key, `{"currency": "EUR", "amount": 4200}`) // the same request, retried
	post(key, `{"amount": 9900, "currency": "EUR"}`) // the key reused for another
	fmt.Println(payments.Load(), "payment")

	// Output:
	// 201 replayed="" {"id": "pay-1"}
	// 201 replayed="true" {"id": "pay-1"}
	// 422 Idempotency-Key is already used (retry with the same key: false)
	// 1 payment
}

// accountOf stands for the service's authentication.
func accountOf(r *http.Request) (string, error) {
	if r.Header.Get("Authorization") == "Bearer key-acme" {
		return "acme", nil
	}
	return "", errors.New("unknown API key")
}

// exampleServiceDSN prepares a fresh migrated database and returns the
// service role's DSN. It is dropped when the test binary exits.
func exampleServiceDSN() string {
	d, _, err := dbtest.Create(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	return d.ServiceDSN
}
