package ui

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// outageIDs are the fake's stuck charges after a provider outage.
const (
	outageFirst int64 = 49001
	outageCount       = 14
)

// addOutage adds outageCount stuck charge-card records to src, as a
// provider outage leaves them.
func addOutage(src *fakeSource) {
	src.mu.Lock()
	defer src.mu.Unlock()
	tenants := []string{"acme", "globex", "initech"}
	for i := range outageCount {
		leased := dbNow.Add(-time.Duration(30-i) * time.Minute)
		src.rows = append(src.rows, readmodel.Row{ID: outageFirst + int64(i), Tenant: tenants[i%3], Tool: "charge-card",
			Key: fmt.Sprintf("outage-%04d", 17+i*3), State: readmodel.StateStuck, Owner: fmt.Sprintf("worker-%d", 1+i%4),
			Attempt: 1, Version: 2, CreatedAt: leased, LeasedAt: leased, LeaseExpiresAt: leased.Add(30 * time.Second),
			UpdatedAt: leased, DBTime: dbNow})
	}
}

// lookupTools is a catalog for CheckFilter: the tools with a lookup.
type lookupTools map[string]bool

func (l lookupTools) HasLookup(tool string) bool { return l[tool] }
func (lookupTools) Ask(context.Context, string, string, string) (reconcile.Answer, bool) {
	panic("the fake bulk asks nobody")
}

func (lookupTools) Decide(context.Context, string, reconcile.DecideParams) (reconcile.Result, error) {
	panic("the fake bulk decides by itself")
}

func (lookupTools) SealResults(context.Context, []*reconcile.Result) error {
	panic("the fake bulk seals nothing")
}

// fakeBulk runs bulk reconciliations over a fakeSource deterministically:
// the filter is checked and the records listed by the real engine, each
// record's verdict follows from its place among the outage's records, and
// a group's records are decided in the source, skipped when they changed
// since the lookup. A gate holds the lookups (or the decisions) after
// pause of them, until the gate opens or the screen stops the run.
type fakeBulk struct {
	src    *fakeSource
	engine *bulk.Reconciler

	mu          sync.Mutex
	gate        chan struct{}
	pause       int
	decideGate  chan struct{}
	decidePause int
	accepted    []bulk.AcceptParams
	seqs        map[string]int64
}

func newFakeBulk(t testing.TB, src *fakeSource) *fakeBulk {
	t.Helper()
	r, err := bulk.New(bulk.Config{Desk: lookupTools{"charge-card": true, "deploy-service": true}, Lister: src})
	require.NoError(t, err)
	return &fakeBulk{src: src, engine: r, seqs: map[string]int64{"acme": 16, "globex": 41, "initech": 7}}
}

func (b *fakeBulk) CheckFilter(f readmodel.Filter) error { return b.engine.CheckFilter(f) }

func (b *fakeBulk) List(ctx context.Context, f readmodel.Filter) ([]readmodel.Row, error) {
	return b.engine.List(ctx, f)
}

// verdictOf is the lookup's answer for the i-th outage record: 9 found,
// 3 not found, 1 without an answer, 1 without a usable reference.
func verdictOf(row readmodel.Row) bulk.Item {
	i := int(row.ID - outageFirst)
	item := bulk.Item{ID: row.ID, Tenant: row.Tenant, Tool: row.Tool, Key: row.Key, Version: row.Version,
		Conflicted: row.Conflicted, ConflictCount: row.ConflictCount}
	switch {
	case i == 6:
		item.Verdict, item.Note = bulk.NoAnswer, "no answer from pay.example:443: context deadline exceeded"
	case i == 11:
		item.Verdict = bulk.Error
		item.Note = "the provider has it, but its answer names no reference (see the tool's lookup result_ref)"
	case i%4 == 2 || i == 13:
		item.Verdict, item.Note = bulk.NotFound, "HTTP 404 from pay.example:443 in 61ms: not found"
	default:
		item.Verdict, item.Ref = bulk.Found, fmt.Sprintf("ch_3M%05d", 4100+i*37)
		item.Note = "HTTP 200 from pay.example:443 in 58ms: found, reference " + item.Ref
	}
	return item
}

func (b *fakeBulk) Lookup(ctx context.Context, _ string, rows []readmodel.Row, progress func(bulk.Progress)) (*bulk.Plan, error) {
	b.mu.Lock()
	gate, pause := b.gate, b.pause
	b.mu.Unlock()
	plan := &bulk.Plan{BatchID: "b-7f3e9c21a04d", Listed: len(rows), Took: 1400 * time.Millisecond}
	for _, v := range bulk.Verdicts {
		plan.Groups = append(plan.Groups, bulk.Group{Verdict: v, Proposal: v.Proposal()})
	}
	counts := map[string]int{}
	var err error
	for i, row := range rows {
		if gate != nil && i == pause {
			select {
			case <-gate:
			case <-ctx.Done():
				err = fmt.Errorf("lookups stopped after %d of %d: %w", i, len(rows), ctx.Err())
			}
		}
		if err != nil {
			plan.NotAsked = append(plan.NotAsked, bulk.Item{ID: row.ID, Tenant: row.Tenant, Tool: row.Tool, Key: row.Key, Version: row.Version})
			continue
		}
		item := verdictOf(row)
		counts[string(item.Verdict)]++
		plan.Place(item)
		progress(bulk.Progress{Phase: bulk.PhaseLookup, Done: i + 1, Total: len(rows), Counts: maps.Clone(counts)})
	}
	return plan, err
}

func (b *fakeBulk) Accept(ctx context.Context, plan *bulk.Plan, v bulk.Verdict, p bulk.AcceptParams, progress func(bulk.Progress)) (bulk.GroupResult, error) {
	g := plan.Group(v)
	res := bulk.GroupResult{BatchID: plan.BatchID, Verdict: v, Decision: g.Proposal, Counts: map[bulk.ItemOutcome]int{}}
	switch {
	case g.Proposal == "":
		return res, fmt.Errorf("%w: decide them one by one", bulk.ErrNoProposal)
	case p.Confirm != g.Count():
		return res, fmt.Errorf("%w: the %s group holds %d records, and %d was typed", bulk.ErrNotConfirmed, v.Label(), g.Count(), p.Confirm)
	}
	if err := bulk.CheckReason(p.Reason); err != nil {
		return res, err
	}
	b.mu.Lock()
	b.accepted = append(b.accepted, p)
	gate, pause := b.decideGate, b.decidePause
	b.mu.Unlock()
	res.Items = make([]bulk.ItemResult, len(g.Items))
	counts := map[string]int{}
	var err error
	for i, item := range g.Items {
		if gate != nil && i == pause {
			select {
			case <-gate:
			case <-ctx.Done():
				err = fmt.Errorf("decisions stopped after %d of %d: %w", i, len(g.Items), ctx.Err())
			}
		}
		out := bulk.ItemResult{Item: item, Outcome: bulk.NotAttempted}
		if err == nil {
			out = b.decideOne(item, g.Proposal)
		}
		res.Items[i] = out
		res.Counts[out.Outcome]++
		if err == nil {
			counts[string(out.Outcome)]++
			progress(bulk.Progress{Phase: bulk.PhaseDecide, Done: i + 1, Total: len(g.Items), Counts: maps.Clone(counts)})
		}
	}
	if err == nil && gate != nil && pause >= len(g.Items) {
		// Held once every decision had its turn: a stop now is the
		// engine's stop that came while the last ones were in flight.
		select {
		case <-gate:
		case <-ctx.Done():
			err = fmt.Errorf("decisions stopped after %d of %d: %w", len(g.Items), len(g.Items), ctx.Err())
		}
	}
	res.Took = 900 * time.Millisecond
	return res, err
}

// decideOne decides a record in the source unless it changed since the
// lookup.
func (b *fakeBulk) decideOne(item bulk.Item, d reconcile.Decision) bulk.ItemResult {
	b.src.mu.Lock()
	defer b.src.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := bulk.ItemResult{Item: item}
	i := slices.IndexFunc(b.src.rows, func(r readmodel.Row) bool { return r.ID == item.ID })
	r := &b.src.rows[i]
	if r.Version != item.Version {
		out.Outcome = bulk.Skipped
		out.Message = fmt.Sprintf("changed since the lookup: now version %d (%s), listed at version %d", r.Version, r.State, item.Version)
		return out
	}
	b.seqs[r.Tenant]++
	r.Version++
	r.State = readmodel.StateReleased
	if d == reconcile.Completed {
		r.State = readmodel.StateCompleted
		b.src.refs[r.ID] = item.Ref
	}
	out.Outcome, out.State, out.NewVersion = bulk.Decided, string(r.State), r.Version
	out.Audit = fmt.Sprintf("%s#%d", r.Tenant, b.seqs[r.Tenant])
	return out
}

// touch changes a record behind the console's back (a retry that
// completed it), as if between the lookup and the acceptance.
func touch(src *fakeSource, id int64) {
	src.mu.Lock()
	defer src.mu.Unlock()
	for i := range src.rows {
		if r := &src.rows[i]; r.ID == id {
			r.State, r.Version = readmodel.StateCompleted, r.Version+1
		}
	}
}

// conflict gives the record id n conflicting attempts, one or more of
// them unreviewed.
func conflict(src *fakeSource, id int64, n int) {
	src.mu.Lock()
	defer src.mu.Unlock()
	for i := range src.rows {
		if r := &src.rows[i]; r.ID == id {
			r.Conflicted, r.ConflictCount = true, n
		}
	}
}

// newBulkHarness is a console with the fake bulk over the fake source
// with the outage's records, for an operator (or a viewer).
func newBulkHarness(t testing.TB, decide bool, w, h int) (*harness, *fakeBulk) {
	t.Helper()
	src := newFakeSource()
	addOutage(src)
	dec := newFakeDecider(src)
	dec.caps.Decide = decide
	fb := newFakeBulk(t, src)
	return newDecideHarness(t, src, dec, Config{Bulk: fb}, w, h), fb
}

func (m *Model) bulk() *bulkFlow { return m.screens[screenBulk].(*bulkFlow) }

// press sends a key and returns its command without running it (a run
// whose gate holds it would never end).
func (h *harness) press(k tea.KeyMsg) tea.Cmd {
	_, cmd := h.m.Update(k)
	return cmd
}

// pump delivers n of a run's messages, one at a time, as the runtime
// would, and returns the command that waits for the next.
func (h *harness) pump(cmd tea.Cmd, n int) tea.Cmd {
	h.t.Helper()
	for range n {
		msg := firstOf(cmd)
		require.NotNil(h.t, msg, "the run sent nothing")
		_, cmd = h.m.Update(msg)
	}
	return cmd
}

// finish delivers the rest of a run: its messages until its end.
func (h *harness) finish() {
	h.t.Helper()
	for msg := range h.m.bulk().ch {
		h.send(msg)
	}
}

var (
	keyR     = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'R'}}
	keyEnter = tea.KeyMsg{Type: tea.KeyEnter}
)
