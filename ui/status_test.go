package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// statusLine is the status bar, the view's first line.
func statusLine(h *harness) string { return strings.SplitN(h.view(), "\n", 2)[0] }

// TestFlowStatusBar: a flow reads nothing while it is open, so the status
// bar says refresh is paused in it and names the time it shows as the
// flow's read ("as of"), never as the database's clock going backwards.
func TestFlowStatusBar(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newDecideHarness(t, src, newFakeDecider(src), Config{}, 120, 40)
	h.keys(":ops id:48207<enter><enter>")
	require.Contains(t, statusLine(h), "db 03:12:09 UTC · ⟳ 2s", "the detail:\n%s", h.view())
	// The database's clock moves on at a poll; the record was read before.
	h.m.dbTime = dbNow.Add(14 * time.Second)
	h.keys("r")
	line := statusLine(h)
	require.Contains(t, line, "as of 03:12:09 UTC · ⟳ paused in this flow", "the flow:\n%s", h.view())
	require.NotContains(t, line, "db ", "the flow shows an older time as the database's:\n%s", h.view())
	require.NotContains(t, line, "⟳ 2s", "the flow says it refreshes:\n%s", h.view())
	h.send(h.lastTick())
	require.Contains(t, statusLine(h), "⟳ paused in this flow", "after a tick:\n%s", h.view())
	h.keys("<esc>")
	require.Contains(t, statusLine(h), "⟳ 2s", "back on the record:\n%s", h.view())

	h = newDecideHarness(t, src, newFakeDecider(src), Config{}, 80, 24)
	h.keys(":ops id:48207<enter><enter>r")
	// Narrow: the time alone, and who you are stays whole.
	require.Contains(t, statusLine(h), "you: alice ", "the flow at 80x24:\n%s", h.view())
	require.Contains(t, statusLine(h), "03:12:09 · ⟳ paused", "the flow at 80x24:\n%s", h.view())
}

// TestFlowBannerClears: the unreachable banner raised before a flow
// opened goes the moment the database answers again, without leaving
// the flow: the flow's tick probes while the database is away, and any
// query of the flow that succeeds clears it too.
func TestFlowBannerClears(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newDecideHarness(t, src, newFakeDecider(src), Config{}, 120, 40)
	h.keys(openDeploy)
	src.setDown(true)
	h.send(h.lastTick())
	require.Contains(t, h.view(), "database unreachable", "no banner:\n%s", h.view())
	h.keys("r")
	require.Contains(t, h.view(), "database unreachable", "the banner went on entering the flow:\n%s", h.view())
	h.send(h.lastTick())
	require.Contains(t, h.view(), "database unreachable", "the banner went while the database is away:\n%s", h.view())
	src.setDown(false)
	h.send(h.lastTick())
	v := h.view()
	require.NotContains(t, v, "database unreachable", "the banner stayed after the database answered:\n%s", v)
	require.NotContains(t, v, "last error", "the last error stayed after the database answered:\n%s", v)
	require.Equal(t, screenReconcile, h.m.active().id(), "the flow was left")

	// A flow's own read that succeeds clears it as well.
	h.keys("<esc>")
	src.setDown(true)
	h.send(h.lastTick())
	require.Contains(t, h.view(), "database unreachable", "no banner:\n%s", h.view())
	h.keys("r")
	src.setDown(false)
	h.send(refetchMsg{seq: -1, err: nil})
	require.NotContains(t, h.view(), "database unreachable", "a successful read left the banner:\n%s", h.view())
}

// TestStatusBarLongServer: the demo's server is a socket path; at 80
// columns it gives way, cut in its middle, before who you are (the demo's
// console read "socket /tmp/opsdesk-pg-3778019986/opsdesk · y…").
func TestStatusBarLongServer(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	for _, w := range []int{80, 120} {
		h := newDecideHarness(t, src, newFakeDecider(src), Config{}, w, 24)
		h.m.info.Server, h.m.info.Database, h.m.info.Role = "socket /tmp/opsdesk-pg-3778019986", "opsdesk", "opsdesk_demo_operator"
		for _, keys := range []string{"", ":ops id:48207<enter><enter>r"} {
			h.keys(keys)
			line := statusLine(h)
			require.Contains(t, line, "you: opsdesk_demo_operator", "at %d:\n%s", w, h.view())
			require.Contains(t, line, "03:12:09", "at %d:\n%s", w, h.view())
			require.LessOrEqual(t, width(line), w)
		}
	}
}

// TestPurgeStatusBar: a purge reads nothing between its count and its
// run, so the status bar says refresh is paused there rather than "⟳ 2s"
// over a clock that does not move (walking §4: 17:02:59 for minutes).
func TestPurgeStatusBar(t *testing.T) {
	t.Parallel()
	h := newPurgeHarness(t, &fakePurger{count: 2500}, true, 120, 40)
	h.keys(":retention<enter>j")
	require.NotContains(t, statusLine(h), "paused", "%s", h.view())
	for _, keys := range []string{"p", "end of quarter<enter>", "y"} {
		h.keys(keys)
		require.Contains(t, statusLine(h), "⟳ paused in this flow", "after %q:\n%s", keys, h.view())
	}
	h.keys("<esc>")
	require.NotContains(t, statusLine(h), "paused", "back on the review:\n%s", h.view())
}
