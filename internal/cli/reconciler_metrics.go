package cli

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/opsdesk/opsdesk/reconcile/auto"
)

// reconcilerMetrics are what opsdesk reconciler --metrics-addr serves. No
// tenant, key or payload labels: tools, verdicts and reasons only.
type reconcilerMetrics struct {
	reg            *prometheus.Registry
	decided        *prometheus.CounterVec
	skipped        *prometheus.CounterVec
	providerErrors *prometheus.CounterVec
	providerDown   *prometheus.GaugeVec
	deciding       *prometheus.GaugeVec
	paused         prometheus.Gauge
	passFailures   prometheus.Counter
	cycle          prometheus.Histogram
	lastPass       prometheus.Gauge
}

func newReconcilerMetrics() *reconcilerMetrics {
	m := &reconcilerMetrics{
		reg: prometheus.NewRegistry(),
		decided: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "opsdesk_reconciler_decided_total",
			Help: "Stuck records the reconciler decided, by tool and lookup verdict."}, []string{"tool", "verdict"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "opsdesk_reconciler_skipped_total",
			Help: "Stuck records the reconciler left undecided in a pass, by tool and reason."}, []string{"tool", "reason"}),
		providerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "opsdesk_reconciler_provider_errors_total",
			Help: "Lookups that failed or gave no definite answer, by tool."}, []string{"tool"}),
		providerDown: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "opsdesk_reconciler_provider_down",
			Help: "1 when the tool's lookup error rate passed --max-error-rate in the last pass: nothing of it was decided."}, []string{"tool"}),
		deciding: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "opsdesk_reconciler_deciding",
			Help: "1 when the last pass could decide the tool's records (not paused, let by the store's allowlist, its provider " +
				"answering), 0 when it could not: its stuck records wait for people."}, []string{"tool"}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "opsdesk_reconciler_paused",
			Help: "1 when the last pass found the reconciler paused by an admin (opsdesk reconciler pause)."}),
		passFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "opsdesk_reconciler_pass_failures_total",
			Help: "Passes that could not read the store or its settings."}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "opsdesk_reconciler_cycle_duration_seconds",
			Help: "How long a pass took.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{Name: "opsdesk_reconciler_last_pass_timestamp_seconds",
			Help: "When the last pass ended (Unix time), whatever it found."}),
	}
	m.reg.MustRegister(m.decided, m.skipped, m.providerErrors, m.providerDown, m.deciding, m.paused, m.passFailures, m.cycle, m.lastPass)
	return m
}

// observe records one pass.
func (m *reconcilerMetrics) observe(rep auto.Report, err error) {
	m.cycle.Observe(rep.Took.Seconds())
	m.lastPass.SetToCurrentTime()
	for tool, ok := range rep.Deciding {
		m.deciding.WithLabelValues(tool).Set(map[bool]float64{true: 1}[ok && err == nil])
	}
	if err != nil {
		m.passFailures.Inc()
		return
	}
	m.paused.Set(map[bool]float64{true: 1}[rep.Paused])
	for _, rec := range rep.Records {
		if rec.Outcome == "decided" {
			m.decided.WithLabelValues(rec.Tool, string(rec.Verdict)).Inc()
			continue
		}
		m.skipped.WithLabelValues(rec.Tool, rec.Outcome).Inc()
	}
	if n := rep.Skipped[auto.SkipTooMany]; n > 0 {
		m.skipped.WithLabelValues("", auto.SkipTooMany).Add(float64(n))
	}
	for tool, n := range rep.ProviderErrors {
		m.providerErrors.WithLabelValues(tool).Add(float64(n))
	}
	m.providerDown.Reset()
	for _, tool := range rep.ProviderDown {
		m.providerDown.WithLabelValues(tool).Set(1)
	}
}

func (m *reconcilerMetrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux
}
