package opsprom_test

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsprom"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func newRegistered(t *testing.T, o opsprom.Config) (*opsprom.Metrics, *prometheus.Registry) {
	t.Helper()
	m, err := opsprom.New(o)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	return m, reg
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o    opsprom.Config
		want string
	}{
		{opsprom.Config{Namespace: "1opsdesk"}, `namespace "1opsdesk"`},
		{opsprom.Config{Namespace: "ops-desk"}, `namespace "ops-desk"`},
		{opsprom.Config{Namespace: "ops\ndesk"}, `namespace "ops\ndesk"`},
		{opsprom.Config{Buckets: []float64{}}, "at least one"},
		{opsprom.Config{Buckets: []float64{0.1, 0.1}}, "bound 1 (0.1) is not above bound 0 (0.1)"},
		{opsprom.Config{Buckets: []float64{1, 0.5}}, "must increase strictly"},
		{opsprom.Config{Buckets: []float64{math.NaN()}}, "bound 0 is NaN"},
	} {
		m, err := opsprom.New(c.o)
		require.ErrorContains(t, err, c.want)
		require.Nil(t, m)
	}
}

// TestNilMetricsIsRefused: a *Metrics left nil (its New failed, or it
// was only declared) set in ops.Config is refused by ops.New, rather than
// panicking inside the first call, after its operation ran.
func TestNilMetricsIsRefused(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none") // no I/O: New connects lazily
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var m *opsprom.Metrics
	store, err := ops.New(pool, ops.Config{Metrics: m})
	require.ErrorContains(t, err, "Config.Metrics is a nil *opsprom.Metrics")
	require.Nil(t, store)

	m, err = opsprom.New(opsprom.Config{})
	require.NoError(t, err)
	_, err = ops.New(pool, ops.Config{Metrics: m})
	require.NoError(t, err)
}

// TestHostileLabelValues: names no ops.Store passes (a newline, bytes that
// are not UTF-8) given to the hook directly still make valid exposition
// that reads back as written.
func TestHostileLabelValues(t *testing.T) {
	t.Parallel()
	const tool = "charge\n\"card\"\\\u3000☃"
	m, reg := newRegistered(t, opsprom.Config{TenantLabel: true})
	m.Event(tool, "acme\xff", ops.EventTakeover)
	m.CallFinished(tool, "acme\xff", ops.ClassCreated, time.Millisecond)
	m.StageFinished(tool, "acme\xff", ops.StageCall, time.Millisecond)

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
	const expected = `
# HELP opsdesk_ops_takeovers_total Pending records whose lease had expired, taken over by a new attempt.
# TYPE opsdesk_ops_takeovers_total counter
opsdesk_ops_takeovers_total{tenant="acme` + "\uFFFD" + `",tool="charge\n\"card\"\\` + "\u3000☃" + `"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), "opsdesk_ops_takeovers_total"))

	// The text exposition parses back to the same values.
	families, err := reg.Gather()
	require.NoError(t, err)
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		require.NoError(t, enc.Encode(f))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(&text)
	require.NoError(t, err)
	require.Len(t, parsed, len(families))
	for _, f := range parsed {
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				switch l.GetName() {
				case "tool":
					require.Equal(t, tool, l.GetValue())
				case "tenant":
					require.Equal(t, "acme\uFFFD", l.GetValue())
				}
			}
		}
	}
}

func TestTenantLabelOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, labelled := range []bool{false, true} {
		m, reg := newRegistered(t, opsprom.Config{TenantLabel: labelled})
		m.CallFinished("charge-card", "acme", ops.ClassCreated, time.Millisecond)
		m.CallFinished("charge-card", "globex", ops.ClassCreated, time.Millisecond)
		m.Event("charge-card", "globex", ops.EventIntentConflict)
		families, err := reg.Gather()
		require.NoError(t, err)
		created := map[string]float64{}
		for _, f := range families {
			for _, metric := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range metric.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				tenant, has := labels["tenant"]
				require.Equal(t, labelled, has, "%s %v", f.GetName(), labels)
				if f.GetName() == "opsdesk_ops_calls_total" && labels["answer"] == "created" {
					created[tenant] = metric.GetCounter().GetValue()
				}
			}
		}
		if labelled {
			require.Equal(t, map[string]float64{"acme": 1, "globex": 1}, created)
		} else {
			require.Equal(t, map[string]float64{"": 2}, created)
		}
	}
}

func TestNamespaceAndBuckets(t *testing.T) {
	t.Parallel()
	m, reg := newRegistered(t, opsprom.Config{Namespace: "acme", Buckets: []float64{0.01, 1}})
	m.StageFinished("create-ticket", "", ops.StageReserve, 5*time.Millisecond)
	m.StageFinished("create-ticket", "", ops.StageReserve, 2*time.Second)
	const expected = `
# HELP acme_ops_step_duration_seconds Duration of a call's steps: reserve (up to the function's call, or the answer when it does not run), call (the function's own time) and complete (from its return to the answer).
# TYPE acme_ops_step_duration_seconds histogram
acme_ops_step_duration_seconds_bucket{step="reserve",tool="create-ticket",le="0.01"} 1
acme_ops_step_duration_seconds_bucket{step="reserve",tool="create-ticket",le="1"} 1
acme_ops_step_duration_seconds_bucket{step="reserve",tool="create-ticket",le="+Inf"} 2
acme_ops_step_duration_seconds_sum{step="reserve",tool="create-ticket"} 2.005
acme_ops_step_duration_seconds_count{step="reserve",tool="create-ticket"} 2
acme_ops_step_duration_seconds_bucket{step="call",tool="create-ticket",le="0.01"} 0
acme_ops_step_duration_seconds_bucket{step="call",tool="create-ticket",le="1"} 0
acme_ops_step_duration_seconds_bucket{step="call",tool="create-ticket",le="+Inf"} 0
acme_ops_step_duration_seconds_sum{step="call",tool="create-ticket"} 0
acme_ops_step_duration_seconds_count{step="call",tool="create-ticket"} 0
acme_ops_step_duration_seconds_bucket{step="complete",tool="create-ticket",le="0.01"} 0
acme_ops_step_duration_seconds_bucket{step="complete",tool="create-ticket",le="1"} 0
acme_ops_step_duration_seconds_bucket{step="complete",tool="create-ticket",le="+Inf"} 0
acme_ops_step_duration_seconds_sum{step="complete",tool="create-ticket"} 0
acme_ops_step_duration_seconds_count{step="complete",tool="create-ticket"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), "acme_ops_step_duration_seconds"))
	// A tool's series appear at once, at zero: 15 answers, 5 events.
	require.Equal(t, len(ops.CallClasses())+len(ops.Events())+len(ops.Stages()), testutil.CollectAndCount(m))
}

// TestValuesOfLaterVersions: an answer, step or event this package does
// not know is counted as an error, or ignored, never a panic.
func TestValuesOfLaterVersions(t *testing.T) {
	t.Parallel()
	m, reg := newRegistered(t, opsprom.Config{})
	m.CallFinished("t", "", ops.CallClass(200), time.Millisecond)
	m.StageFinished("t", "", ops.Stage(200), time.Millisecond)
	m.Event("t", "", ops.Event(200))
	const expected = `
# HELP opsdesk_ops_takeovers_total Pending records whose lease had expired, taken over by a new attempt.
# TYPE opsdesk_ops_takeovers_total counter
opsdesk_ops_takeovers_total{tool="t"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), "opsdesk_ops_takeovers_total"))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "opsdesk_ops_calls_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			want := 0.0
			if metric.GetLabel()[0].GetValue() == "error" { // labels sort: answer, tool
				want = 1
			}
			require.Equal(t, want, metric.GetCounter().GetValue(), "%v", metric.GetLabel())
		}
	}
}

// TestNoAllocationsPerCall: once a tool's series exist, reporting a call
// allocates nothing, with or without the tenant label. Not parallel:
// AllocsPerRun counts the whole process's allocations.
func TestNoAllocationsPerCall(t *testing.T) {
	for _, labelled := range []bool{false, true} {
		m, _ := newRegistered(t, opsprom.Config{TenantLabel: labelled})
		tool, tenant := strings.Clone("create-ticket"), strings.Clone("acme")
		report := func() {
			m.StageFinished(tool, tenant, ops.StageReserve, time.Millisecond)
			m.StageFinished(tool, tenant, ops.StageCall, time.Millisecond)
			m.StageFinished(tool, tenant, ops.StageComplete, time.Millisecond)
			m.Event(tool, tenant, ops.EventTakeover)
			m.CallFinished(tool, tenant, ops.ClassCreated, 3*time.Millisecond)
		}
		report()
		require.Zero(t, testing.AllocsPerRun(1000, report), "tenant label %v", labelled)
	}
}

// TestConcurrentUse: calls of many tools from many goroutines, each
// counted once (run with -race).
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	m, reg := newRegistered(t, opsprom.Config{TenantLabel: true})
	const goroutines, calls = 8, 500
	tools := []string{"a", "b", "c"}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				m.CallFinished(tools[(g+i)%len(tools)], "acme", ops.ClassReplayed, time.Millisecond)
			}
		})
	}
	wg.Wait()
	families, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() == "opsdesk_ops_calls_total" {
			for _, metric := range f.GetMetric() {
				total += metric.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, float64(goroutines*calls), total)
}

// BenchmarkReportCall: what the hook costs per call (three steps and the
// answer), from 8 goroutines on the same tool's series, as a busy service
// would call it.
func BenchmarkReportCall(b *testing.B) {
	m, err := opsprom.New(opsprom.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.StageFinished("create-ticket", "acme", ops.StageReserve, 300*time.Microsecond)
			m.StageFinished("create-ticket", "acme", ops.StageCall, 200*time.Microsecond)
			m.StageFinished("create-ticket", "acme", ops.StageComplete, 400*time.Microsecond)
			m.CallFinished("create-ticket", "acme", ops.ClassCreated, 900*time.Microsecond)
		}
	})
}
