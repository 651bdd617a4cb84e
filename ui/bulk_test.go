package ui

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// bulkList is the stuck charges' list, where R starts a run.
const bulkList = ":stuck tool:charge-card<enter>"

// TestBulkViews: every state of the bulk reconciliation, through the
// fake, as an operator reaches it with keys.
func TestBulkViews(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, h *harness, b *fakeBulk)
	}{
		{"bulk-list", func(t *testing.T, h *harness, b *fakeBulk) { h.keys(bulkList) }},
		{"bulk-refused", func(t *testing.T, h *harness, b *fakeBulk) { h.keys(":stuck tool:create-ticket<enter>R") }},
		{"bulk-lookups", func(t *testing.T, h *harness, b *fakeBulk) {
			gate(t, b, 5)
			h.keys(bulkList)
			h.pump(h.press(keyR), 5)
		}},
		{"bulk-stopped", func(t *testing.T, h *harness, b *fakeBulk) {
			gate(t, b, 5)
			h.keys(bulkList)
			h.pump(h.press(keyR), 5)
			h.keys("<esc>")
			h.finish()
		}},
		{"bulk-plan", func(t *testing.T, h *harness, b *fakeBulk) { h.keys(bulkList + "R") }},
		{"bulk-reason", func(t *testing.T, h *harness, b *fakeBulk) { h.keys(bulkList + "R<enter>") }},
		{"bulk-reason-blank", func(t *testing.T, h *harness, b *fakeBulk) {
			h.keys(bulkList + "R<enter>")
			h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("\t\u3000 \u3000"), Paste: true})
			h.keys("<enter>")
		}},
		{"bulk-confirm-wrong", func(t *testing.T, h *harness, b *fakeBulk) {
			h.keys(bulkList + "R<enter>provider outage 03:00-03:20, lookups after recovery<enter>-3<enter>")
		}},
		{"bulk-plan-conflicted", func(t *testing.T, h *harness, b *fakeBulk) {
			// Found records 49005 and 49009, not found 49003: each in a
			// group of its own, after the clean ones.
			conflict(h.src, outageFirst+4, 2)
			conflict(h.src, outageFirst+8, 1)
			conflict(h.src, outageFirst+2, 3)
			h.keys(bulkList + "R")
		}},
		{"bulk-confirm-conflicted", func(t *testing.T, h *harness, b *fakeBulk) {
			conflict(h.src, outageFirst+4, 2)
			conflict(h.src, outageFirst+8, 1)
			h.keys(bulkList + "R<down><down><enter>provider outage, conflicts looked at<enter>")
		}},
		{"bulk-group", func(t *testing.T, h *harness, b *fakeBulk) { h.keys(bulkList + "Ro") }},
		{"bulk-group-filtered", func(t *testing.T, h *harness, b *fakeBulk) { h.keys(bulkList + "Ro/acme<enter>") }},
		{"bulk-deciding", bulkDecidingHeld},
		{"bulk-result-skipped", func(t *testing.T, h *harness, b *fakeBulk) {
			h.keys(bulkList + "R<enter>provider outage 03:00-03:20, lookups after recovery<enter>")
			touch(h.src, outageFirst+3) // changed after the lookup: skipped
			h.keys("9<enter>")
		}},
	}
	for _, c := range cases {
		goldens(t, c.name, func(t *testing.T, w, hh int) string {
			h, b := newBulkHarness(t, true, w, hh)
			c.setup(t, h, b)
			return h.view()
		})
	}
}

// gate holds the fake's lookups after pause of them.
func gate(t *testing.T, b *fakeBulk, pause int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	g := make(chan struct{})
	b.gate, b.pause = g, pause
	t.Cleanup(func() { close(g) })
}

// TestBulkOffered: R is in the list's footer and help for an operator
// with a bulk reconciler, and nowhere (and inert) for a viewer, in a
// read-only context, or without one.
func TestBulkOffered(t *testing.T) {
	t.Parallel()
	h, _ := newBulkHarness(t, true, 120, 40)
	h.keys(bulkList)
	require.Contains(t, h.view(), "R reconcile all by lookup")
	h.keys("?")
	require.Contains(t, h.view(), "reconcile all by lookup")

	for _, c := range []struct {
		name   string
		decide bool
		opts   func(o *Config)
	}{
		{"viewer", false, nil},
		{"read-only", true, func(o *Config) { o.ReadOnly = true }},
		{"no bulk", true, func(o *Config) { o.Bulk = nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := newFakeSource()
			addOutage(src)
			dec := newFakeDecider(src)
			dec.caps.Decide = c.decide
			o := Config{Bulk: newFakeBulk(t, src)}
			if c.opts != nil {
				c.opts(&o)
			}
			h := newDecideHarness(t, src, dec, o, 120, 40).keys(bulkList)
			require.NotContains(t, h.view(), "R reconcile all by lookup")
			h.keys("R")
			require.Equal(t, screenList, h.m.active().id(), "R opened %s", h.m.active().id())
			h.keys("?")
			require.NotContains(t, h.view(), "reconcile all by lookup")
		})
	}
}

// TestBulkRefusedFilter: R on a list whose filter cannot start a run says
// CheckFilter's reason on the screen, and esc goes back to the list.
func TestBulkRefusedFilter(t *testing.T) {
	t.Parallel()
	// R is offered only on a list of stuck records (issue 22: a key only
	// where it can act); elsewhere it does nothing.
	for _, keys := range []string{":ops<enter>", ":ops tool:charge-card<enter>", ":conflicts<enter>", ":ops state:completed<enter>"} {
		h, b := newBulkHarness(t, true, 120, 40)
		h.keys(keys)
		require.NotContains(t, flat(h.view()), "R reconcile", "%s offers R", keys)
		h.keys("R")
		require.Equal(t, screenList, h.m.active().id(), "%s: R opened a flow", keys)
		require.Empty(t, b.accepted)
	}
	for _, c := range []struct{ keys, want string }{
		{":stuck<enter>", "name the tool whose provider to ask"},
		{":stuck tool:create-ticket<enter>", `the catalog has no outcome lookup for tool "create-ticket"`},
	} {
		h, b := newBulkHarness(t, true, 120, 40)
		h.keys(c.keys + "R")
		require.Equal(t, screenBulk, h.m.active().id(), "%s: R opened nothing", c.keys)
		require.Contains(t, flat(h.view()), c.want, "%s", c.keys)
		require.Contains(t, flat(h.view()), "Nothing was looked up or decided", "%s", c.keys)
		require.Empty(t, b.accepted)
		h.keys("q")
		require.Equal(t, screenList, h.m.active().id(), "%s: q did not go back to the list", c.keys)
		require.False(t, h.quit)
	}
}

// TestBulkFlow: lookups, the plan, one group accepted with its count and
// the result, then the next group; the records of the group are decided
// in the source, the changed one skipped, and nothing else touched.
func TestBulkFlow(t *testing.T) {
	t.Parallel()
	h, b := newBulkHarness(t, true, 120, 40)
	h.keys(bulkList + "R")
	v := flat(h.view())
	for _, want := range []string{"14 stuck records looked up", "▸ ✓ found 9 → completed, with the provider's reference",
		"○ not found 3 → not executed", "? no answer 1 → no proposal: decided one by one", "✗ error 1 → no proposal"} {
		require.Contains(t, v, want, "the plan:\n%s", h.view())
	}
	// The groups without a proposal cannot be accepted.
	h.keys("jj<enter>")
	require.Contains(t, flat(h.view()), "the no answer records have no definite evidence: decide them one by one")
	require.Equal(t, stepPlan, h.m.bulk().sm.step)
	h.keys("kk<enter>")
	require.Equal(t, stepReason, h.m.bulk().sm.step)

	// Reasons that are white space only are refused, whatever the space.
	for _, blank := range []string{"", "\t\t", "\u3000\u3000", " \u00a0 "} {
		if blank != "" {
			h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(blank), Paste: true})
		}
		h.keys("<enter>")
		require.Equal(t, stepReason, h.m.bulk().sm.step, "reason %q taken", blank)
		require.Contains(t, flat(h.view()), "a reason is required", "reason %q", blank)
		h.m.bulk().sm.reason.SetValue("")
	}
	h.keys("outage<enter>")
	require.Equal(t, stepConfirm, h.m.bulk().sm.step)
	touch(h.src, outageFirst+3)
	// Counts that are not the group's exact digits confirm nothing.
	for _, wrong := range []string{"", "-3", " 9", "9 ", "+9", "9\x00", "\x009", "9\n", "٩", "９"} {
		if wrong != "" {
			h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(wrong), Paste: true})
		}
		require.Equal(t, "", h.m.bulk().sm.typed.Value(), "count %q taken", wrong)
		h.keys("<enter>")
		require.Equal(t, stepConfirm, h.m.bulk().sm.step, "count %q confirmed", wrong)
		require.Contains(t, flat(h.view()), "that is not 9, the number of records in the group: nothing was decided", "count %q", wrong)
		require.Empty(t, b.accepted, "count %q decided", wrong)
	}
	// Digits, but not the count: 8, 14, 09.
	for _, wrong := range []string{"8", "14", "09", "99999999999999999999"} {
		h.keys(wrong + "<enter>")
		require.Equal(t, stepConfirm, h.m.bulk().sm.step, "count %q confirmed", wrong)
		require.Contains(t, flat(h.view()), "that is not 9, the number of records in the group: nothing was decided", "count %q", wrong)
		require.Empty(t, b.accepted, "count %q decided", wrong)
	}
	// esc goes back a step, and the reason is kept.
	h.keys("<esc>")
	require.Equal(t, stepReason, h.m.bulk().sm.step)
	require.Equal(t, "outage", h.m.bulk().sm.reason.Value())
	h.keys("<enter>9<enter>")
	require.Equal(t, stepResult, h.m.bulk().sm.step)
	require.Len(t, b.accepted, 1)
	require.Equal(t, bulk.AcceptParams{Reason: "outage", Confirm: 9}, b.accepted[0])
	v = flat(h.view())
	require.Contains(t, v, "found → completed: 8 decided, 1 skipped", "the result:\n%s", h.view())
	require.Contains(t, v, "49004 acme outage-0026 changed since the lookup: now version 3 (completed), listed at version 2", "the result:\n%s", h.view())
	require.Contains(t, v, "b-7f3e9c21a04d")
	states := map[readmodel.State]int{}
	for _, r := range h.src.rows {
		if r.ID >= outageFirst {
			states[r.State]++
		}
	}
	require.Equal(t, map[readmodel.State]int{readmodel.StateCompleted: 9, readmodel.StateStuck: 5}, states)

	// Back on the plan the found group is accepted; the next one is
	// selected.
	h.keys("<enter>")
	require.Equal(t, stepPlan, h.m.bulk().sm.step)
	v = flat(h.view())
	require.Contains(t, v, "✓ found 9 ✓ accepted: 8 decided, 1 skipped")
	require.Contains(t, v, "▸ ○ not found")
	h.keys("k<enter>")
	require.Contains(t, flat(h.view()), "the found group is accepted already")
	// Leaving returns to the list, refreshed: the decided records left it.
	h.keys("<esc>")
	require.Equal(t, screenList, h.m.active().id())
	require.Contains(t, h.view(), "1–5 of 5")
}

// TestBulkEscape: esc during the lookups stops them (nothing is decided
// from a stopped run, r looks up again), q never leaves a run under way,
// esc during the decisions starts no more, and esc at each input step
// goes back a step.
// TestBulkEmptyGroup: enter on an empty group says it is empty, not that
// its (no) records are to be decided one by one.
func TestBulkEmptyGroup(t *testing.T) {
	t.Parallel()
	s := &bulkFlow{accepted: map[bulk.Verdict]bulk.GroupResult{}, plan: &bulk.Plan{Groups: []bulk.Group{
		{Verdict: bulk.NoAnswer}, {Verdict: bulk.NotFound, Proposal: reconcile.NotExecuted},
	}}}
	require.EqualError(t, s.acceptableAt(0), "the no answer group is empty: nothing to decide")
	require.EqualError(t, s.acceptableAt(1), "the not found group is empty: nothing to decide")
}

// TestBulkStatusBarTime: while R is open, the status bar's database time
// is the run's listing's, not the list's last poll: the plan's records and
// versions are as of the listing.
func TestBulkStatusBarTime(t *testing.T) {
	t.Parallel()
	h, _ := newBulkHarness(t, true, 120, 40)
	h.keys(bulkList)
	require.Contains(t, h.view(), "db 03:12:09 UTC", "the list's poll:\n%s", h.view())
	listed := dbNow.Add(97 * time.Second)
	h.src.mu.Lock()
	for i := range h.src.rows {
		h.src.rows[i].DBTime = listed
	}
	h.src.mu.Unlock()
	h.keys("R")
	require.Equal(t, stepPlan, h.m.bulk().sm.step, "no plan:\n%s", h.view())
	require.Contains(t, h.view(), "as of 03:13:46 UTC · ⟳ paused in this flow", "the status bar does not show the listing's time:\n%s", h.view())
}

func TestBulkEscape(t *testing.T) {
	t.Parallel()
	h, b := newBulkHarness(t, true, 120, 40)
	gate(t, b, 5)
	h.keys(bulkList)
	h.pump(h.press(keyR), 5)
	require.True(t, h.m.bulk().capturing())
	h.keys("q:")
	require.False(t, h.quit)
	require.Equal(t, screenBulk, h.m.active().id(), "q left a run under way")
	require.Contains(t, flat(h.view()), "5 of 14 answered · found 4 · not found 1 · no answer 0 · error 0")
	h.keys("<esc>")
	h.finish()
	v := flat(h.view())
	require.Contains(t, v, "Stopped: 5 of 14 records asked, 9 not asked", "stopped:\n%s", h.view())
	require.Contains(t, v, "Nothing was decided.")
	h.keys("<enter>")
	require.Contains(t, flat(h.view()), "the lookups were stopped: nothing is decided from a partial run")
	require.Equal(t, stepPlan, h.m.bulk().sm.step)
	// r looks every record up again.
	b.mu.Lock()
	b.gate = nil
	b.mu.Unlock()
	h.keys("r")
	require.Contains(t, flat(h.view()), "14 stuck records looked up")

	// esc at the reason goes back to the plan; at the plan to the list.
	h.keys("<enter>")
	require.Equal(t, stepReason, h.m.bulk().sm.step)
	h.keys("q") // typed into the reason
	require.Equal(t, stepReason, h.m.bulk().sm.step)
	h.keys("<esc>")
	require.Equal(t, stepPlan, h.m.bulk().sm.step)

	// esc while deciding: no more decisions start, those done are kept.
	b.mu.Lock()
	b.decideGate, b.decidePause = make(chan struct{}), 4
	b.mu.Unlock()
	defer close(b.decideGate)
	h.keys("<enter>outage<enter>9")
	h.pump(h.press(keyEnter), 4)
	h.keys("q")
	require.Equal(t, stepDeciding, h.m.bulk().sm.step, "q left the decisions")
	h.keys("<esc>")
	h.finish()
	v = flat(h.view())
	require.Contains(t, v, "found → completed: 4 decided, 5 not attempted", "stopped decisions:\n%s", h.view())
	require.Contains(t, v, "Not attempted: the group stopped before their turn (5)")
	require.Contains(t, v, "stopped at esc: the decisions under way finished, no other started")
	decided := 0
	for _, r := range h.src.rows {
		if r.ID >= outageFirst && r.State == readmodel.StateCompleted {
			decided++
		}
	}
	require.Equal(t, 4, decided)
	h.keys("<esc>")
	require.Equal(t, screenList, h.m.active().id())
}

// TestBulkStoppedGroupAgain: a group stopped before its first decision
// decided nothing and may be accepted again; one stopped midway too, and
// then the records decided the first time, which the engine skips as
// changed, are shown as decided by this run, not as "not decided".
func TestBulkStoppedGroupAgain(t *testing.T) {
	t.Parallel()
	h, b := newBulkHarness(t, true, 120, 40)
	h.keys(bulkList + "R")
	for _, pause := range []int{0, 4} {
		g := make(chan struct{})
		b.mu.Lock()
		b.decideGate, b.decidePause = g, pause
		b.mu.Unlock()
		h.keys("<enter>outage<enter>9")
		h.pump(h.press(keyEnter), pause)
		h.keys("<esc>")
		h.finish()
		close(g)
		if pause == 0 {
			require.Contains(t, flat(h.view()), "found → completed: 0 decided, 9 not attempted: stopped before the first decision, nothing was decided")
		}
		h.keys("<enter>")
		require.Contains(t, flat(h.view()), "▸ ✓ found 9 → completed", "the group cannot be accepted again:\n%s", h.view())
	}
	b.mu.Lock()
	b.decideGate = nil
	b.mu.Unlock()
	h.keys("<enter>outage<enter>9<enter>")
	v := flat(h.view())
	require.Contains(t, v, "✓ found → completed: 9 decided", "the third acceptance:\n%s", h.view())
	require.NotContains(t, v, "skipped", "the third acceptance:\n%s", h.view())
	require.Contains(t, v, "Decided (9)")
	require.Len(t, h.m.bulk().res.Only(bulk.Decided), 9)
	h.keys("<enter>")
	require.Contains(t, flat(h.view()), "✓ found 9 ✓ accepted: 9 decided")
}

// gatedList holds List until its context ends: esc before the records
// are listed.
type gatedList struct{ *fakeBulk }

func (g gatedList) List(ctx context.Context, _ readmodel.Filter) ([]readmodel.Row, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("list the records: %w", ctx.Err())
}

// TestBulkStoppedListing: esc while the records are listed says the run
// stopped before anything was asked, and r starts again.
func TestBulkStoppedListing(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	addOutage(src)
	fb := newFakeBulk(t, src)
	h := newDecideHarness(t, src, newFakeDecider(src), Config{Bulk: gatedList{fb}}, 120, 40)
	h.keys(bulkList)
	h.press(keyR) // the run's first message never comes: List waits
	require.Contains(t, h.view(), "listing the stuck records of state:stuck tool:charge-card…")
	h.keys("q")
	require.Equal(t, screenBulk, h.m.active().id(), "q left a run under way")
	h.keys("<esc>")
	h.finish()
	v := flat(h.view())
	require.Contains(t, v, "Stopped before the records were listed: nothing was looked up or decided.", "stopped:\n%s", h.view())
	require.NotContains(t, v, "✗")
	require.Empty(t, fb.accepted)
}

// TestBulkViewNeverPanics renders every step of the flow at odd sizes;
// from 60x20 up each frame fits.
func TestBulkViewNeverPanics(t *testing.T) {
	t.Parallel()
	for _, sz := range []struct{ w, h int }{{0, 0}, {1, 1}, {60, 20}, {61, 21}, {200, 60}, {300, 20}} {
		h, _ := newBulkHarness(t, true, sz.w, sz.h)
		for _, k := range []string{bulkList, "R", "<pgdown>", "<enter>", "outage<enter>", "3<enter>", "9<enter>", "<pgdown>", "<enter>", "j", "<esc>"} {
			h.keys(k)
			v := h.view()
			if sz.w >= minWidth && sz.h >= minHeight {
				checkFrame(t, v, sz.w, sz.h)
			}
		}
	}
}

// goneStore fails every listing: the store went away after the lookups.
type goneStore struct{}

func (goneStore) List(context.Context, readmodel.Query) (readmodel.Page, error) {
	return readmodel.Page{}, errors.New("connection refused")
}

// engineAccepts accepts groups with the real engine, over a store that
// went away: it cannot read the group's records again.
type engineAccepts struct {
	*fakeBulk
	engine *bulk.Reconciler
}

func (e engineAccepts) Accept(ctx context.Context, plan *bulk.Plan, v bulk.Verdict, p bulk.AcceptParams, progress func(bulk.Progress)) (bulk.GroupResult, error) {
	return e.engine.Accept(ctx, plan, v, p, progress)
}

// TestBulkGroupNotReadAgain: a group whose records could not be read
// again decided nothing, says so, and may be accepted again, as the
// result tells the operator; it is not marked accepted.
func TestBulkGroupNotReadAgain(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	addOutage(src)
	engine, err := bulk.New(bulk.Config{Desk: lookupTools{"charge-card": true}, Lister: goneStore{}})
	require.NoError(t, err)
	h := newDecideHarness(t, src, newFakeDecider(src), Config{Bulk: engineAccepts{newFakeBulk(t, src), engine}}, 120, 40)
	h.keys(bulkList + "R<enter>outage<enter>9<enter>")
	require.Equal(t, stepResult, h.m.bulk().sm.step)
	require.Contains(t, flat(h.view()), "stopped before the first decision, nothing was decided", "the result:\n%s", h.view())
	h.keys("<enter>")
	v := flat(h.view())
	require.Contains(t, v, "▸ ✓ found 9 → completed", "the plan:\n%s", h.view())
	require.NotContains(t, v, "accepted:")
	h.keys("<enter>")
	require.Equal(t, stepReason, h.m.bulk().sm.step, "the group cannot be accepted again:\n%s", h.view())
}

// TestBulkGroupOpen: o on the plan shows every record of the selected
// group, scrolled and filtered; esc goes back to the plan as it was, whose
// group is still to accept.
func TestBulkGroupOpen(t *testing.T) {
	t.Parallel()
	h, b := newBulkHarness(t, true, 80, 24)
	// 16 more stuck charges: the found group outgrows the screen.
	h.src.mu.Lock()
	for i := outageCount; i < outageCount+16; i++ {
		r := h.src.rows[len(h.src.rows)-1]
		r.ID, r.Key = outageFirst+int64(i), fmt.Sprintf("outage-%04d", 17+i*3)
		h.src.rows = append(h.src.rows, r)
	}
	h.src.mu.Unlock()
	h.keys(bulkList + "R")
	require.Contains(t, h.view(), "o all its records", "the plan's footer:\n%s", h.view())
	h.keys("o")
	require.Equal(t, screenBulkGroup, h.m.active().id())
	v := h.view()
	require.Contains(t, v, "the found group")
	require.Contains(t, v, "49001")
	require.NotContains(t, v, "49030", "21 records do not fit in 24 lines:\n%s", v)
	require.Contains(t, v, "lines 1–", "the position:\n%s", v)
	h.keys("G")
	require.Contains(t, h.view(), "49030", "the end of the group:\n%s", h.view())

	// Filtered: each word in any case; a word nothing holds says so.
	h.keys("/GLOBEX 0038<enter>")
	v = flat(h.view())
	require.Contains(t, v, "1 of 21 records")
	require.Contains(t, v, "49008")
	require.NotContains(t, v, "49002")
	h.keys("/\x1b[2J<enter>")
	require.NotContains(t, h.view(), "\x1b[2J")
	h.keys("x")
	require.Contains(t, flat(h.view()), "21 records →")
	h.keys("/zzz<enter>")
	require.Contains(t, flat(h.view()), `no record of the group holds "zzz"`)

	h.keys("<esc>")
	require.Equal(t, screenBulk, h.m.active().id(), "esc goes back to the plan")
	h.keys("-")
	require.Equal(t, screenBulk, h.m.active().id(), "- does not leave the plan for the group esc left")
	h.keys("<enter>outage<enter>21<enter>")
	require.Contains(t, flat(h.view()), "found → completed: 21 decided", h.view())
	require.Len(t, b.accepted, 1)
	// Left, the run is over: - never brings back its plan or its group.
	h.keys("<esc>")
	require.NotEqual(t, screenBulk, h.m.active().id(), "esc leaves the run's summary")
	h.keys("-")
	require.NotContains(t, []screenID{screenBulk, screenBulkGroup}, h.m.active().id(), "- went back into a finished run:\n%s", h.view())
}
