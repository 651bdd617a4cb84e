// Package opsprom exports the ops library's own metrics to Prometheus: it
// implements ops.Metrics and prometheus.Collector.
//
//	m, err := opsprom.New(opsprom.Config{})
//	if err != nil { … }
//	registry.MustRegister(m)
//	store, err := ops.New(pool, ops.Config{Tools: tools, Metrics: m})
//
// The metrics (with the default namespace; tenant only with
// Config.TenantLabel):
//
//	opsdesk_ops_calls_total{tool, answer}                   calls by answer (ops.CallClass)
//	opsdesk_ops_intent_conflicts_total{tool}                keys reused with another intent
//	opsdesk_ops_takeovers_total{tool}                       expired leases taken over
//	opsdesk_ops_lease_renewal_failures_total{tool}          lease renewals that failed
//	opsdesk_ops_ownership_lost_total{tool}                  attempts that lost their record
//	opsdesk_ops_results_not_recorded_total{tool}            finished external calls whose outcome was not stored
//	opsdesk_ops_step_duration_seconds{tool, step}           reserve, call and complete durations
//
// No label ever holds a key, an intent or a result: the library gives the
// hook none of them.
package opsprom

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsdesk/opsdesk/ops"
)

// DefaultBuckets are the step histogram's upper bounds, in seconds: from
// half a millisecond (a reservation on a nearby server) to a minute (a
// slow provider).
var DefaultBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// DefaultNamespace prefixes every metric's name unless Config.Namespace
// says otherwise.
const DefaultNamespace = "opsdesk"

// Config configures the metrics. The zero value is the default.
type Config struct {
	// Namespace prefixes the metrics' names (default "opsdesk", giving
	// opsdesk_ops_calls_total). The alert rules opsdesk ships expect the
	// default.
	Namespace string
	// TenantLabel adds a tenant label to every metric. Off by default:
	// each tenant multiplies the series of every tool.
	TenantLabel bool
	// Buckets are the step histogram's upper bounds in seconds, strictly
	// increasing (default DefaultBuckets).
	Buckets []float64
}

// Metrics is the Prometheus implementation of ops.Metrics. Register it in
// a registry (it is a prometheus.Collector) and set it as the store's
// Config.Metrics. It is safe for concurrent use, and may serve several
// stores.
type Metrics struct {
	tenant bool
	calls  *prometheus.CounterVec
	events [eventMetrics]*prometheus.CounterVec
	steps  *prometheus.HistogramVec

	// series maps each tool (and tenant) to its series. Calls only read
	// it: a new tool's series are added to a copy, under mu.
	series atomic.Pointer[map[seriesKey]*series]
	mu     sync.Mutex
}

// eventMetrics is the number of ops.Event values this version exports.
const eventMetrics = 5

// eventMetric is each event's counter: its name and help.
var eventMetric = [eventMetrics]struct{ name, help string }{
	ops.EventIntentConflict: {"intent_conflicts_total",
		"Calls that reused a key with a different intent: the attempt was recorded for review (or may have been, when the answer to that write was lost)."},
	ops.EventTakeover: {"takeovers_total",
		"Pending records whose lease had expired, taken over by a new attempt."},
	ops.EventLeaseRenewalFailed: {"lease_renewal_failures_total",
		"Renewals of an external call's lease that failed; once they fail for a lease's length, the call is cancelled."},
	ops.EventOwnershipLost: {"ownership_lost_total",
		"Attempts that lost their record: the lease could not be renewed, or the completion or release was refused because a newer attempt or an operator owns the record."},
	ops.EventResultNotRecorded: {"results_not_recorded_total",
		"External calls that finished but whose outcome could not be stored: the record stays pending and will need reconciliation."},
}

// seriesKey identifies one tool's (and tenant's) series.
type seriesKey struct{ tool, tenant string }

// series are one tool's metrics, resolved once: a call then costs no label
// lookups or allocations.
type series struct {
	calls  []prometheus.Counter // by ops.CallClass
	events [eventMetrics]prometheus.Counter
	steps  []prometheus.Observer // by ops.Stage
}

var namespacePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// New returns the library's metrics, not registered anywhere.
func New(o Config) (*Metrics, error) {
	ns := o.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	if !namespacePattern.MatchString(ns) {
		return nil, fmt.Errorf("opsprom: namespace %q: use letters, digits and underscores, not starting with a digit", ns)
	}
	buckets := o.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	if err := checkBuckets(buckets); err != nil {
		return nil, fmt.Errorf("opsprom: %w", err)
	}
	labels := []string{"tool"}
	if o.TenantLabel {
		labels = append(labels, "tenant")
	}
	m := &Metrics{tenant: o.TenantLabel}
	m.series.Store(&map[seriesKey]*series{})
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "ops", Name: "calls_total",
		Help: "DoTx and DoExternal calls by answer: created, replayed, rejected, or the class of the error the caller got.",
	}, append(labels[:len(labels):len(labels)], "answer"))
	for e, def := range eventMetric {
		m.events[e] = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "ops", Name: def.name, Help: def.help,
		}, labels)
	}
	m.steps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: "ops", Name: "step_duration_seconds",
		Help: "Duration of a call's steps: reserve (up to the function's call, or the answer when it does not run), " +
			"call (the function's own time) and complete (from its return to the answer).",
		Buckets: buckets,
	}, append(labels[:len(labels):len(labels)], "step"))
	return m, nil
}

func checkBuckets(b []float64) error {
	if len(b) == 0 {
		return errors.New("buckets: give at least one upper bound (nil means the defaults)")
	}
	for i, v := range b {
		switch {
		case math.IsNaN(v):
			return fmt.Errorf("buckets: bound %d is NaN", i)
		case i > 0 && v <= b[i-1]:
			return fmt.Errorf("buckets: bound %d (%g) is not above bound %d (%g): they must increase strictly", i, v, i-1, b[i-1])
		}
	}
	return nil
}

// CallFinished implements ops.Metrics.
func (m *Metrics) CallFinished(tool, tenant string, answer ops.CallClass, _ time.Duration) {
	s := m.lookup(tool, tenant)
	if int(answer) < len(s.calls) {
		s.calls[answer].Inc()
		return
	}
	m.calls.WithLabelValues(m.values(tool, tenant, answer.String())...).Inc() // an answer newer than this package
}

// StageFinished implements ops.Metrics.
func (m *Metrics) StageFinished(tool, tenant string, step ops.Stage, d time.Duration) {
	if s := m.lookup(tool, tenant); int(step) < len(s.steps) {
		s.steps[step].Observe(d.Seconds())
	}
}

// Event implements ops.Metrics. Events this version does not know are
// ignored.
func (m *Metrics) Event(tool, tenant string, event ops.Event) {
	if event < eventMetrics {
		m.lookup(tool, tenant).events[event].Inc()
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	for _, e := range m.events {
		e.Describe(ch)
	}
	m.steps.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.calls.Collect(ch)
	for _, e := range m.events {
		e.Collect(ch)
	}
	m.steps.Collect(ch)
}

// lookup returns the series of tool (and tenant, with the tenant label),
// creating them at first use: every answer, event and step of a tool
// appears at once, at zero, so that rates over them are defined.
//
// A read is one atomic load, without the lock every call would otherwise
// contend for. Adding a tool copies the map, which is cheap for tools; with
// the tenant label, n tenants cost O(n²) copying over the process's life.
func (m *Metrics) lookup(tool, tenant string) *series {
	if !m.tenant {
		tenant = ""
	}
	k := seriesKey{tool, tenant}
	if s := (*m.series.Load())[k]; s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	current := *m.series.Load()
	if s := current[k]; s != nil {
		return s
	}
	s := &series{}
	for _, a := range ops.CallClasses() {
		s.calls = append(s.calls, m.calls.WithLabelValues(m.values(tool, tenant, a.String())...))
	}
	for e, vec := range m.events {
		s.events[e] = vec.WithLabelValues(m.values(tool, tenant, "")...)
	}
	for _, p := range ops.Stages() {
		s.steps = append(s.steps, m.steps.WithLabelValues(m.values(tool, tenant, p.String())...))
	}
	next := maps.Clone(current)
	next[k] = s
	m.series.Store(&next)
	return s
}

// values are the label values of a series: tool, tenant when labelled,
// and last (the answer or step) unless empty. A value that is not UTF-8,
// which client_golang refuses, is repaired: ops never passes one, another
// caller might.
func (m *Metrics) values(tool, tenant, last string) []string {
	v := []string{validUTF8(tool)}
	if m.tenant {
		v = append(v, validUTF8(tenant))
	}
	if last != "" {
		v = append(v, last)
	}
	return v
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

var (
	_ ops.Metrics          = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)
