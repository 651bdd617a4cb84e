package retention_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/purgereport"
	"github.com/opsdesk/opsdesk/internal/retention"
	"github.com/opsdesk/opsdesk/ops"
)

// BenchmarkPurgeUnderTraffic purges OPSDESK_BENCH_PURGE_ROWS expired
// records (default 1,000,000, in batches of OPSDESK_BENCH_PURGE_BATCH,
// default 1,000, with OPSDESK_BENCH_PURGE_WORKERS batch loops side by
// side, default 1) while 8 clients create records through the library,
// and reports the purge's rows per second and the library's throughput
// during the purge against the same clients' just before it, in the same
// process: run it with -benchtime 1x (docs/benchmarks.md). The purge is
// paced as by default (retention.Paced), or pauses
// OPSDESK_BENCH_PURGE_YIELD times each batch's time after it
// (retention.FixedYield; 0: full speed); paused-% is the share of the
// workers' time spent pausing. The clients run 10 s alone before the
// purge (the baseline of drop-%) and 10 s after it; drop-bracketed-% is
// the drop against the mean of the two.
func BenchmarkPurgeUnderTraffic(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("OPSDESK_BENCH_PURGE_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("OPSDESK_BENCH_PURGE_ROWS=%q: %v", v, err)
		}
	}
	batch := 1000
	if v := os.Getenv("OPSDESK_BENCH_PURGE_BATCH"); v != "" {
		var err error
		if batch, err = strconv.Atoi(v); err != nil {
			b.Fatalf("OPSDESK_BENCH_PURGE_BATCH=%q: %v", v, err)
		}
	}
	pace := retention.Paced
	if v := os.Getenv("OPSDESK_BENCH_PURGE_YIELD"); v != "" {
		yield, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("OPSDESK_BENCH_PURGE_YIELD=%q: %v", v, err)
		}
		pace = retention.FixedYield(yield)
	}
	workers := 1
	if v := os.Getenv("OPSDESK_BENCH_PURGE_WORKERS"); v != "" {
		var err error
		if workers, err = strconv.Atoi(v); err != nil {
			b.Fatalf("OPSDESK_BENCH_PURGE_WORKERS=%q: %v", v, err)
		}
	}
	ctx := context.Background()
	d := dbtest.New(b)
	admin := dbtest.NewPerson(b, d, "admin", "*")
	start := time.Now()
	_, err := d.Admin.Exec(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at, result, result_ref)
SELECT 'tenant-' || (i % 20), 'create-ticket', 'old-' || i, '1', sha256(int8send(i)), 'local', 'completed', 'succeeded', 'w',
    now() - interval '10 days', now() - interval '10 days', now() - interval '9 days',
    now() - interval '2 days' - i * interval '1 millisecond', '{"ticket_id": 1}', 'T-1'
FROM generate_series(1, $1) i`, n)
	if err != nil {
		b.Fatal(err)
	}
	for _, sql := range []string{`CHECKPOINT`, `VACUUM (ANALYZE) opsdesk.operations`} {
		if _, err := d.Admin.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("seeded %d expired records in %v", n, time.Since(start).Round(time.Second))

	store, err := ops.New(d.Service, ops.Config{Owner: "bench", Tools: map[string]ops.Policy{"create-note": {Effect: ops.EffectLocal}}})
	if err != nil {
		b.Fatal(err)
	}
	// traffic runs 8 clients creating records until stop, counting them.
	var seq atomic.Int64
	traffic := func(stop <-chan struct{}) (count *atomic.Int64, wait func()) {
		count = &atomic.Int64{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					i := seq.Add(1)
					_, err := ops.DoTx(ctx, store, ops.Request{Identity: ops.Identity{Tenant: "tenant-" + strconv.FormatInt(i%20, 10),
						Tool: "create-note", Key: "new-" + strconv.FormatInt(i, 10)}, Version: "1", Intent: map[string]int64{"n": i}},
						func(context.Context, pgx.Tx) (int, error) { return 1, nil })
					if err != nil {
						b.Error(err)
						return
					}
					count.Add(1)
				}
			}()
		}
		return count, wg.Wait
	}

	// alone runs the clients for 10 s without a purge, their throughput.
	alone := func() float64 {
		stop := make(chan struct{})
		count, wait := traffic(stop)
		t0 := time.Now()
		time.Sleep(10 * time.Second)
		close(stop)
		wait()
		return float64(count.Load()) / time.Since(t0).Seconds()
	}

	b.ResetTimer()
	for range b.N {
		// The baseline: the same clients for 10 s before the purge.
		baseline := alone()

		stop := make(chan struct{})
		count, wait := traffic(stop)
		t0 := time.Now()
		var paused time.Duration
		res, err := retention.Purge(ctx, admin.Pool, retention.PurgeParams{Reason: "benchmark", Tool: "create-ticket", BatchSize: batch, Pace: pace,
			Workers: workers}, func(p purgereport.Progress) { paused += p.Pause })
		elapsed := time.Since(t0)
		close(stop)
		wait()
		if err != nil {
			b.Fatal(err)
		}
		if res.Purged != int64(n) {
			b.Fatalf("purged %d of %d", res.Purged, n)
		}
		during := float64(count.Load()) / elapsed.Seconds()
		// And 10 s after it: on a shared machine the library's throughput
		// drifts by itself (other work, the table growing, autovacuum), and
		// the drift from before to after says how far the drop can be read.
		after := alone()
		b.ReportMetric(float64(res.Purged)/elapsed.Seconds(), "purged/s")
		b.ReportMetric(baseline, "baseline-ops/s")
		b.ReportMetric(during, "during-ops/s")
		b.ReportMetric(after, "after-ops/s")
		b.ReportMetric(100*(1-during/baseline), "drop-%")
		b.ReportMetric(100*(1-during/((baseline+after)/2)), "drop-bracketed-%")
		b.ReportMetric(100*paused.Seconds()/(elapsed.Seconds()*float64(workers)), "paused-%")
	}
}
