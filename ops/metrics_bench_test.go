package ops

import (
	"context"
	"testing"
	"time"
)

// nopMetrics is a hook that does nothing: what is left is the library's
// own share of the metrics' cost.
type nopMetrics struct{}

func (nopMetrics) CallFinished(string, string, CallClass, time.Duration) {}
func (nopMetrics) StageFinished(string, string, Stage, time.Duration)    {}
func (nopMetrics) Event(string, string, Event)                           {}

// BenchmarkMetricsLibraryShare: what a call with a hook costs the library
// beyond the hook itself (timing fn, the steps, the labels), without the
// database. Compare its ns/op with BenchmarkDoTxCreate's.
func BenchmarkMetricsLibraryShare(b *testing.B) {
	s := &Store{metrics: nopMetrics{}}
	fn := func(context.Context, int) (int, error) { return 1, nil }
	ctx := context.Background()
	c := &call{Request: Request{Identity: Identity{Tenant: "acme", Tool: "create-ticket"}}, policy: Policy{Effect: EffectLocal}, start: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := timed(s, c, fn)(ctx, 0); err != nil {
			b.Fatal(err)
		}
		answer, _ := classify(Created, nil)
		s.observeCall(c, answer, nil)
	}
}
