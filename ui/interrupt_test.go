package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// bulkDecidingHeld is a run of the found group (9 records) held after 4
// decisions, for ctrl+c to land on; its command waits for the next
// message.
func bulkDecidingHeld(t *testing.T, h *harness, b *fakeBulk) {
	t.Helper()
	b.mu.Lock()
	b.decideGate, b.decidePause = make(chan struct{}), 4
	b.mu.Unlock()
	t.Cleanup(func() { close(b.decideGate) })
	h.keys(bulkList + "R<enter>provider outage 03:00-03:20, lookups after recovery<enter>9")
	h.pump(h.press(keyEnter), 4)
}

// decidedOutage counts the outage's records decided completed.
func decidedOutage(src *fakeSource) int {
	n := 0
	for _, r := range src.rows {
		if r.ID >= outageFirst && r.State == readmodel.StateCompleted {
			n++
		}
	}
	return n
}

// TestBulkInterruptViews: ctrl+c during a run stops it as esc does; the
// summary of the stopped run says so and that ctrl+c again or q quits.
func TestBulkInterruptViews(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, h *harness, b *fakeBulk)
	}{
		{"bulk-interrupting", func(t *testing.T, h *harness, b *fakeBulk) {
			bulkDecidingHeld(t, h, b)
			h.keys("<ctrl+c>")
		}},
		{"bulk-interrupted", func(t *testing.T, h *harness, b *fakeBulk) {
			bulkDecidingHeld(t, h, b)
			h.keys("<ctrl+c>")
			h.finish()
		}},
		// ctrl+c once every record's decision had started.
		{"bulk-interrupted-late", func(t *testing.T, h *harness, b *fakeBulk) { bulkInterruptedLate(t, h, b) }},
	}
	for _, c := range cases {
		goldens(t, c.name, func(t *testing.T, w, hh int) string {
			h, b := newBulkHarness(t, true, w, hh)
			c.setup(t, h, b)
			require.False(t, h.quit, "the first ctrl+c quit")
			return h.view()
		})
	}
}

// TestBulkInterruptLate: a ctrl+c that lands once every record's decision
// had started leaves nothing out: the summary says so and does not head
// the group with a failure.
func TestBulkInterruptLate(t *testing.T) {
	t.Parallel()
	h, b := newBulkHarness(t, true, 80, 24)
	bulkInterruptedLate(t, h, b)
	v := flat(h.view())
	require.Contains(t, v, "✓ found → completed: 9 decided", "%s", h.view())
	require.Contains(t, v, "ctrl+c came after every record's decision had started", "%s", h.view())
	require.NotContains(t, v, "✗", "%s", h.view())
	require.Contains(t, v, "ctrl+c again or q quits")
	require.Equal(t, 9, decidedOutage(h.src))
	h.keys("q")
	require.True(t, h.quit, "q on the summary did not quit")

	// The terminal's report is laid out for its 80 columns.
	r := h.m.exitReport(time.Second)
	require.Contains(t, r, "found → completed: 9 decided")
	for _, l := range strings.Split(r, "\n") {
		require.LessOrEqual(t, width(l), 80, "a report line wider than the terminal:\n%s", r)
	}
}

// TestBulkInterrupt: the first ctrl+c stops the run after the decisions
// in flight and shows what was done; q on that summary quits, and the
// terminal is told what was decided and the batch.
func TestBulkInterrupt(t *testing.T) {
	t.Parallel()
	h, b := newBulkHarness(t, true, 120, 40)
	bulkDecidingHeld(t, h, b)
	h.keys("<ctrl+c>")
	require.False(t, h.quit)
	require.True(t, h.m.bulk().stopping, "ctrl+c did not stop the run")
	require.Contains(t, h.view(), "ctrl+c again or q quits")
	require.Contains(t, h.view(), "ctrl+c quit")
	h.keys("q") // the run still ends: q does nothing yet
	require.False(t, h.quit, "q quit before the run's end")
	h.finish()
	v := flat(h.view())
	require.Contains(t, v, "found → completed: 4 decided, 5 not attempted")
	require.Contains(t, v, "stopped at ctrl+c")
	require.Equal(t, 4, decidedOutage(h.src))
	h.keys("<ctrl+c>")
	require.Contains(t, h.view(), "4 decided by this run", "the summary:\n%s", h.view())
	h.keys("q")
	require.True(t, h.quit, "q on the summary did not quit")

	r := h.m.exitReport(time.Second)
	batch := h.m.bulk().plan.BatchID
	require.Contains(t, r, "batch "+batch)
	require.Contains(t, r, "found → completed: 4 decided, 5 not attempted")
	require.Contains(t, r, "not attempted (still stuck):\n")
	require.Contains(t, r, "decided:\n")
}

// TestBulkInterruptTwice: ctrl+c three times fast quits at the second;
// the run stops after the decisions in flight, and the terminal is told
// exactly what the store holds.
func TestBulkInterruptTwice(t *testing.T) {
	t.Parallel()
	h, b := newBulkHarness(t, true, 120, 40)
	bulkDecidingHeld(t, h, b)
	h.keys("<ctrl+c><ctrl+c><ctrl+c>")
	require.True(t, h.quit)
	r := h.m.exitReport(5 * time.Second)
	require.Contains(t, r, "batch "+h.m.bulk().plan.BatchID)
	require.Contains(t, r, "found → completed: 4 decided, 5 not attempted", "report:\n%s", r)
	require.Equal(t, 4, decidedOutage(h.src))
}

// TestBulkInterruptAtConfirm: ctrl+c with the count typed but not
// entered decides nothing, and says so.
func TestBulkInterruptAtConfirm(t *testing.T) {
	t.Parallel()
	h, _ := newBulkHarness(t, true, 120, 40)
	h.keys(bulkList + "R<enter>provider outage<enter>9")
	h.keys("<ctrl+c>")
	require.False(t, h.quit)
	require.Equal(t, stepConfirm, h.m.bulk().sm.step)
	require.Contains(t, h.view(), "nothing was decided (batch ")
	h.keys("<ctrl+c>")
	require.True(t, h.quit)
	require.Equal(t, 0, decidedOutage(h.src))
	require.Contains(t, h.m.exitReport(time.Second), "nothing was decided")
}

// TestInterruptDecision: ctrl+c while a decision is under way waits for
// its answer (it is not cancelled); quitting before the answer tells the
// terminal it may or may not have been applied. Outside a flow ctrl+c
// quits at once.
func TestInterruptDecision(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openDeploy + "r<enter>deployment DEP-4711 is live<enter>")
	h.m.Update(runeKey("y")) // the decision's command is never run
	require.Equal(t, stepApplying, h.m.reconcile().sm.step)
	h.keys("<ctrl+c>")
	require.False(t, h.quit)
	require.Equal(t, stepApplying, h.m.reconcile().sm.step, "ctrl+c cancelled the decision")
	require.Contains(t, h.view(), "the decision on operation 48207 is under way")
	h.keys("<ctrl+c>")
	require.True(t, h.quit)
	require.Contains(t, h.m.exitReport(time.Second), "may or may not have been applied; opsdesk ops show 48207")

	h = newHarness(t, newFakeSource(), 120, 40)
	h.keys(":stuck<enter><ctrl+c>")
	require.True(t, h.quit, "ctrl+c outside a flow did not quit")
	require.Empty(t, h.m.exitReport(time.Second))
}

// TestInterruptReveal: ctrl+c while a value is fetched gives it up as esc
// does, back on the record; a second ctrl+c quits.
func TestInterruptReveal(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openEmail + "vexport size")
	h.m.Update(keyEnter) // the reveal's command is never run
	h.keys("<ctrl+c>")
	require.False(t, h.quit)
	require.Same(t, screen(h.m.detail()), h.m.active(), "ctrl+c did not give up the reveal")
	require.False(t, h.m.reveal().revealed.ok, "a value is kept")
	require.Contains(t, h.view(), "reveal cancelled, nothing shown")
	h.keys("<ctrl+c>")
	require.True(t, h.quit)
	require.Empty(t, h.m.exitReport(time.Second))

	// At the reason, nothing is under way: ctrl+c says nothing was
	// decided, any other key carries on, q is typed.
	h = newDecideHarness(t, newFakeSource(), newFakeDecider(src), Config{}, 120, 40)
	h.keys(openEmail + "v<ctrl+c>")
	require.Contains(t, h.view(), "nothing was revealed from operation 48190")
	h.keys("q")
	require.False(t, h.quit, "q at the reason quit")
	require.NotContains(t, h.view(), "ctrl+c again")
}

// bulkInterruptedLate accepts the found group of 9 and presses ctrl+c
// once every record's decision has started (each held until the test
// ends), then lets the run finish.
func bulkInterruptedLate(t *testing.T, h *harness, b *fakeBulk) {
	b.mu.Lock()
	b.decideGate, b.decidePause = make(chan struct{}), 9
	b.mu.Unlock()
	t.Cleanup(func() { close(b.decideGate) })
	h.keys(bulkList + "R<enter>provider outage 03:00-03:20, lookups after recovery<enter>9")
	h.pump(h.press(keyEnter), 9)
	h.keys("<ctrl+c>")
	h.finish()
}
