package ops_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsprom"
)

func init() {
	// BenchmarkDoTxCreateMetrics (package ops) measures the Prometheus
	// hook, which that package's own test files cannot import.
	ops.BenchMetrics = func() ops.Metrics {
		m, err := opsprom.New(opsprom.Config{})
		if err != nil {
			panic(err)
		}
		prometheus.NewRegistry().MustRegister(m)
		return m
	}
}

// moves are how much each series moved: a counter's value, a histogram's
// sample count (name_count), keyed by name (without opsdesk_ops_) and
// labels.
type moves map[string]float64

func callOf(tool, answer string) string {
	return fmt.Sprintf("calls_total{answer=%q,tool=%q}", answer, tool)
}

func eventOf(name, tool string) string { return fmt.Sprintf("%s{tool=%q}", name, tool) }

// stepsOf are the step samples of one call: reserve, and call and
// complete when fn ran.
func stepsOf(tool string, fnRan bool) moves {
	m := moves{fmt.Sprintf("step_duration_seconds_count{step=\"reserve\",tool=%q}", tool): 1}
	if fnRan {
		m[fmt.Sprintf("step_duration_seconds_count{step=\"call\",tool=%q}", tool)] = 1
		m[fmt.Sprintf("step_duration_seconds_count{step=\"complete\",tool=%q}", tool)] = 1
	}
	return m
}

// with returns m plus the series in keys, one each.
func (m moves) with(keys ...string) moves {
	for _, k := range keys {
		m[k]++
	}
	return m
}

// sample flattens what g gathers into moves.
func sample(t *testing.T, g prometheus.Gatherer) moves {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	out := moves{}
	for _, f := range families {
		name := strings.TrimPrefix(f.GetName(), "opsdesk_ops_")
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			ls := "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+ls] = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+ls] = float64(m.GetHistogram().GetSampleCount())
			default:
				t.Fatalf("unexpected metric type %s of %s", f.GetType(), f.GetName())
			}
		}
	}
	return out
}

// metered is a test database with a store reporting to a registry.
type metered struct {
	*bundle
	reg     *prometheus.Registry
	metrics *opsprom.Metrics
	store   *ops.Store
}

func setupMetered(t *testing.T, cfg ops.Config) *metered {
	t.Helper()
	b := setup(t)
	m, err := opsprom.New(opsprom.Config{})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	cfg.Metrics = m
	if cfg.Owner == "" {
		cfg.Owner = "worker-metered"
	}
	return &metered{bundle: b, reg: reg, metrics: m, store: newStore(t, b.db.Service, cfg)}
}

// expect runs action and requires the metrics to have moved by exactly
// want: nothing else moved.
func (m *metered) expect(t *testing.T, want moves, action func()) {
	t.Helper()
	before := sample(t, m.reg)
	action()
	require.Equal(t, want, sample(t, m.reg).since(before))
}

// since returns how far each series of m moved since before.
func (m moves) since(before moves) moves {
	moved := moves{}
	for k, v := range m {
		if d := v - before[k]; d != 0 {
			moved[k] = d
		}
	}
	return moved
}

func TestMetricsCountEachAnswer(t *testing.T) {
	t.Parallel()

	t.Run("DoTxCreatedReplayedConflictRejectedError", func(t *testing.T) {
		t.Parallel()
		m := setupMetered(t, ops.Config{})
		intent := ticketIntent{Title: "Printer on fire", Priority: 2}
		do := func(key string, intent ticketIntent) (ops.Reply[ticketResult], error) {
			return ops.DoTx(m.ctx, m.store, ticketReq("acme", key, intent), createTicket("acme", key, intent.Title))
		}

		m.expect(t, stepsOf(toolTicket, true).with(callOf(toolTicket, "created")), func() {
			out, err := do("k1", intent)
			require.NoError(t, err)
			require.Equal(t, ops.Created, out.Disposition)
		})
		m.expect(t, stepsOf(toolTicket, false).with(callOf(toolTicket, "replayed")), func() {
			out, err := do("k1", intent)
			require.NoError(t, err)
			require.Equal(t, ops.Replayed, out.Disposition)
		})
		m.expect(t, stepsOf(toolTicket, false).with(callOf(toolTicket, "conflict"), eventOf("intent_conflicts_total", toolTicket)), func() {
			_, err := do("k1", ticketIntent{Title: "Printer on fire", Priority: 1})
			require.ErrorIs(t, err, ops.ErrIntentConflict)
		})

		reject := func(context.Context, pgx.Tx) (ticketResult, error) {
			return ticketResult{}, ops.Reject(map[string]string{"reason": "duplicate ticket"})
		}
		m.expect(t, stepsOf(toolTicket, true).with(callOf(toolTicket, "rejected")), func() {
			_, err := ops.DoTx(m.ctx, m.store, ticketReq("acme", "k2", intent), reject)
			var rej *ops.RejectedError
			require.ErrorAs(t, err, &rej)
			require.False(t, rej.Replayed)
		})
		// A replayed rejection is a replay: nothing ran.
		m.expect(t, stepsOf(toolTicket, false).with(callOf(toolTicket, "replayed")), func() {
			_, err := ops.DoTx(m.ctx, m.store, ticketReq("acme", "k2", intent), reject)
			var rej *ops.RejectedError
			require.ErrorAs(t, err, &rej)
			require.True(t, rej.Replayed)
		})

		m.expect(t, stepsOf(toolTicket, true).with(callOf(toolTicket, "error")), func() {
			_, err := ops.DoTx(m.ctx, m.store, ticketReq("acme", "k3", intent), func(context.Context, pgx.Tx) (ticketResult, error) {
				return ticketResult{}, errors.New("printer service down")
			})
			require.EqualError(t, err, "printer service down")
		})

		cancelled, cancel := context.WithCancel(m.ctx)
		cancel()
		m.expect(t, stepsOf(toolTicket, false).with(callOf(toolTicket, "unavailable")), func() {
			_, err := ops.DoTx(cancelled, m.store, ticketReq("acme", "k4", intent), createTicket("acme", "k4", intent.Title))
			require.ErrorIs(t, err, ops.ErrUnavailable)
		})
		require.Equal(t, 1, m.tickets(t))
	})

	t.Run("InvalidRequests", func(t *testing.T) {
		t.Parallel()
		m := setupMetered(t, ops.Config{MaxResultBytes: 64})
		never := func(context.Context, pgx.Tx) (ticketResult, error) {
			t.Error("fn ran for an invalid request")
			return ticketResult{}, nil
		}
		// Refused before the store: no steps.
		m.expect(t, moves{callOf(toolTicket, "invalid_request"): 1}, func() {
			_, err := ops.DoTx(m.ctx, m.store, ticketReq("acme", "k1", ticketIntent{Title: "", Priority: 9}), never)
			require.ErrorIs(t, err, ops.ErrInvalidRequest)
		})
		m.expect(t, moves{callOf(toolEmail, "invalid_request"): 1}, func() {
			_, err := ops.DoTx(m.ctx, m.store, emailReq("k1"), never)
			require.ErrorIs(t, err, ops.ErrWrongEffect)
		})
		// A tool the store does not know, or an invalid one, is never a
		// label value: the caller's string is unbounded.
		m.expect(t, moves{callOf("", "invalid_request"): 3}, func() {
			for _, tool := range []string{"launch-rocket", "bad\ntool", "bad\xfftool"} {
				_, err := ops.DoTx(m.ctx, m.store, externalReq(tool, "k1", printer), never)
				require.True(t, errors.Is(err, ops.ErrUnknownTool) || errors.Is(err, ops.ErrInvalidRequest), "%q: %v", tool, err)
			}
		})
		// A result over the limit: fn ran, and its writes rolled back.
		m.expect(t, stepsOf(toolTicket, true).with(callOf(toolTicket, "invalid_request")), func() {
			_, err := ops.DoTx(m.ctx, m.store, ticketReq("acme", "k2", printer), func(context.Context, pgx.Tx) (map[string]string, error) {
				return map[string]string{"text": strings.Repeat("x", 100)}, nil
			})
			require.ErrorIs(t, err, ops.ErrInvalidRequest)
		})
	})

	t.Run("InProgressOutcomeUnknownNeedsReconciliation", func(t *testing.T) {
		t.Parallel()
		m := setupMetered(t, ops.Config{})
		p := newProvider()
		const key = "k-charge"
		started, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := ops.DoExternal(m.ctx, m.store, chargeReq(key), func(ctx context.Context, a ops.Attempt) (receipt, error) {
				close(started)
				<-release
				return receipt{}, errors.New("provider: read tcp: i/o timeout")
			})
			done <- err
		}()
		receive(t, started, "the provider call to start")
		before := sample(t, m.reg)
		m.expect(t, stepsOf(toolCharge, false).with(callOf(toolCharge, "in_progress")), func() {
			_, err := ops.DoExternal(m.ctx, m.store, chargeReq(key), neverCalled[receipt](t))
			require.ErrorIs(t, err, ops.ErrInProgress)
		})
		close(release)
		require.ErrorIs(t, receive(t, done, "the provider call to end"), ops.ErrOutcomeUnknown)
		// Both calls, the first reported when it ended.
		want := stepsOf(toolCharge, true).with(callOf(toolCharge, "outcome_unknown"))
		for k, v := range stepsOf(toolCharge, false).with(callOf(toolCharge, "in_progress")) {
			want[k] += v
		}
		require.Equal(t, want, sample(t, m.reg).since(before))

		m.waitStuck(t, toolCharge, "acme", key)
		m.expect(t, stepsOf(toolCharge, false).with(callOf(toolCharge, "needs_reconciliation")), func() {
			_, err := ops.DoExternal(m.ctx, m.store, chargeReq(key), p.send)
			require.ErrorIs(t, err, ops.ErrNeedsReconciliation)
		})
		require.Empty(t, p.attempts(key))
	})

	t.Run("TakeoverOfAnExpiredLease", func(t *testing.T) {
		t.Parallel()
		m := setupMetered(t, ops.Config{})
		p := newProvider()
		m.expect(t, stepsOf(toolEmail, true).with(callOf(toolEmail, "outcome_unknown")), func() {
			_, err := ops.DoExternal(m.ctx, m.store, emailReq("k1"), p.failWith(errors.New("provider: connection reset")))
			require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
		})
		m.expect(t, stepsOf(toolEmail, true).with(callOf(toolEmail, "created"), eventOf("takeovers_total", toolEmail)), func() {
			out, err := ops.DoExternal(m.ctx, m.store, emailReq("k1"), p.send)
			require.NoError(t, err)
			require.Equal(t, 2, out.Attempt)
		})

		// A released record runs again, but nobody's lease was taken.
		m.expect(t, stepsOf(toolEmail, true).with(callOf(toolEmail, "error")), func() {
			_, err := ops.DoExternal(m.ctx, m.store, emailReq("k2"), p.failWith(ops.NotApplied(errors.New("mailbox full"))))
			require.ErrorIs(t, err, ops.ErrNotApplied)
		})
		m.expect(t, stepsOf(toolEmail, true).with(callOf(toolEmail, "created")), func() {
			out, err := ops.DoExternal(m.ctx, m.store, emailReq("k2"), p.send)
			require.NoError(t, err)
			require.Equal(t, 2, out.Attempt)
		})
	})

	t.Run("OwnershipLost", func(t *testing.T) {
		t.Parallel()
		m := setupMetered(t, ops.Config{})
		takeAway := func(t *testing.T, a ops.Attempt) {
			tag, err := m.db.Admin.Exec(m.ctx, `UPDATE opsdesk.operations SET attempt = attempt + 1, owner = 'worker-2'
				WHERE tenant = $1 AND tool = $2 AND key = $3`, a.Tenant, a.Tool, a.Key)
			require.NoError(t, err)
			require.EqualValues(t, 1, tag.RowsAffected())
		}
		waitCancelled := func(t *testing.T, ctx context.Context) {
			select {
			case <-ctx.Done():
				require.ErrorIs(t, context.Cause(ctx), ops.ErrLeaseLost)
			case <-time.After(20 * time.Second):
				t.Fatal("the call's context was never cancelled after its lease was taken")
			}
		}
		lost := eventOf("ownership_lost_total", toolCharge)

		// The lease keeper finds the record taken and cancels the call.
		m.expect(t, stepsOf(toolCharge, true).with(callOf(toolCharge, "outcome_unknown"), lost), func() {
			_, err := ops.DoExternal(m.ctx, m.store, chargeReq("k1"), func(ctx context.Context, a ops.Attempt) (receipt, error) {
				takeAway(t, a)
				waitCancelled(t, ctx)
				return receipt{}, context.Cause(ctx)
			})
			require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
			require.ErrorIs(t, err, ops.ErrLeaseLost)
		})
		// The completion is refused before any renewal noticed.
		m.expect(t, stepsOf(toolCharge, true).with(callOf(toolCharge, "lost_ownership"), lost), func() {
			_, err := ops.DoExternal(m.ctx, m.store, chargeReq("k2"), func(ctx context.Context, a ops.Attempt) (receipt, error) {
				takeAway(t, a)
				return receipt{ID: "ch_1"}, nil
			})
			require.ErrorIs(t, err, ops.ErrLostOwnership)
		})
		// Both: the lease keeper cancels, the function finishes anyway and
		// its completion is refused. One attempt, one loss.
		m.expect(t, stepsOf(toolCharge, true).with(callOf(toolCharge, "lost_ownership"), lost), func() {
			_, err := ops.DoExternal(m.ctx, m.store, chargeReq("k3"), func(ctx context.Context, a ops.Attempt) (receipt, error) {
				takeAway(t, a)
				waitCancelled(t, ctx)
				return receipt{ID: "ch_2"}, nil
			})
			require.ErrorIs(t, err, ops.ErrLostOwnership)
		})
	})

	t.Run("ResultNotStored", func(t *testing.T) {
		t.Parallel()
		m := setupMetered(t, ops.Config{MaxResultBytes: 64})
		big := func(_ context.Context, a ops.Attempt) (Report, error) {
			return Report{ID: "rep_1", CSV: strings.Repeat("row\n", 100)}, nil
		}
		m.expect(t, stepsOf(toolEmail, true).with(callOf(toolEmail, "created")), func() {
			out, err := ops.DoExternal(m.ctx, m.store, emailReq("k1"), big)
			require.NoError(t, err)
			require.NotNil(t, out.NotStored)
		})
		m.expect(t, stepsOf(toolEmail, false).with(callOf(toolEmail, "result_not_stored")), func() {
			_, err := ops.DoExternal(m.ctx, m.store, emailReq("k1"), big)
			require.ErrorIs(t, err, ops.ErrResultNotStored)
		})
	})
}

// TestMetricsUnderFaults produces a failed lease renewal, a lease lost to
// failing renewals and an outcome not recorded by holding the statements
// in the database (see fault_test.go).
func TestMetricsUnderFaults(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	f := newFaultDB(t, d.AdminDSN, d.ServiceDSN, nil)
	m, err := opsprom.New(opsprom.Config{})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	mt := &metered{bundle: &bundle{ctx: t.Context(), db: d}, reg: reg, metrics: m,
		store: newStore(t, f.service, ops.Config{Owner: "worker-metered", Tools: faultTools(), Metrics: m})}
	const renewal = "%SET lease_expires_at = clock_timestamp() +%"

	t.Run("OneFailedRenewal", func(t *testing.T) {
		mt.expect(t, stepsOf(toolRenewing, true).with(callOf(toolRenewing, "created"), eventOf("lease_renewal_failures_total", toolRenewing)), func() {
			err := f.inject(t, renewal, terminate, func(ctx context.Context) error {
				return callUntilRenewed(ctx, f, mt.store, "k-renewal")
			})
			require.NoError(t, err, "the next renewal renews the lease")
		})
	})

	t.Run("RenewalsFailUntilTheLeaseIsLost", func(t *testing.T) {
		// Every renewal is held past its own timeout (a third of the
		// lease) until the lease keeper gives the lease up.
		before := sample(t, reg)
		f.arm(t, renewal)
		_, err := ops.DoExternal(t.Context(), mt.store, emailReq("k-lapse"), func(ctx context.Context, a ops.Attempt) (receipt, error) {
			select {
			case <-ctx.Done():
				return receipt{}, context.Cause(ctx)
			case <-time.After(20 * time.Second):
				return receipt{}, errors.New("the lease keeper never gave up")
			}
		})
		f.disarm(t)
		require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
		require.ErrorIs(t, err, ops.ErrLeaseLost)
		got := sample(t, reg).since(before)
		// How many renewals were tried before the lease ran out depends
		// on the scheduler: at least one, at most one per renewal interval
		// of the lease.
		failures := eventOf("lease_renewal_failures_total", toolEmail)
		require.GreaterOrEqual(t, got[failures], 1.0)
		require.LessOrEqual(t, got[failures], 3.0)
		delete(got, failures)
		require.Equal(t, stepsOf(toolEmail, true).with(callOf(toolEmail, "outcome_unknown"), eventOf("ownership_lost_total", toolEmail)), got)
	})

	t.Run("OutcomeNotRecorded", func(t *testing.T) {
		mt.expect(t, stepsOf(toolEmail, true).with(callOf(toolEmail, "not_recorded"), eventOf("results_not_recorded_total", toolEmail)), func() {
			err := f.inject(t, "%SET state = 'completed'%", terminate, func(ctx context.Context) error {
				_, err := ops.DoExternal(ctx, mt.store, emailReq("k-not-recorded"), f.provider.send)
				return err
			})
			require.ErrorIs(t, err, ops.ErrNotRecorded)
		})
	})
}

// TestMetricsNeverCarryKeyIntentOrResult runs every kind of answer with a
// marker in the key, the intent, the result, the rejection and fn's error,
// and looks for it in every metric's labels and in the exposition.
func TestMetricsNeverCarryKeyIntentOrResult(t *testing.T) {
	t.Parallel()
	const marker = "LEAK-b7e1c4"
	b := setup(t)
	m, err := opsprom.New(opsprom.Config{TenantLabel: true})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	store := newStore(t, b.db.Service, ops.Config{Owner: "worker-leak", Metrics: m})
	key := "k-" + marker
	intent := ticketIntent{Title: marker, Priority: 2}
	type leaky struct {
		Note string `json:"note"`
	}
	withResult := func(context.Context, pgx.Tx) (leaky, error) { return leaky{Note: marker}, nil }

	for range 2 { // created, replayed
		_, err := ops.DoTx(b.ctx, store, ticketReq("acme", key, intent), withResult)
		require.NoError(t, err)
	}
	_, err = ops.DoTx(b.ctx, store, ticketReq("acme", key, ticketIntent{Title: marker + "!", Priority: 2}), withResult)
	require.ErrorIs(t, err, ops.ErrIntentConflict)
	_, err = ops.DoTx(b.ctx, store, ticketReq("acme", key+"-r", intent), func(context.Context, pgx.Tx) (leaky, error) {
		return leaky{}, ops.Reject(leaky{Note: marker})
	})
	require.ErrorIs(t, err, ops.ErrRejected)
	_, err = ops.DoTx(b.ctx, store, ticketReq("acme", key+"-e", intent), func(context.Context, pgx.Tx) (leaky, error) {
		return leaky{}, errors.New(marker)
	})
	require.EqualError(t, err, marker)
	_, err = ops.DoTx(b.ctx, store, ticketReq("acme", key+"-i", ticketIntent{Title: marker}), withResult)
	require.ErrorIs(t, err, ops.ErrInvalidRequest)
	_, err = ops.DoExternal(b.ctx, store, chargeReq(key), func(context.Context, ops.Attempt) (leaky, error) {
		return leaky{}, errors.New(marker)
	})
	require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
	_, err = ops.DoExternal(b.ctx, store, chargeReq(key), func(context.Context, ops.Attempt) (leaky, error) { return leaky{Note: marker}, nil })
	require.ErrorIs(t, err, ops.ErrNeedsReconciliation)

	families, err := reg.Gather()
	require.NoError(t, err)
	require.NotEmpty(t, families)
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	answers := map[string]bool{}
	for _, f := range families {
		require.NotContains(t, f.GetName()+f.GetHelp(), marker)
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				require.NotContains(t, l.GetName()+"="+l.GetValue(), marker, f.GetName())
				require.Contains(t, []string{"tool", "tenant", "answer", "step"}, l.GetName())
				if l.GetName() == "answer" && metric.GetCounter().GetValue() > 0 {
					answers[l.GetValue()] = true
				}
			}
		}
		require.NoError(t, enc.Encode(f))
	}
	require.Equal(t, map[string]bool{"created": true, "replayed": true, "conflict": true, "rejected": true, "error": true,
		"invalid_request": true, "outcome_unknown": true, "needs_reconciliation": true}, answers, "every call was counted")
	require.NotContains(t, text.String(), marker)
	require.Contains(t, text.String(), `tenant="acme"`)
}

// TestMetricsHostileNames: a tool named with quotes, backslashes, braces
// and non-ASCII letters (all a policy may hold) is exported as it is, in
// valid exposition; a tenant or tool a policy may not hold (a newline, a
// byte that is not UTF-8) never reaches a label.
func TestMetricsHostileNames(t *testing.T) {
	t.Parallel()
	const hostile = `we"ird\tool},{x="1"` + " \u3000☃\u202e"
	b := setup(t)
	m, err := opsprom.New(opsprom.Config{TenantLabel: true})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	store := newStore(t, b.db.Service, ops.Config{Owner: "worker-hostile", Metrics: m,
		Tools: map[string]ops.Policy{hostile: {Effect: ops.EffectLocal}}})
	req := func(tenant, tool string, intent ticketIntent) ops.Request {
		return ops.Request{Identity: ops.Identity{Tenant: tenant, Tool: tool, Key: "k1"}, Version: "1", Intent: intent}
	}
	for _, intent := range []ticketIntent{printer, printer, {Title: "other", Priority: 1}} { // created, replayed, conflict
		_, err := ops.DoTx(b.ctx, store, req(hostile, hostile, intent), createTicket("acme", "k1", "x"))
		require.True(t, err == nil || errors.Is(err, ops.ErrIntentConflict), "%v", err)
	}
	for _, bad := range [][2]string{{"acme\nevil", hostile}, {"acme\xff", hostile}, {"acme", "tool\n# EOF"}} {
		_, err := ops.DoTx(b.ctx, store, req(bad[0], bad[1], printer), createTicket("acme", "k1", "x"))
		require.ErrorIs(t, err, ops.ErrInvalidRequest)
	}

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
	// Written by hand: the exposition escapes the quote and the backslash,
	// and keeps the rest as it is. The invalid tenants and tool are
	// counted with empty labels.
	const expected = `
# HELP opsdesk_ops_intent_conflicts_total Calls that reused a key with a different intent: the attempt was recorded for review (or may have been, when the answer to that write was lost).
# TYPE opsdesk_ops_intent_conflicts_total counter
opsdesk_ops_intent_conflicts_total{tenant="",tool="we\"ird\\tool},{x=\"1\" ` + "\u3000☃\u202e" + `"} 0
opsdesk_ops_intent_conflicts_total{tenant="acme",tool=""} 0
opsdesk_ops_intent_conflicts_total{tenant="we\"ird\\tool},{x=\"1\" ` + "\u3000☃\u202e" + `",tool="we\"ird\\tool},{x=\"1\" ` + "\u3000☃\u202e" + `"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), "opsdesk_ops_intent_conflicts_total"))
	calls := sample(t, reg)
	require.Equal(t, 1.0, calls[fmt.Sprintf("calls_total{answer=\"created\",tenant=%q,tool=%q}", hostile, hostile)])
	require.Equal(t, 1.0, calls[fmt.Sprintf("calls_total{answer=\"replayed\",tenant=%q,tool=%q}", hostile, hostile)])
	require.Equal(t, 2.0, calls[fmt.Sprintf("calls_total{answer=\"invalid_request\",tenant=\"\",tool=%q}", hostile)])
	require.Equal(t, 1.0, calls[`calls_total{answer="invalid_request",tenant="acme",tool=""}`])
}
