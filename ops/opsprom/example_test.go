package opsprom_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsprom"
)

// The library's metrics in the service's own registry, served on
// /metrics: a call and its retry.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleDSN()) // a role granted opsdesk_service
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	metrics, err := opsprom.New(opsprom.Config{}) // no tenant label, default buckets
	if err != nil {
		log.Fatal(err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	store, err := ops.New(pool, ops.Config{
		Tools:   map[string]ops.Policy{"create-ticket": {Effect: ops.EffectLocal}},
		Metrics: metrics,
	})
	if err != nil {
		log.Fatal(err)
	}

	req := ops.Request{
		Identity: ops.Identity{Tenant: "acme", Tool: "create-ticket", Key: "run-42:create-ticket"},
		Version:  "1",
		Intent:   map[string]any{"title": "Printer on fire"},
	}
	create := func(ctx context.Context, tx pgx.Tx) (int, error) { return 42, nil }
	for range 2 { // the second call is a retry: replayed
		if _, err := ops.DoTx(ctx, store, req, create); err != nil {
			log.Fatal(err)
		}
	}

	// What Prometheus scrapes, from promhttp.HandlerFor(registry, …) on
	// /metrics: the calls that happened and their steps' sample counts.
	scrape := httptest.NewRecorder()
	promhttp.HandlerFor(registry, promhttp.HandlerOpts{}).ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	lines := bufio.NewScanner(scrape.Body)
	for lines.Scan() {
		line := lines.Text()
		if (strings.HasPrefix(line, "opsdesk_ops_calls_total") || strings.HasPrefix(line, "opsdesk_ops_step_duration_seconds_count")) &&
			!strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
	// Output:
	// opsdesk_ops_calls_total{answer="created",tool="create-ticket"} 1
	// opsdesk_ops_calls_total{answer="replayed",tool="create-ticket"} 1
	// opsdesk_ops_step_duration_seconds_count{step="call",tool="create-ticket"} 1
	// opsdesk_ops_step_duration_seconds_count{step="complete",tool="create-ticket"} 1
	// opsdesk_ops_step_duration_seconds_count{step="reserve",tool="create-ticket"} 2
}

// exampleDSN creates a fresh migrated database and returns the service
// role's DSN. It is dropped when the test binary exits.
func exampleDSN() string {
	d, _, err := dbtest.Create(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	return d.ServiceDSN
}
