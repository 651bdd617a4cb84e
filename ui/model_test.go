package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

func mustDur(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	require.NoError(t, err)
	return d
}

// TestRefreshFreezesWhileMoving: a tick right after a cursor movement does
// not poll; the thaw of the last movement does, and an older thaw does
// nothing.
func TestRefreshFreezesWhileMoving(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":ops<enter>")
	lists := src.called("list")

	h.send(h.lastTick())
	got := src.called("list")
	require.Equal(t, lists+1, got, "a tick polled %d times, want 1", got-lists)
	h.keys("<down>")
	first := h.lastThaw()
	h.keys("<down>")
	require.Contains(t, h.view(), "frozen while moving", "the status bar does not say refresh is frozen")
	before := src.called("list")
	h.send(h.lastTick())
	got = src.called("list")
	require.Equal(t, before, got, "a tick while moving polled the store")
	h.send(first)
	got = src.called("list")
	require.Equal(t, before, got, "the thaw of an earlier movement polled the store")
	h.send(h.lastThaw())
	got = src.called("list")
	require.Equal(t, before+1, got, "the thaw did not run the skipped refresh (%d polls)", got-before)
	require.EqualValues(t, 2, h.m.list().sel, "the refresh moved the selection to %d, want 2", h.m.list().sel)
	require.Contains(t, h.view(), "⟳ 2s", "the status bar does not show the interval again")
}

// TestPause: space stops polling and ticks of the old chain are ignored;
// space again polls at once and starts a new chain.
func TestPause(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 80, 24)
	old := h.lastTick()
	h.keys("<space>")
	require.Contains(t, h.view(), "⏸ paused", "the view does not say paused:\n%s", h.view())
	require.Equal(t, "resume", h.m.keys.Pause.Help().Desc, "the view does not say paused:\n%s", h.view())
	before := src.called("overview")
	h.send(old)
	require.Equal(t, before, src.called("overview"), "a tick polled while paused")
	h.keys("<space>")
	require.Equal(t, before+1, src.called("overview"), "resuming did not poll at once")
	next := h.lastTick()
	require.NotEqual(t, old.gen, next.gen, "resuming did not start a new tick chain")
	h.send(old)
	require.Equal(t, before+1, src.called("overview"), "a tick of the old chain polled")
	h.send(next)
	require.Equal(t, before+2, src.called("overview"), "a tick of the new chain did not poll")
}

// TestRefreshSpeed: + and - step the interval within 500ms..60s.
func TestRefreshSpeed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 80, 24)
	h.keys("+")
	require.Equal(t, time.Second, h.m.refresh.every, "+ gave %v", h.m.refresh.every)
	h.keys("++++")
	require.Equal(t, MinRefresh, h.m.refresh.every, "+ went below the minimum: %v", h.m.refresh.every)
	require.Contains(t, h.view(), "⟳ 500ms", "+ went below the minimum: %v", h.m.refresh.every)
	h.keys(strings.Repeat("_", 10))
	require.Equal(t, MaxRefresh, h.m.refresh.every, "_ went past the maximum: %v", h.m.refresh.every)
	require.Contains(t, h.view(), "⟳ 1m", "_ went past the maximum: %v", h.m.refresh.every)
}

// TestStaleResultDropped: the answer to an older request arriving after a
// newer one's changes nothing, neither the rows nor the status.
func TestStaleResultDropped(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":stuck<enter>")
	l := h.m.list()
	stuck := l.seq
	require.EqualValues(t, 2, len(l.page.Rows), "%d stuck rows, want 2", len(l.page.Rows))
	// Ask for another filter but hold its answer; then the stuck list's
	// answer (the older request) arrives.
	cmd := l.show(readmodel.Filter{States: []readmodel.State{readmodel.StateRejected}}, "state:rejected", readmodel.SortNewest)
	newer := cmd().(pageMsg)
	old := pageMsg{seq: stuck, page: readmodel.Page{DBTime: dbNow.Add(time.Hour), Rows: []readmodel.Row{{ID: 1, DBTime: dbNow}}}}
	h.send(old)
	require.False(t, l.loaded, "a stale page was shown: %+v", l.page.Rows)
	require.EqualValues(t, 0, len(l.page.Rows), "a stale page was shown: %+v", l.page.Rows)
	require.False(t, h.m.dbTime.Equal(old.page.DBTime), "a stale page moved the database time")
	h.send(newer)
	for _, r := range l.page.Rows {
		require.Equal(t, readmodel.StateRejected, r.State, "row %d is %s, want rejected", r.ID, r.State)
	}
	h.send(old)
	require.False(t, len(l.page.Rows) == 1 && l.page.Rows[0].ID == 1, "a stale page replaced the current one")
	// The same holds for the detail and the overview.
	h.keys("<enter>")
	d := h.m.detail()
	h.send(detailMsg{seq: d.seq - 1, d: readmodel.Detail{Row: readmodel.Row{ID: 7}}})
	require.NotNil(t, d.d, "a stale detail was shown")
	require.NotEqualValues(t, 7, d.d.ID, "a stale detail was shown")
	h.send(overviewMsg{seq: h.m.overview().seq - 1, ov: readmodel.Overview{Stuck: 999}})
	require.NotEqualValues(t, 999, h.m.overview().ov.Stuck, "a stale overview was shown")
}

// TestTotalFollowsThePage: a list shows its page as soon as it comes and
// says its count is on the way; the count follows as an answer of its
// own. A count asked for another filter is dropped when it answers late,
// a page that holds every record is its own count, and a new sort of the
// same filter keeps the count.
func TestTotalFollowsThePage(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	for i := range 10 {
		src.rows = append(src.rows, demoRows(int64(50000+100*i))...)
	}
	h := newHarness(t, src, 80, 24).keys(":ops<enter>")
	l := h.m.list()
	all := src.matching(readmodel.Filter{})
	require.Greater(t, all, l.limit(), "the fixture needs more than a page")
	require.Contains(t, h.view(), "1–"+strconv.Itoa(l.limit())+" of "+strconv.Itoa(all)+" · page 1")

	// Held answers: the page, then the count it asks for.
	completed := readmodel.Filter{States: []readmodel.State{readmodel.StateCompleted}}
	page := l.show(completed, "state:completed", readmodel.SortNewest)().(pageMsg)
	_, countCmd := h.m.Update(page)
	require.NotNil(t, countCmd, "the page asked for no count")
	require.Contains(t, h.view(), "1–"+strconv.Itoa(l.limit())+" of … (counting) · page 1", "the page waits for its count")
	require.NotContains(t, h.view(), " of "+strconv.Itoa(all), "another filter's count shown")
	oldCount := countCmd().(totalMsg)

	// Another filter before the count answered: its late answer is not
	// the new filter's.
	stuck := readmodel.Filter{States: []readmodel.State{readmodel.StateStuck}}
	_, countCmd = h.m.Update(l.show(stuck, "state:stuck", readmodel.SortNewest)().(pageMsg))
	require.NotNil(t, countCmd)
	h.send(oldCount)
	require.Contains(t, h.view(), "of … (counting)", "a late count of another filter was shown")
	h.send(countCmd())
	require.Contains(t, h.view(), " of "+strconv.Itoa(src.matching(stuck))+" · page 1")
	require.Equal(t, 3, src.called("total"), "one count a page: all, completed, stuck")

	// Another sort of the same filter keeps the count while its page
	// loads; the page counts again (as a refresh does), and the count
	// shown stays until the new one comes.
	l.sort = readmodel.SortLease
	_, countCmd = h.m.Update(l.restart()().(pageMsg))
	require.Contains(t, h.view(), "sort: lease expiry")
	require.Contains(t, h.view(), " of "+strconv.Itoa(src.matching(stuck))+" · page 1")
	h.send(countCmd())
	require.Equal(t, 4, src.called("total"))

	// A first page that holds every record counts them itself.
	rejected := readmodel.Filter{States: []readmodel.State{readmodel.StateRejected}}
	h.run(l.show(rejected, "state:rejected", readmodel.SortNewest))
	require.Contains(t, h.view(), "1–"+strconv.Itoa(src.matching(rejected))+" of "+strconv.Itoa(src.matching(rejected))+" · page 1")
	require.Equal(t, 4, src.called("total"), "a page that holds every record needs no count")

	// A count that fails says the list was not counted; the page stays.
	src.mu.Lock()
	src.totalsDown = true
	src.mu.Unlock()
	h.run(l.show(completed, "state:completed", readmodel.SortNewest))
	require.Contains(t, h.view(), "1–"+strconv.Itoa(l.limit())+" of ? (not counted) · page 1")
}

// TestFilterErrorKeepsFilter: a bad filter is an inline error; the list
// keeps its previous filter and rows; esc closes the bar, esc again clears
// the filter.
func TestFilterErrorKeepsFilter(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":ops tool:create-ticket<enter>")
	rows := len(h.m.list().page.Rows)
	lists := src.called("list")
	h.keys("/age>soon<enter>")
	v := h.view()
	require.Contains(t, v, "age needs a positive duration", "no inline error:\n%s", v)
	require.Contains(t, v, "the list keeps filter tool:create-ticket", "no inline error:\n%s", v)
	require.Equal(t, "tool:create-ticket", h.m.list().filterText, "a bad filter changed the list")
	require.Equal(t, rows, len(h.m.list().page.Rows), "a bad filter changed the list")
	require.Equal(t, lists, src.called("list"), "a bad filter changed the list")
	h.keys("q") // typed into the bar, not quitting
	require.False(t, h.quit, "the filter bar did not take q as text")
	require.Contains(t, h.m.list().input.Value(), "soonq", "the filter bar did not take q as text")
	h.keys("<esc>")
	require.False(t, h.m.list().editing, "esc in the bar did not close it keeping the filter")
	require.Equal(t, "tool:create-ticket", h.m.list().filterText, "esc in the bar did not close it keeping the filter")
	h.keys("x")
	require.Equal(t, "", h.m.list().filterText, "x did not clear the filter")
	require.Equal(t, h.m.list(), h.m.active(), "x did not clear the filter")
	h.keys("<esc>")
	require.Equal(t, h.m.overview(), h.m.active(), "esc did not go back")
}

// TestPaging: keyset pages forward and back; bindings that do not apply
// are disabled, so they neither show in the footer nor act.
func TestPaging(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":ops<enter>")
	l := h.m.list()
	first := l.page.Rows[0].ID
	require.NotContains(t, h.view(), "prev page", "prev page is offered on the first page")
	lists := src.called("list")
	h.keys("p")
	require.Equal(t, lists, src.called("list"), "a disabled binding acted")
	var seen []int64
	for range 10 {
		for _, r := range l.page.Rows {
			seen = append(seen, r.ID)
		}
		if l.page.Next == nil {
			break
		}
		h.keys("n")
	}
	require.Equal(t, len(src.rows), len(seen), "paged through %d rows, want %d", len(seen), len(src.rows))
	require.NotContains(t, h.view(), "next page", "next page is offered on the last page")
	for len(l.pages) > 1 {
		h.keys("p")
	}
	require.Equal(t, first, l.page.Rows[0].ID, "paging back did not return to the first page")
	// Sort cycles through the store's sorts and restarts paging.
	h.keys("s")
	require.Equal(t, readmodel.SortLease, l.sort, "sort %s on page %d, want lease on the first page", l.sort, len(l.pages))
	require.EqualValues(t, 1, len(l.pages), "sort %s on page %d, want lease on the first page", l.sort, len(l.pages))
	require.True(t, slices.IsSortedFunc(l.page.Rows, func(a, b readmodel.Row) int { return a.LeaseExpiresAt.Compare(b.LeaseExpiresAt) }), "rows are not in lease expiry order")
	h.keys("ss")
	require.Equal(t, readmodel.SortNewest, l.sort, "sort did not cycle back")
}

// TestPageTurnInFlight: n typed again before the next page has arrived
// does nothing (n and p are disabled while a page turn is in flight, in
// the footer too), so each page keeps one number and its own rows; a turn
// that fails keeps the page shown and its number.
func TestPageTurnInFlight(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 80, 24).keys(":ops<enter>")
	l := h.m.list()
	all, err := src.List(t.Context(), readmodel.Query{Limit: len(src.rows) + 1})
	require.NoError(t, err)
	limit := l.limit()
	require.False(t, len(all.Rows) <= 3*limit, "%d rows make fewer than four pages of %d", len(all.Rows), limit)
	// on checks the list shows page n (from 1) under that number.
	on := func(n int) {
		t.Helper()
		var want, got []int64
		for _, r := range all.Rows[(n-1)*limit : min(n*limit, len(all.Rows))] {
			want = append(want, r.ID)
		}
		for _, r := range l.page.Rows {
			got = append(got, r.ID)
		}
		require.Equal(t, n, len(l.pages), "%d pages deep showing %v, want page %d: %v", len(l.pages), got, n, want)
		require.True(t, slices.Equal(got, want), "%d pages deep showing %v, want page %d: %v", len(l.pages), got, n, want)
		title := strings.SplitN(h.view(), "\n", 3)[1]
		first := (n-1)*limit + 1
		require.Contains(t, title, fmt.Sprintf("%d–%d of %d · page %d", first, first+len(want)-1, len(all.Rows), n),
			"the title reads %q on page %d", title, n)
	}
	n := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'n'}}
	p := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'p'}}

	// n, n again and p before the page arrives: one turn.
	_, first := h.m.Update(n)
	v := h.view()
	require.Contains(t, v, "page 1 · loading page 2…", "a page turn in flight is not shown:\n%s", v)
	require.NotContains(t, v, "next page", "n or p is offered while a page turn is in flight:\n%s", v)
	require.NotContains(t, v, "prev page", "n or p is offered while a page turn is in flight:\n%s", v)
	_, second := h.m.Update(n)
	_, third := h.m.Update(p)
	h.run(first)
	h.run(second)
	h.run(third)
	on(2)
	require.Contains(t, h.view(), "n next page", "n is not offered again once the page arrived")

	// Typed quickly: "nn" arrives in one message.
	h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("nn")})
	on(3)
	h.keys("n")
	on(4)
	h.keys("p")
	on(3)
	h.keys("p")
	on(2)

	// A turn that fails: the page shown stays, under its own number, and n
	// turns it once the store answers again.
	src.setDown(true)
	h.keys("n")
	on(2)
	require.NotNil(t, l.err, "after a failed turn: error %v, n enabled %v, p enabled %v", l.err, l.keys.NextPage.Enabled(), l.keys.PrevPage.Enabled())
	require.True(t, l.keys.NextPage.Enabled(), "after a failed turn: error %v, n enabled %v, p enabled %v", l.err, l.keys.NextPage.Enabled(), l.keys.PrevPage.Enabled())
	require.True(t, l.keys.PrevPage.Enabled(), "after a failed turn: error %v, n enabled %v, p enabled %v", l.err, l.keys.NextPage.Enabled(), l.keys.PrevPage.Enabled())
	src.setDown(false)
	h.keys("n")
	on(3)
}

// TestUnreachableAndRecovery: a failed poll whose probe fails too shows
// the banner; the next successful poll removes it by itself. A failing
// query with a reachable database is only the last error.
func TestUnreachableAndRecovery(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 80, 24).keys(":ops<enter>")
	src.setDown(true)
	h.send(h.lastTick())
	v := h.view()
	require.Contains(t, v, "database unreachable since 03:12:09 UTC", "no banner:\n%s", v)
	require.Contains(t, v, "retrying every 2s", "no banner:\n%s", v)
	require.NotEqualValues(t, 0, len(h.m.list().page.Rows), "the last good rows were dropped")
	src.setDown(false)
	h.send(h.lastTick())
	v = h.view()
	require.NotContains(t, v, "unreachable", "no recovery:\n%s", v)
	require.NotContains(t, v, "last error", "no recovery:\n%s", v)

	// A failing query while the database answers.
	_ = h.m.list().fetch()
	h.send(pageMsg{seq: h.m.list().seq, err: errTimeout})
	v = h.view()
	require.NotContains(t, v, "unreachable", "a query error is not shown as the last error:\n%s", v)
	require.Contains(t, v, "last error: list operations: canceling statement", "a query error is not shown as the last error:\n%s", v)
}

var errTimeout = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string {
	return "list operations: canceling statement due to statement timeout"
}

// TestConnectRetry: an unreachable database at start is a message with a
// retry key; the console connects once the database answers.
func TestConnectRetry(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	src.setDown(true)
	h := newHarness(t, src, 80, 24)
	v := h.view()
	require.Contains(t, v, "Cannot reach the database of context prod-eu", "no clear message:\n%s", v)
	require.Contains(t, v, "r retry now", "no clear message:\n%s", v)
	h.keys(":")
	require.False(t, h.m.cmd.active, "the command line opened without a connection")
	h.keys("r")
	require.EqualValues(t, 2, src.called("info"), "r did not retry (%d attempts)", src.called("info"))
	src.setDown(false)
	h.send(h.lastTick())
	require.Equal(t, h.m.overview(), h.m.active(), "no overview after the database answered:\n%s", h.view())
	require.Contains(t, h.view(), "Needs attention", "no overview after the database answered:\n%s", h.view())
	require.NotContains(t, h.view(), "retry now", "the retry key is still offered")
}

// TestConnectErrorLines: pgconn's multi-line connection error reads as
// one paragraph on the connect screen, with no U+FFFD where its line
// breaks and tabs were.
func TestConnectErrorLines(t *testing.T) {
	t.Parallel()
	src := &failingInfo{fakeSource: newFakeSource(), err: errors.New("failed to connect to `user=alice database=opsdesk`:\n" +
		"\t127.0.0.1:5432 (localhost): dial error: dial tcp 127.0.0.1:5432: connect: connection refused\n" +
		"\t[::1]:5432 (localhost): dial error: dial tcp [::1]:5432: connect: connection refused")}
	h := newSourceHarness(t, src, Config{Context: "prod-eu"}, 80, 24)
	v := h.view()
	words := strings.Join(strings.Fields(v), " ") // the screen wraps it
	require.NotContains(t, v, "\uFFFD", "the connection error is garbled:\n%s", v)
	require.Contains(t, words, "database=opsdesk`: 127.0.0.1:5432 (localhost): dial error:", "the connection error is garbled:\n%s", v)
}

// failingInfo is a store whose server info cannot be read.
type failingInfo struct {
	*fakeSource
	err error
}

func (f *failingInfo) Info(context.Context) (readmodel.Info, error) { return readmodel.Info{}, f.err }

// TestKeyLookup: :key shows the record, or explains an absent one.
func TestKeyLookup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 120, 40)
	h.keys(":key acme/create-ticket/run-42:create-ticket<enter>")
	require.Contains(t, h.view(), "Operation 48213", "the record is not shown:\n%s", h.view())
	h.keys(":key acme/create-ticket/nope<enter>")
	require.Contains(t, h.view(), "No attempt was ever recorded for this identity.", "no explanation:\n%s", h.view())
	require.EqualValues(t, 2, len(h.m.stack), "a second lookup stacked another detail: %d screens", len(h.m.stack))
	h.keys("q")
	require.Contains(t, h.view(), "Operation 48213", "q did not go back to the record looked up first:\n%s", h.view())
	h.keys("q")
	require.Equal(t, h.m.overview(), h.m.active(), "q did not go back from the detail")
	require.False(t, h.quit, "q did not go back from the detail")
	h.keys("q")
	require.True(t, h.quit, "q did not quit from the overview")
}

// TestFastTyping: runes that arrive in one message (typed quickly) act
// one by one; a paste goes whole into the open input.
func TestFastTyping(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 80, 24)
	h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(":stuck")}).keys("<enter>")
	require.Equal(t, h.m.list(), h.m.active(), "typed quickly, :stuck did not open the stuck list")
	require.Equal(t, "state:stuck", h.m.list().filterText, "typed quickly, :stuck did not open the stuck list")
	h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jj")})
	require.EqualValues(t, 1, h.m.list().sel, "typed quickly, jj moved to %d (frozen %v)", h.m.list().sel, h.m.refresh.frozen)
	require.True(t, h.m.refresh.frozen, "typed quickly, jj moved to %d (frozen %v)", h.m.list().sel, h.m.refresh.frozen)
	h.keys("/")
	h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("tool:create-ticket"), Paste: true}).keys("<enter>")
	require.Equal(t, "state:stuck tool:create-ticket", h.m.list().filterText, "the pasted filter reads %q", h.m.list().filterText)
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	msg, err := parseCommand(":ops state:stuck tool:x")
	require.NoError(t, err)
	nav := msg.(listNav)
	require.Equal(t, screenList, nav.target(), "got %+v", nav)
	require.Equal(t, "state:stuck tool:x", nav.filterText, "got %+v", nav)
	require.Equal(t, readmodel.SortLease, nav.sort, "got %+v", nav)
	msg, _ = parseCommand("conflicts tenant:acme")
	nav = msg.(listNav)
	require.True(t, nav.filter.Conflicted, "got %+v", nav)
	require.Equal(t, "acme", nav.filter.Tenants[0], "got %+v", nav)
	msg, _ = parseCommand("key acme/deploy-service/deploy/web/42")
	id := *msg.(detailNav).ident
	require.Equal(t, (identity{"acme", "deploy-service", "deploy/web/42"}), id, "got %+v", id)
	for _, bad := range []string{"key acme/tool", "ops state:nope", "frob"} {
		_, err := parseCommand(bad)
		require.Error(t, err, "%q parsed", bad)
	}
	msg, _ = parseCommand("quit")
	require.Equal(t, (tea.QuitMsg{}), msg, "quit does not quit")
}

// TestFlow runs the console in a real Bubble Tea program: start, filter
// from the overview, open a detail, back, and quit.
func TestFlow(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	tm := teatest.NewTestModel(t, New(src, Config{Context: "prod-eu", NoColor: true}), teatest.WithInitialTermSize(120, 40))
	out := &screenLog{tm: tm}
	wait := out.wait(t)
	wait("Needs attention")
	tm.Type("/state:stuck")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("filter: state:stuck")
	wait("48207  globex")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("Operation 48213")
	wait("lease expired without a completion")
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	wait("x clears it")
	tm.Type("q") // back to the overview
	tm.Type("q") // and quit
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
	require.Equal(t, final.overview(), final.active(), "ended on screen %s, want the overview", final.active().id())
	require.Equal(t, "state:stuck", final.list().filterText, "the list holds %q with %d rows", final.list().filterText, len(final.list().page.Rows))
	require.EqualValues(t, 2, len(final.list().page.Rows), "the list holds %q with %d rows", final.list().filterText, len(final.list().page.Rows))
	require.NotNil(t, final.detail().d, "the detail did not show 48213")
	require.EqualValues(t, 48213, final.detail().d.ID, "the detail did not show 48213")
}

// screenLog accumulates a program's output; wait returns once what it
// looks for appeared since the previous wait.
type screenLog struct {
	tm   *teatest.TestModel
	buf  bytes.Buffer
	mark int
}

func (l *screenLog) wait(t *testing.T) func(string) {
	return func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, _ = io.Copy(&l.buf, l.tm.Output())
			if i := bytes.Index(l.buf.Bytes()[l.mark:], []byte(what)); i >= 0 {
				l.mark += i
				return
			}
			require.False(t, time.Now().After(deadline), "%q did not appear; output since the last step:\n%s", what, l.buf.Bytes()[l.mark:])
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestFlowCommandLine: the : line reaches a lookup and ctrl+c quits from
// anywhere, even while typing.
func TestFlowCommandLine(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	tm := teatest.NewTestModel(t, New(src, Config{NoColor: true}), teatest.WithInitialTermSize(80, 24))
	wait := (&screenLog{tm: tm}).wait(t)
	wait("Needs attention")
	tm.Type(":key acme/create-ticket/nothing-here")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("No attempt was ever recorded")
	tm.Type("/") // nothing to filter on a detail: ignored
	tm.Type(":ops")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
	require.True(t, final.cmd.active, "ctrl+c did not quit while typing %q", final.cmd.input.Value())
	require.Equal(t, "ops", final.cmd.input.Value(), "ctrl+c did not quit while typing %q", final.cmd.input.Value())
}

// BenchmarkListView renders a full 120x40 operations list, without colour
// (as the goldens) and with true colour (the costliest styling).
func BenchmarkListView(b *testing.B) {
	for _, p := range []struct {
		name    string
		profile termenv.Profile
	}{{"ascii", termenv.Ascii}, {"truecolor", termenv.TrueColor}} {
		b.Run(p.name, func(b *testing.B) {
			h := newHarnessProfile(b, newFakeSource(), 120, 40, p.profile).keys(":ops<enter>")
			require.False(b, len(h.m.list().page.Rows) < 30, "only %d rows", len(h.m.list().page.Rows))
			b.ReportAllocs()
			for b.Loop() {
				_ = h.m.View()
			}
		})
	}
}

// TestSelectionStaysOnItsRecord: a refresh keeps the cursor on the
// selected record when rows move around it, and when the record leaves
// the page the list says so instead of quietly selecting another.
func TestSelectionStaysOnItsRecord(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":ops<enter><down><down>")
	l := h.m.list()
	sel, ok := l.selected()
	require.True(t, ok)
	require.EqualValues(t, 48207, sel.ID)
	// A newer record arrives at the top: the cursor follows 48207.
	src.mu.Lock()
	fresh := src.rows[len(src.rows)-1] // completed
	fresh.ID, fresh.Key = 48300, "ord-7732:newest"
	src.rows = append(src.rows, fresh)
	src.mu.Unlock()
	h.send(h.lastThaw(), h.lastTick())
	sel, _ = l.selected()
	require.EqualValues(t, 48207, sel.ID, "the cursor moved off its record")
	require.EqualValues(t, 3, l.sel)
	require.NotContains(t, h.view(), "left this page")

	// 48207 is decided elsewhere and leaves the stuck list.
	h.keys(":stuck<enter><down>")
	changeBehindTheScenes(src, 48207)
	h.send(h.lastThaw(), h.lastTick())
	require.Contains(t, h.view(), "▸ 48207 left this page (decided, or changed) · the cursor is on another record")
	h.keys("<up>")
	require.NotContains(t, h.view(), "left this page", "the note outlives the operator's next move")
}

// TestListKeepsLastRowsDuringOutage: a list opened again while the
// database is unreachable shows its last rows, marked stale; once the
// database answers, the mark goes.
func TestListKeepsLastRowsDuringOutage(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":stuck<enter><esc>")
	src.setDown(true)
	h.keys(":stuck<enter>")
	v := h.view()
	require.Contains(t, v, "48213")
	require.Contains(t, v, "48207")
	require.Contains(t, v, "⚠ stale, as of 03:12:09")
	require.Contains(t, v, "showing the last good page")
	src.setDown(false)
	h.send(h.lastTick())
	require.NotContains(t, h.view(), "stale")
}

// TestLeftNoteLasts: the note that the selected record left stays through
// later refreshes, until the operator moves; back from a decision on the
// record, the list says it left.
func TestLeftNoteLasts(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":stuck<enter><enter>")
	changeBehindTheScenes(src, 48213)
	h.keys("<esc>")
	require.Contains(t, h.view(), "▸ 48213 left this page")
	h.send(h.lastTick())
	h.send(h.lastTick())
	require.Contains(t, h.view(), "▸ 48213 left this page", "a later refresh dropped the note")
}

// TestQuitOnlyFromTheOverview: q quits from the overview and nowhere
// else: it goes back from a list, a record or a flow's step, does
// nothing on the too-small notice (the operator may be mid-flow and only
// resized) or before the database answered; ctrl+c always quits.
func TestQuitOnlyFromTheOverview(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 80, 24)
	h.keys(":stuck<enter>r")
	require.Equal(t, screenReconcile, h.m.active().id())
	h.send(tea.WindowSizeMsg{Width: 50, Height: 15})
	h.keys("q")
	require.False(t, h.quit, "q on the too-small notice quit")
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	require.Equal(t, screenReconcile, h.m.active().id(), "q on the too-small notice left the flow")
	for _, want := range []screenID{screenList, screenOverview} {
		h.keys("q")
		require.False(t, h.quit, "q quit before the overview")
		require.Equal(t, want, h.m.active().id())
	}
	h.keys("q")
	require.True(t, h.quit, "q on the overview does not quit")

	down := newFakeSource()
	down.setDown(true)
	h = newHarness(t, down, 80, 24)
	h.keys("q")
	require.False(t, h.quit, "q quit before the database answered")
	require.NotContains(t, h.view(), "q quit")
	h.keys("<ctrl+c>")
	require.True(t, h.quit)
}

// TestDrillKeepsThePath: a list opened from the retention review goes
// back to the review, not to the overview.
func TestDrillKeepsThePath(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeSource(), 120, 40).keys(":retention<enter><enter>")
	require.Equal(t, screenList, h.m.active().id())
	require.Contains(t, h.view(), "sort: retention")
	h.keys("<enter>")
	require.Equal(t, screenDetail, h.m.active().id())
	h.keys("<esc>")
	require.Equal(t, screenList, h.m.active().id())
	h.keys("<esc>")
	require.Equal(t, screenReview, h.m.active().id(), "back from the drilled list is not the review")
	h.keys("<esc>")
	require.Equal(t, screenOverview, h.m.active().id())
}
