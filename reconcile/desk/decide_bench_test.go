package desk_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// decideClients is how many people decide at once in BenchmarkDecide.
const decideClients = 8

// BenchmarkDecide measures people's decisions per second on one server
// (docs/scaling.md): decideClients operators of every tenant confirm stuck
// charges not executed, each on a record of its own, spread over 8
// tenants, through desk.Decide as opsdesk resolve does. "sealed" seals
// each decision's audit entry right after its commit, as opsdesk's commands
// do; "seal-later" leaves the entries queued and seals them all once at the
// end, inside the timing, as the console's and the exporter's sequencer
// would. Run with a fixed count, for example
//
//	go test ./reconcile -run '^$' -bench Decide -benchtime 2000x
func BenchmarkDecide(b *testing.B) {
	for _, mode := range []string{"sealed", "seal-later"} {
		b.Run(mode, func(b *testing.B) {
			d := dbtest.New(b)
			ctx := context.Background()
			_, err := d.Admin.Exec(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner,
    leased_at, lease_expires_at, intent)
SELECT 'tenant-' || (i % 8), 'charge-card', 'stuck-' || i, '1', sha256(convert_to('stuck-' || i, 'UTF8')),
    'external_unknown', 'pending', 'worker-1', now() - interval '1 hour', now() - interval '59 minutes', '{"amount": 100}'
FROM generate_series(1, $1) i`, b.N)
			if err != nil {
				b.Fatal(err)
			}
			var first int64
			if err := d.Admin.QueryRow(ctx, `SELECT min(id) FROM opsdesk.operations`).Scan(&first); err != nil {
				b.Fatal(err)
			}
			operator := dbtest.NewPerson(b, d, "operator", "*")
			var next atomic.Int64
			b.SetParallelism((decideClients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, err := desk.Decide(ctx, operator.Pool, reconcile.DecideParams{
						OperationID: first + next.Add(1) - 1, Decision: reconcile.NotExecuted, ExpectVersion: 1,
						Reason: "the provider has no charge", Evidence: reconcile.Evidence{Summary: "no charge found"},
						SealLater: mode == "seal-later",
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			if mode == "seal-later" {
				for {
					s, err := auditlog.Seal(ctx, operator.Pool, "", 0)
					if err != nil {
						b.Fatal(err)
					}
					if s.Waiting == 0 {
						break
					}
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
			b.StopTimer()
			var released, waiting int64
			if err := d.Admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM opsdesk.operations WHERE state = 'released'),
    (SELECT count(*) FROM opsdesk.audit_queue)`).Scan(&released, &waiting); err != nil {
				b.Fatal(err)
			}
			if released != int64(b.N) || waiting != 0 {
				b.Fatalf("%d of %d records released, %d audit entries left unsealed", released, b.N, waiting)
			}
		})
	}
}
