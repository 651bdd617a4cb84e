package ui

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHistoryBack: esc after a : jump returns to the screen the operator
// jumped from, with its filter and its cursor on the same record; then
// to the overview; and with no history left it stays there.
func TestHistoryBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 120, 40)
	h.keys(":stuck<enter><down>")
	l := h.m.list()
	filter := l.filterText
	require.NotEmpty(t, filter)
	was, ok := l.selected()
	require.True(t, ok)
	require.Equal(t, 1, l.sel)

	h.keys(":ops<enter>")
	require.Empty(t, l.filterText, ":ops kept the filter")
	require.Equal(t, 0, l.sel)
	h.keys("<esc>")
	require.Same(t, screen(l), h.m.active(), "esc after a jump left the list")
	require.Equal(t, filter, l.filterText, "esc did not bring the filter back")
	now, ok := l.selected()
	require.True(t, ok)
	require.Equal(t, was.ID, now.ID, "esc did not bring the cursor back")
	require.Contains(t, h.view(), "esc/q back")

	h.keys("<esc>")
	require.Same(t, screen(h.m.overview()), h.m.active())
	for range 3 {
		h.keys("<esc>")
		require.Same(t, screen(h.m.overview()), h.m.active(), "esc with no history left the overview")
		require.Len(t, h.m.stack, 1)
		require.False(t, h.quit, "esc quit the console")
	}
}

// TestHistoryDrilled: a jump from a record opened from a list returns to
// that record, then to the list under it, then to the overview.
func TestHistoryDrilled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 120, 40)
	h.keys(":stuck<enter><down><enter>")
	id := h.m.detail().recID
	require.NotZero(t, id)
	h.keys(":key globex/send-email/welcome/user-8812<enter>")
	require.NotEqual(t, id, h.m.detail().recID)
	h.keys("<esc>")
	require.Same(t, screen(h.m.detail()), h.m.active())
	require.Equal(t, id, h.m.detail().recID, "esc did not go back to the record")
	require.Len(t, h.m.stack, 3, "the list is not under the record")
	h.keys("<esc>")
	require.Same(t, screen(h.m.list()), h.m.active())
	require.Equal(t, 1, h.m.list().sel)
	h.keys("<esc>")
	require.Same(t, screen(h.m.overview()), h.m.active())
}

// TestHistoryToggle: - swaps the last two screens, each as it was, and
// says so when there is nothing to swap with.
func TestHistoryToggle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 120, 40)
	h.keys("-")
	require.Same(t, screen(h.m.overview()), h.m.active())
	require.Contains(t, h.view(), "no previous screen yet")
	h.keys(":stuck<enter><down>:audit<enter>")
	require.Same(t, screen(h.m.audit()), h.m.active())
	for i := range 4 {
		h.keys("-")
		if i%2 == 0 {
			require.Same(t, screen(h.m.list()), h.m.active(), "- %d", i)
			require.Equal(t, "state:stuck", h.m.list().filterText)
			require.Equal(t, 1, h.m.list().sel)
		} else {
			require.Same(t, screen(h.m.audit()), h.m.active(), "- %d", i)
		}
	}
	// - does not change how often the console refreshes; _ does.
	every := h.m.refresh.every
	h.keys("-")
	require.Equal(t, every, h.m.refresh.every)
	h.keys("_")
	require.Greater(t, h.m.refresh.every, every)
	h.keys("?")
	v := h.view()
	require.Contains(t, v, "last view")
	require.Regexp(t, `esc +back`, v, "the help lists esc as what it does on the screen, beside -:\n%s", v)
	require.Contains(t, v, "esc close help", "the footer says esc closes the help")
	require.Contains(t, v, "_     slower")
}

// TestToggleAfterBack: - after esc returns to the screen esc left, as
// k9s's - returns to the last view, and - again goes back; a jump in
// between forgets it.
func TestToggleAfterBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 120, 40)
	h.keys(":stuck<enter><down>:audit<enter><esc>")
	require.Same(t, screen(h.m.list()), h.m.active())
	h.keys("-")
	require.Same(t, screen(h.m.audit()), h.m.active(), "- after esc did not return to the audit")
	h.keys("-")
	require.Same(t, screen(h.m.list()), h.m.active())
	require.Equal(t, "state:stuck", h.m.list().filterText)
	require.Equal(t, 1, h.m.list().sel)

	// A record drilled into and left with esc: - opens it again.
	h.keys("<enter>")
	id := h.m.detail().recID
	h.keys("<esc>")
	require.Same(t, screen(h.m.list()), h.m.active())
	h.keys("-")
	require.Same(t, screen(h.m.detail()), h.m.active(), "- after esc did not return to the record")
	require.Equal(t, id, h.m.detail().recID)

	// esc, then a jump: - swaps with the place the jump left.
	h.keys("<esc>:conflicts<enter>-")
	require.Same(t, screen(h.m.list()), h.m.active(), "- after a jump swaps with where it jumped from")
}

// TestClearFilterKey: x clears the list's whole filter and stays on the
// list; esc goes back, never clears. x is offered only with a filter.
func TestClearFilterKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 120, 40)
	h.keys(":ops<enter>")
	require.NotContains(t, h.view(), "x clear filter")
	h.keys("x")
	require.Same(t, screen(h.m.list()), h.m.active())
	h.keys(":ops tool:create-ticket tenant:acme<enter>")
	require.Contains(t, h.view(), "x clear filter")
	h.keys("x")
	require.Empty(t, h.m.list().filterText)
	require.Same(t, screen(h.m.list()), h.m.active())
	require.NotContains(t, h.view(), "x clear filter")
	h.keys("?")
	require.Contains(t, h.view(), "last view")
	h.keys("<esc>")
	h.keys(":ops tenant:acme<enter>?")
	require.Contains(t, h.view(), "clear filter", "help does not show x")
}

// TestHistoryBounded: a history of many jumps keeps only the newest
// places, and esc still walks them back.
func TestHistoryBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 120, 40)
	for i := range 3 * historyMax {
		h.keys(fmt.Sprintf(":ops tenant:t%d<enter>", i+1))
	}
	require.Len(t, h.m.hist.places, historyMax)
	h.keys("<esc>")
	require.Equal(t, fmt.Sprintf("tenant:t%d", 3*historyMax-1), h.m.list().filterText)
	for range historyMax + 5 {
		h.keys("<esc>")
	}
	require.Same(t, screen(h.m.overview()), h.m.active())
	require.False(t, h.quit)
}

// TestHistoryAfterGoto: after --goto, one esc goes to the overview, not
// to every record.
func TestHistoryAfterGoto(t *testing.T) {
	t.Parallel()
	h := newSourceHarness(t, newFakeSource(), Config{Goto: ":stuck tool:create-ticket"}, 120, 40)
	require.Same(t, screen(h.m.list()), h.m.active())
	require.Equal(t, "state:stuck tool:create-ticket", h.m.list().filterText)
	h.keys("<esc>")
	require.Same(t, screen(h.m.overview()), h.m.active())
	require.Equal(t, "state:stuck tool:create-ticket", h.m.list().filterText, "esc cleared the filter")
}
