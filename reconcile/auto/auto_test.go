package auto_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/auto"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// The store and the provider are fakes here: what the database enforces
// is tested against the database (reconcile/desk, internal/cli); these
// tests hold the pass's own choices.

const tool = "charge-card"

// fake is a store of stuck rows and a provider answering by key.
type fake struct {
	mu      sync.Mutex
	rows    []readmodel.Row
	answers map[string]reconcile.Answer // by key; none: no answer
	// reread overrides a row's version when it is read again by id.
	reread  map[int64]int64
	refuse  map[int64]error
	decided []reconcile.DecideParams
	asked   int
	// filters are the runs started, by their filters.
	filters []string
	// inFlight and maxInFlight count concurrent decisions.
	inFlight, maxInFlight atomic.Int32
}

func (f *fake) HasLookup(t string) bool { return t == tool || t == "refund-card" }

func (f *fake) Ask(_ context.Context, _, _, key string) (reconcile.Answer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	a, ok := f.answers[key]
	if !ok {
		return reconcile.Answer{Evidence: reconcile.Evidence{Summary: "no answer: connection refused"}, Err: fmt.Errorf("refused")}, true
	}
	return a, true
}

func (f *fake) Decide(_ context.Context, _ string, p reconcile.DecideParams) (reconcile.Result, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxInFlight.Load()
		if n <= m || f.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(5 * time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refuse[p.OperationID]; err != nil {
		return reconcile.Result{Outcome: reconcile.Denied, Entry: 1}, err
	}
	f.decided = append(f.decided, p)
	return reconcile.Result{Outcome: reconcile.Succeeded, Tenant: "acme", Entry: int64(len(f.decided))}, nil
}

func (f *fake) SealResults(context.Context, []*reconcile.Result) error { return nil }

// StartBatch starts a run as the database would: a fresh id each time,
// the filter kept.
func (f *fake) StartBatch(_ context.Context, filter string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filters = append(f.filters, filter)
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", len(f.filters)), nil
}

func (f *fake) List(_ context.Context, q readmodel.Query) (readmodel.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []readmodel.Row
	for _, r := range f.rows {
		if len(q.Filter.Tools) > 0 && !slices.Contains(q.Filter.Tools, r.Tool) {
			continue
		}
		if len(q.Filter.IDs) > 0 {
			if !slices.Contains(q.Filter.IDs, r.ID) {
				continue
			}
			if v, ok := f.reread[r.ID]; ok {
				r.Version = v
			}
		}
		out = append(out, r)
	}
	return readmodel.Page{Rows: out}, nil
}

func found(ref string) reconcile.Answer {
	return reconcile.Answer{ResultRef: ref, Evidence: reconcile.Evidence{Lookup: reconcile.LookupFound, Ref: ref,
		Digest: "sha256:" + ref, Summary: "HTTP 200: found, reference " + ref}}
}

func notFound() reconcile.Answer {
	return reconcile.Answer{Evidence: reconcile.Evidence{Lookup: reconcile.LookupNotFound, Digest: "sha256:nf", Summary: "HTTP 404: not found"}}
}

// store makes n stuck rows k0…k(n-1); answer says each one's lookup.
func store(n int, answer func(i int) (reconcile.Answer, bool)) *fake {
	f := &fake{answers: map[string]reconcile.Answer{}, reread: map[int64]int64{}, refuse: map[int64]error{}}
	for i := range n {
		key := fmt.Sprintf("k%d", i)
		f.rows = append(f.rows, readmodel.Row{ID: int64(i + 1), Tenant: "acme", Tool: tool, Key: key, State: readmodel.StateStuck, Version: 1})
		if a, ok := answer(i); ok {
			f.answers[key] = a
		}
	}
	return f
}

type opts struct {
	allow   []bulk.Verdict
	catalog []bulk.Verdict
	paused  bool
	mutate  func(*auto.Config)
}

func runner(t *testing.T, f *fake, o opts) *auto.Runner {
	t.Helper()
	b, err := bulk.New(bulk.Config{Desk: f, Lister: f, Concurrency: 4})
	require.NoError(t, err)
	if o.allow == nil {
		o.allow = []bulk.Verdict{bulk.Found, bulk.NotFound}
	}
	if o.catalog == nil {
		o.catalog = []bulk.Verdict{bulk.Found, bulk.NotFound}
	}
	cfg := auto.Config{Bulk: b, Desk: f, Lister: f, Tools: map[string][]bulk.Verdict{tool: o.catalog}, Rate: 1000,
		Settings: func(context.Context) (auto.Settings, error) {
			return auto.Settings{Paused: o.paused, PausedBy: "alice", PauseReason: "INC-7", Allow: map[string][]bulk.Verdict{tool: o.allow}}, nil
		}}
	if o.mutate != nil {
		o.mutate(&cfg)
	}
	r, err := auto.New(cfg)
	require.NoError(t, err)
	return r
}

func TestPassDecidesTheDefiniteOnes(t *testing.T) {
	t.Parallel()
	f := store(10, func(i int) (reconcile.Answer, bool) {
		switch {
		case i < 5:
			return found(fmt.Sprintf("CH-%d", i)), true
		case i < 9:
			return notFound(), true
		}
		return reconcile.Answer{}, false // one no answer: 10%, under the threshold
	})
	rep, err := runner(t, f, opts{}).Pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[bulk.Verdict]int{bulk.Found: 5, bulk.NotFound: 4}, rep.Decided)
	require.Equal(t, map[string]int{auto.SkipNoAnswer: 1}, rep.Skipped)
	require.Equal(t, map[string]int{tool: 1}, rep.ProviderErrors)
	require.Empty(t, rep.ProviderDown)
	require.Len(t, f.decided, 9)
	for _, p := range f.decided {
		require.Equal(t, rep.BatchID, p.Batch)
		require.Equal(t, int64(1), p.ExpectVersion)
		require.False(t, p.Force || p.Override)
		require.Contains(t, p.Reason, "auto_reconcile for charge-card")
		require.Contains(t, p.Reason, "batch "+rep.BatchID)
		require.Contains(t, p.Reason, p.Evidence.Digest)
		switch p.Evidence.Lookup {
		case reconcile.LookupFound:
			require.Equal(t, reconcile.Completed, p.Decision)
			require.Equal(t, p.Evidence.Ref, p.ResultRef)
		case reconcile.LookupNotFound:
			require.Equal(t, reconcile.NotExecuted, p.Decision)
		default:
			t.Fatalf("decided without a definite lookup: %+v", p)
		}
	}
}

// A provider that fails more than the threshold of a pass's lookups gets
// nothing decided, not even its definite answers.
func TestHalfDownProviderDecidesNothing(t *testing.T) {
	t.Parallel()
	f := store(10, func(i int) (reconcile.Answer, bool) {
		if i%2 == 0 {
			return reconcile.Answer{}, false
		}
		return found(fmt.Sprintf("CH-%d", i)), true
	})
	rep, err := runner(t, f, opts{}).Pass(t.Context())
	require.NoError(t, err)
	require.Empty(t, f.decided)
	require.Empty(t, rep.Decided)
	require.Equal(t, []string{tool}, rep.ProviderDown)
	require.Equal(t, 10, rep.Skipped[auto.SkipProviderDown])

	// At the threshold exactly (2 of 10 at 0.2) it decides the rest.
	f = store(10, func(i int) (reconcile.Answer, bool) { return found("CH-1"), i >= 2 })
	rep, err = runner(t, f, opts{}).Pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, 8, rep.Decided[bulk.Found])
}

func TestPausedDecidesAndAsksNothing(t *testing.T) {
	t.Parallel()
	f := store(3, func(int) (reconcile.Answer, bool) { return notFound(), true })
	rep, err := runner(t, f, opts{paused: true}).Pass(t.Context())
	require.NoError(t, err)
	require.True(t, rep.Paused)
	require.Equal(t, "alice", rep.PausedBy)
	require.Zero(t, f.asked)
	require.Empty(t, f.decided)
}

func TestOnlyWhatTheStoreAndTheCatalogBothLet(t *testing.T) {
	t.Parallel()
	answer := func(i int) (reconcile.Answer, bool) {
		if i%2 == 0 {
			return found("CH-1"), true
		}
		return notFound(), true
	}
	f := store(4, answer)
	rep, err := runner(t, f, opts{allow: []bulk.Verdict{bulk.Found}}).Pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[bulk.Verdict]int{bulk.Found: 2}, rep.Decided)
	require.Equal(t, 2, rep.Skipped[auto.SkipNotAllowed])

	f = store(4, answer)
	rep, err = runner(t, f, opts{catalog: []bulk.Verdict{bulk.NotFound}}).Pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[bulk.Verdict]int{bulk.NotFound: 2}, rep.Decided)

	// The store lets nothing of the tool: nobody is even asked.
	f = store(4, answer)
	rep, err = runner(t, f, opts{allow: []bulk.Verdict{}}).Pass(t.Context())
	require.NoError(t, err)
	require.Empty(t, rep.Decided)
	require.Equal(t, 4, rep.Skipped[auto.SkipNotAllowed])
	require.Zero(t, f.asked)
}

func TestRecordsForPeopleAreNotAsked(t *testing.T) {
	t.Parallel()
	f := store(4, func(int) (reconcile.Answer, bool) { return notFound(), true })
	f.rows[0].Held = true
	f.rows[1].Conflicted = true
	f.rows[2].DeferredBy = "bob"
	rep, err := runner(t, f, opts{}).Pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[string]int{auto.SkipHeld: 1, auto.SkipConflicted: 1, auto.SkipDeferred: 1}, rep.Skipped)
	require.Equal(t, 1, f.asked)
	require.Len(t, f.decided, 1)
	require.Equal(t, "k3", f.rows[3].Key)
	require.Equal(t, int64(4), f.decided[0].OperationID)
}

func TestChangedSinceTheLookupIsSkipped(t *testing.T) {
	t.Parallel()
	f := store(3, func(int) (reconcile.Answer, bool) { return notFound(), true })
	f.reread[2] = 2 // taken over, or decided by a person, meanwhile
	f.refuse[3] = &reconcile.RefusedError{Result: reconcile.Result{Outcome: reconcile.FailedOut, Code: "changed", Message: "changed since you looked"}}
	rep, err := runner(t, f, opts{}).Pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, rep.Decided[bulk.NotFound])
	require.Equal(t, 2, rep.Skipped[auto.SkipChanged])
	require.Len(t, f.decided, 1)
	require.Equal(t, int64(1), f.decided[0].OperationID)
}

// The store's pause, met mid-pass, stops the pass: the rest is not
// attempted.
func TestPauseMidPassStops(t *testing.T) {
	t.Parallel()
	f := store(20, func(int) (reconcile.Answer, bool) { return notFound(), true })
	for id := int64(1); id <= 20; id++ {
		f.refuse[id] = &reconcile.RefusedError{Result: reconcile.Result{Outcome: reconcile.Denied, Code: "paused", Message: "the reconciler is paused (by alice)"}}
	}
	rep, err := runner(t, f, opts{mutate: func(c *auto.Config) { c.Concurrency = 1 }}).Pass(t.Context())
	require.NoError(t, err)
	require.Empty(t, f.decided)
	require.Contains(t, rep.Stopped, "paused")
	require.Equal(t, 1, rep.Skipped[auto.SkipPaused])
	require.Equal(t, 19, rep.Skipped[auto.SkipNotAttempted])
}

func TestDryRunDecidesNothing(t *testing.T) {
	t.Parallel()
	f := store(5, func(i int) (reconcile.Answer, bool) { return found("CH-9"), true })
	rep, err := runner(t, f, opts{mutate: func(c *auto.Config) { c.DryRun = true }}).Pass(t.Context())
	require.NoError(t, err)
	require.Empty(t, f.decided)
	require.Equal(t, 5, rep.Skipped[auto.SkipDryRun])
	for _, rec := range rep.Records {
		require.Equal(t, reconcile.Completed, rec.Decision)
		require.True(t, strings.HasPrefix(rec.Message, "would be decided"))
	}
}

func TestConcurrencyAndRateAreBounded(t *testing.T) {
	t.Parallel()
	f := store(12, func(int) (reconcile.Answer, bool) { return notFound(), true })
	start := time.Now()
	rep, err := runner(t, f, opts{mutate: func(c *auto.Config) { c.Concurrency = 2; c.Rate = 100 }}).Pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, 12, rep.Decided[bulk.NotFound])
	require.LessOrEqual(t, f.maxInFlight.Load(), int32(2))
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "11 gaps of 10ms at 100 a second")
	require.GreaterOrEqual(t, rep.Took, 100*time.Millisecond, "the report says how long the pass took")
	require.Equal(t, rep.Took.Milliseconds(), rep.TookMS)
}

// Cancelling stops dispatching; what was dispatched finishes.
func TestCancelStopsCleanly(t *testing.T) {
	t.Parallel()
	f := store(50, func(int) (reconcile.Answer, bool) { return notFound(), true })
	ctx, cancel := context.WithCancel(t.Context())
	r := runner(t, f, opts{mutate: func(c *auto.Config) { c.Concurrency = 1; c.Rate = 50 }})
	go func() { time.Sleep(150 * time.Millisecond); cancel() }()
	rep, err := r.Pass(ctx)
	require.NoError(t, err)
	n := rep.Decided[bulk.NotFound]
	require.Positive(t, n)
	require.Less(t, n, 50)
	require.Len(t, f.decided, n, "every decision dispatched is reported")
	require.Equal(t, 50-n, rep.Skipped[auto.SkipNotAttempted]+rep.Skipped[auto.SkipNotAsked])
	require.NotEmpty(t, rep.Stopped)
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	f := store(0, nil)
	b, err := bulk.New(bulk.Config{Desk: f, Lister: f})
	require.NoError(t, err)
	settings := func(context.Context) (auto.Settings, error) { return auto.Settings{}, nil }
	for name, cfg := range map[string]auto.Config{
		"NoLookup":     {Bulk: b, Desk: f, Lister: f, Settings: settings, Tools: map[string][]bulk.Verdict{"send-mail": {bulk.Found}}},
		"BadVerdict":   {Bulk: b, Desk: f, Lister: f, Settings: settings, Tools: map[string][]bulk.Verdict{tool: {bulk.NoAnswer}}},
		"ErrorRate":    {Bulk: b, Desk: f, Lister: f, Settings: settings, MaxErrorRate: 1.5},
		"NoSettings":   {Bulk: b, Desk: f, Lister: f},
		"Concurrency":  {Bulk: b, Desk: f, Lister: f, Settings: settings, Concurrency: 65},
		"NegativeRate": {Bulk: b, Desk: f, Lister: f, Settings: settings, Rate: -1},
		"NaNRate":      {Bulk: b, Desk: f, Lister: f, Settings: settings, Rate: math.NaN()},
		"InfiniteRate": {Bulk: b, Desk: f, Lister: f, Settings: settings, Rate: math.Inf(1)},
		"NaNErrorRate": {Bulk: b, Desk: f, Lister: f, Settings: settings, MaxErrorRate: math.NaN()},
	} {
		_, err := auto.New(cfg)
		require.ErrorIs(t, err, auto.ErrConfig, name)
	}
}

// A tool the store does not let, with more stuck records than a pass
// takes and older ones, does not starve the tools it lets: those are
// listed on their own.
func TestABarredToolDoesNotStarveTheOthers(t *testing.T) {
	t.Parallel()
	f := store(2, func(int) (reconcile.Answer, bool) { return notFound(), true })
	var barred []readmodel.Row
	for i := range 5 {
		barred = append(barred, readmodel.Row{ID: int64(100 + i), Tenant: "acme", Tool: "refund-card", Key: fmt.Sprintf("r%d", i),
			State: readmodel.StateStuck, Version: 1})
	}
	f.rows = append(barred, f.rows...) // stuck longer: listed first
	rep, err := runner(t, f, opts{mutate: func(c *auto.Config) {
		c.MaxRecords = 3
		c.Tools["refund-card"] = []bulk.Verdict{bulk.Found}
	}}).Pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[bulk.Verdict]int{bulk.NotFound: 2}, rep.Decided, "the allowed tool's records, though younger")
	require.Equal(t, 3, rep.Skipped[auto.SkipNotAllowed], "the barred tool's, as far as a pass lists")
}

// A pass starts its run only when it has something to decide, with its
// tools as the run's filter; every decision carries the run's id.
func TestAPassStartsItsRunOnlyToDecide(t *testing.T) {
	t.Parallel()
	idle := store(3, func(int) (reconcile.Answer, bool) { return reconcile.Answer{}, false })
	rep, err := runner(t, idle, opts{}).Pass(t.Context())
	require.NoError(t, err)
	require.Zero(t, rep.Decided[bulk.NotFound]+rep.Decided[bulk.Found])
	require.Empty(t, idle.filters, "a pass that decides nothing starts no run")
	require.Empty(t, rep.BatchID)

	busy := store(3, func(int) (reconcile.Answer, bool) { return notFound(), true })
	rep, err = runner(t, busy, opts{}).Pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, 3, rep.Decided[bulk.NotFound])
	require.Equal(t, []string{"auto_reconcile pass: stuck records of " + tool}, busy.filters)
	require.NotEmpty(t, rep.BatchID)
	for _, p := range busy.decided {
		require.Equal(t, rep.BatchID, p.Batch)
	}
}
