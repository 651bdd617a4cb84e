package bulk_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// envInt reads a positive integer from the environment, or def.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, name)
	require.Positive(b, n, name)
	return n
}

func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}

// BenchmarkBulkReconcile is issue 13's measurement: OPSDESK_BENCH_BULK_RECORDS
// (default 1,000) charges left stuck by the demo's workers around its
// simulated provider, reconciled the way `opsdesk resolve --filter
// 'state:stuck tool:charge-card' --by-lookup --yes` does (an operator's
// pool of one connection per decision in flight, the catalog's lookup, at
// OPSDESK_BENCH_BULK_CONCURRENCY at once, default 8): list, look up every
// record, accept both groups. Timed from the listing to the last
// decision; every record is then checked against the provider's ledger.
func BenchmarkBulkReconcile(b *testing.B) {
	n := envInt(b, "OPSDESK_BENCH_BULK_RECORDS", 1000)
	concurrency := envInt(b, "OPSDESK_BENCH_BULK_CONCURRENCY", bulk.DefaultConcurrency)
	for range b.N {
		b.StopTimer()
		d := dbtest.New(b)
		provider, err := demo.StartProvider(demo.ProviderConfig{Pool: dbtest.New(b).Service})
		require.NoError(b, err)
		b.Cleanup(func() { _ = provider.Close() })
		truth, err := demo.Outage(b.Context(), demo.OutageConfig{Pool: d.Service, Provider: provider, Records: n,
			Seed: 13, Lease: 200 * time.Millisecond})
		require.NoError(b, err)
		time.Sleep(300 * time.Millisecond) // the leases run out
		operator := dbtest.NewPerson(b, d, "operator", "*")
		// The command's pool: its settings, a connection per decision.
		cfg, err := db.PoolConfig(operator.DSN, "opsdesk")
		require.NoError(b, err)
		storeview.ConfigurePool(cfg, 5*time.Second)
		cfg.MaxConns = int32(max(2, concurrency))
		pool, err := db.Open(b.Context(), cfg)
		require.NoError(b, err)
		b.Cleanup(pool.Close)
		desk := &desk.Desk{Pool: pool, Tools: map[string]reconcile.Tool{demo.ToolChargeCard: {Lookup: &reconcile.LookupSpec{
			URL: provider.URL() + demo.LookupPath, ResultRef: "/ref", Timeout: 2 * time.Second}}}, Client: bulk.HTTPClient(concurrency)}
		r, err := bulk.New(bulk.Config{Desk: desk, Lister: storeview.New(pool, storeview.Config{}), Concurrency: concurrency})
		require.NoError(b, err)
		f, err := readmodel.ParseFilter("state:stuck tool:charge-card")
		require.NoError(b, err)
		loadBefore := loadAverage()

		b.StartTimer()
		start := time.Now()
		rows, err := r.List(b.Context(), f)
		require.NoError(b, err)
		listed := time.Since(start)
		plan, err := r.Lookup(b.Context(), f.String(), rows, nil)
		require.NoError(b, err)
		looked := time.Since(start)
		decided := 0
		for _, v := range []bulk.Verdict{bulk.Found, bulk.NotFound} {
			res, err := r.Accept(b.Context(), plan, v, bulk.AcceptParams{Reason: "benchmark outage", Confirm: plan.Group(v).Count()}, nil)
			require.NoError(b, err)
			decided += res.Counts[bulk.Decided]
		}
		took := time.Since(start)
		b.StopTimer()

		require.Len(b, rows, n)
		require.Equal(b, n, decided)
		var wrong int
		for _, a := range truth {
			ref, acted := provider.Effect(demo.ProviderIdentity(a.Identity))
			var state, got string
			require.NoError(b, d.Admin.QueryRow(b.Context(), `SELECT opsdesk.view_state(o), coalesce(result_ref, '')
FROM opsdesk.operations o WHERE tenant = $1 AND tool = $2 AND key = $3`, a.Tenant, a.Tool, a.Key).Scan(&state, &got))
			if (acted && (state != "completed" || got != ref)) || (!acted && state != "released") {
				wrong++
			}
		}
		require.Zero(b, wrong, "records decided against the provider's ledger")
		b.ReportMetric(took.Seconds(), "s/run")
		b.ReportMetric(float64(n)/took.Seconds(), "records/s")
		b.Logf("%d stuck records (found %d, not found %d) at concurrency %d: listed in %s, looked up by %s, all decided by %s; "+
			"load average before %s, after %s", n, plan.Group(bulk.Found).Count(), plan.Group(bulk.NotFound).Count(), concurrency,
			listed.Round(time.Millisecond), looked.Round(time.Millisecond), took.Round(time.Millisecond), loadBefore, loadAverage())
	}
}
