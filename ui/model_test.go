package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/opsdesk/opsdesk/internal/storeview"
)

func mustDur(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRefreshFreezesWhileMoving: a tick right after a cursor movement does
// not poll; the thaw of the last movement does, and an older thaw does
// nothing.
func TestRefreshFreezesWhileMoving(t *testing.T) {
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":ops<enter>")
	lists := src.called("list")

	h.send(h.lastTick())
	if got := src.called("list"); got != lists+1 {
		t.Fatalf("a tick polled %d times, want 1", got-lists)
	}
	h.keys("<down>")
	first := h.lastThaw()
	h.keys("<down>")
	if !strings.Contains(h.view(), "frozen while moving") {
		t.Error("the status bar does not say refresh is frozen")
	}
	before := src.called("list")
	h.send(h.lastTick())
	if got := src.called("list"); got != before {
		t.Fatalf("a tick while moving polled the store")
	}
	h.send(first)
	if got := src.called("list"); got != before {
		t.Fatalf("the thaw of an earlier movement polled the store")
	}
	h.send(h.lastThaw())
	if got := src.called("list"); got != before+1 {
		t.Fatalf("the thaw did not run the skipped refresh (%d polls)", got-before)
	}
	if h.m.list().sel != 2 {
		t.Errorf("the refresh moved the selection to %d, want 2", h.m.list().sel)
	}
	if !strings.Contains(h.view(), "⟳ 2s") {
		t.Error("the status bar does not show the interval again")
	}
}

// TestPause: space stops polling and ticks of the old chain are ignored;
// space again polls at once and starts a new chain.
func TestPause(t *testing.T) {
	src := newFakeSource()
	h := newHarness(t, src, 80, 24)
	old := h.lastTick()
	h.keys("<space>")
	if !strings.Contains(h.view(), "⏸ paused") || h.m.keys.Pause.Help().Desc != "resume" {
		t.Fatalf("the view does not say paused:\n%s", h.view())
	}
	before := src.called("overview")
	h.send(old)
	if src.called("overview") != before {
		t.Fatal("a tick polled while paused")
	}
	h.keys("<space>")
	if src.called("overview") != before+1 {
		t.Fatal("resuming did not poll at once")
	}
	next := h.lastTick()
	if next.gen == old.gen {
		t.Fatal("resuming did not start a new tick chain")
	}
	h.send(old)
	if src.called("overview") != before+1 {
		t.Fatal("a tick of the old chain polled")
	}
	h.send(next)
	if src.called("overview") != before+2 {
		t.Fatal("a tick of the new chain did not poll")
	}
}

// TestRefreshSpeed: + and - step the interval within 500ms..60s.
func TestRefreshSpeed(t *testing.T) {
	h := newHarness(t, newFakeSource(), 80, 24)
	h.keys("+")
	if h.m.refresh.every != time.Second {
		t.Fatalf("+ gave %v", h.m.refresh.every)
	}
	h.keys("++++")
	if h.m.refresh.every != MinRefresh || !strings.Contains(h.view(), "⟳ 500ms") {
		t.Fatalf("+ went below the minimum: %v", h.m.refresh.every)
	}
	h.keys(strings.Repeat("-", 10))
	if h.m.refresh.every != MaxRefresh || !strings.Contains(h.view(), "⟳ 1m") {
		t.Fatalf("- went past the maximum: %v", h.m.refresh.every)
	}
}

// TestStaleResultDropped: the answer to an older request arriving after a
// newer one's changes nothing, neither the rows nor the status.
func TestStaleResultDropped(t *testing.T) {
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":stuck<enter>")
	l := h.m.list()
	stuck := l.seq
	if len(l.page.Rows) != 2 {
		t.Fatalf("%d stuck rows, want 2", len(l.page.Rows))
	}
	// Ask for another filter but hold its answer; then the stuck list's
	// answer (the older request) arrives.
	cmd := l.show(storeview.Filter{States: []storeview.State{storeview.StateRejected}}, "state:rejected", storeview.SortNewest)
	newer := cmd().(pageMsg)
	old := pageMsg{seq: stuck, page: storeview.Page{DBTime: dbNow.Add(time.Hour), Rows: []storeview.Row{{ID: 1, DBTime: dbNow}}}}
	h.send(old)
	if l.loaded || len(l.page.Rows) != 0 {
		t.Fatalf("a stale page was shown: %+v", l.page.Rows)
	}
	if h.m.dbTime.Equal(old.page.DBTime) {
		t.Fatal("a stale page moved the database time")
	}
	h.send(newer)
	for _, r := range l.page.Rows {
		if r.State != storeview.StateRejected {
			t.Fatalf("row %d is %s, want rejected", r.ID, r.State)
		}
	}
	h.send(old)
	if len(l.page.Rows) == 1 && l.page.Rows[0].ID == 1 {
		t.Fatal("a stale page replaced the current one")
	}
	// The same holds for the detail and the overview.
	h.keys("<enter>")
	d := h.m.detail()
	h.send(detailMsg{seq: d.seq - 1, d: storeview.Detail{Row: storeview.Row{ID: 7}}})
	if d.d == nil || d.d.ID == 7 {
		t.Fatal("a stale detail was shown")
	}
	h.send(overviewMsg{seq: h.m.overview().seq - 1, ov: storeview.Overview{Stuck: 999}})
	if h.m.overview().ov.Stuck == 999 {
		t.Fatal("a stale overview was shown")
	}
}

// TestFilterErrorKeepsFilter: a bad filter is an inline error; the list
// keeps its previous filter and rows; esc closes the bar, esc again clears
// the filter.
func TestFilterErrorKeepsFilter(t *testing.T) {
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":ops tool:create-ticket<enter>")
	rows := len(h.m.list().page.Rows)
	lists := src.called("list")
	h.keys("/age>soon<enter>")
	v := h.view()
	if !strings.Contains(v, "age needs a positive duration") || !strings.Contains(v, "the list keeps filter tool:create-ticket") {
		t.Fatalf("no inline error:\n%s", v)
	}
	if h.m.list().filterText != "tool:create-ticket" || len(h.m.list().page.Rows) != rows || src.called("list") != lists {
		t.Fatal("a bad filter changed the list")
	}
	h.keys("q") // typed into the bar, not quitting
	if h.quit || !strings.Contains(h.m.list().input.Value(), "soonq") {
		t.Fatal("the filter bar did not take q as text")
	}
	h.keys("<esc>")
	if h.m.list().editing || h.m.list().filterText != "tool:create-ticket" {
		t.Fatal("esc in the bar did not close it keeping the filter")
	}
	h.keys("<esc>")
	if h.m.list().filterText != "" || h.m.active() != h.m.list() {
		t.Fatal("esc did not clear the filter")
	}
	h.keys("<esc>")
	if h.m.active() != h.m.overview() {
		t.Fatal("esc without a filter did not go back")
	}
}

// TestPaging: keyset pages forward and back; bindings that do not apply
// are disabled, so they neither show in the footer nor act.
func TestPaging(t *testing.T) {
	src := newFakeSource()
	h := newHarness(t, src, 120, 40).keys(":ops<enter>")
	l := h.m.list()
	first := l.page.Rows[0].ID
	if strings.Contains(h.view(), "prev page") {
		t.Error("prev page is offered on the first page")
	}
	lists := src.called("list")
	h.keys("p")
	if src.called("list") != lists {
		t.Fatal("a disabled binding acted")
	}
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
	if len(seen) != len(src.rows) {
		t.Fatalf("paged through %d rows, want %d", len(seen), len(src.rows))
	}
	if strings.Contains(h.view(), "next page") {
		t.Error("next page is offered on the last page")
	}
	for len(l.pages) > 1 {
		h.keys("p")
	}
	if l.page.Rows[0].ID != first {
		t.Fatal("paging back did not return to the first page")
	}
	// Sort cycles through the store's sorts and restarts paging.
	h.keys("s")
	if l.sort != storeview.SortLease || len(l.pages) != 1 {
		t.Fatalf("sort %s on page %d, want lease on the first page", l.sort, len(l.pages))
	}
	if !slices.IsSortedFunc(l.page.Rows, func(a, b storeview.Row) int { return a.LeaseExpiresAt.Compare(b.LeaseExpiresAt) }) {
		t.Fatal("rows are not in lease expiry order")
	}
	h.keys("ss")
	if l.sort != storeview.SortNewest {
		t.Fatal("sort did not cycle back")
	}
}

// TestPageTurnInFlight: n typed again before the next page has arrived
// does nothing (n and p are disabled while a page turn is in flight, in
// the footer too), so each page keeps one number and its own rows; a turn
// that fails keeps the page shown and its number.
func TestPageTurnInFlight(t *testing.T) {
	src := newFakeSource()
	h := newHarness(t, src, 80, 24).keys(":ops<enter>")
	l := h.m.list()
	all, err := src.List(t.Context(), storeview.Query{Limit: len(src.rows) + 1})
	if err != nil {
		t.Fatal(err)
	}
	limit := l.limit()
	if len(all.Rows) <= 3*limit {
		t.Fatalf("%d rows make fewer than four pages of %d", len(all.Rows), limit)
	}
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
		if len(l.pages) != n || !slices.Equal(got, want) {
			t.Fatalf("%d pages deep showing %v, want page %d: %v", len(l.pages), got, n, want)
		}
		title := strings.SplitN(h.view(), "\n", 3)[1]
		if !strings.Contains(title, fmt.Sprintf("page %d · %d rows · ", n, len(want))) {
			t.Fatalf("the title reads %q on page %d", title, n)
		}
	}
	n := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'n'}}
	p := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'p'}}

	// n, n again and p before the page arrives: one turn.
	_, first := h.m.Update(n)
	v := h.view()
	if !strings.Contains(v, "page 1 · loading page 2…") {
		t.Errorf("a page turn in flight is not shown:\n%s", v)
	}
	if strings.Contains(v, "next page") || strings.Contains(v, "prev page") {
		t.Errorf("n or p is offered while a page turn is in flight:\n%s", v)
	}
	_, second := h.m.Update(n)
	_, third := h.m.Update(p)
	h.run(first)
	h.run(second)
	h.run(third)
	on(2)
	if !strings.Contains(h.view(), "n next page") {
		t.Error("n is not offered again once the page arrived")
	}

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
	if l.err == nil || !l.keys.NextPage.Enabled() || !l.keys.PrevPage.Enabled() {
		t.Fatalf("after a failed turn: error %v, n enabled %v, p enabled %v", l.err, l.keys.NextPage.Enabled(), l.keys.PrevPage.Enabled())
	}
	src.setDown(false)
	h.keys("n")
	on(3)
}

// TestUnreachableAndRecovery: a failed poll whose probe fails too shows
// the banner; the next successful poll removes it by itself. A failing
// query with a reachable database is only the last error.
func TestUnreachableAndRecovery(t *testing.T) {
	src := newFakeSource()
	h := newHarness(t, src, 80, 24).keys(":ops<enter>")
	src.setDown(true)
	h.send(h.lastTick())
	v := h.view()
	if !strings.Contains(v, "database unreachable since 03:12:09 UTC") || !strings.Contains(v, "retrying every 2s") {
		t.Fatalf("no banner:\n%s", v)
	}
	if len(h.m.list().page.Rows) == 0 {
		t.Fatal("the last good rows were dropped")
	}
	src.setDown(false)
	h.send(h.lastTick())
	v = h.view()
	if strings.Contains(v, "unreachable") || strings.Contains(v, "last error") {
		t.Fatalf("no recovery:\n%s", v)
	}

	// A failing query while the database answers.
	_ = h.m.list().fetch()
	h.send(pageMsg{seq: h.m.list().seq, err: errTimeout})
	v = h.view()
	if strings.Contains(v, "unreachable") || !strings.Contains(v, "last error: list operations: canceling statement") {
		t.Fatalf("a query error is not shown as the last error:\n%s", v)
	}
}

var errTimeout = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string {
	return "list operations: canceling statement due to statement timeout"
}

// TestConnectRetry: an unreachable database at start is a message with a
// retry key; the console connects once the database answers.
func TestConnectRetry(t *testing.T) {
	src := newFakeSource()
	src.setDown(true)
	h := newHarness(t, src, 80, 24)
	v := h.view()
	if !strings.Contains(v, "Cannot reach the database of context prod-eu") || !strings.Contains(v, "r retry now") {
		t.Fatalf("no clear message:\n%s", v)
	}
	h.keys(":")
	if h.m.cmd.active {
		t.Fatal("the command line opened without a connection")
	}
	h.keys("r")
	if src.called("info") != 2 {
		t.Fatalf("r did not retry (%d attempts)", src.called("info"))
	}
	src.setDown(false)
	h.send(h.lastTick())
	if h.m.active() != h.m.overview() || !strings.Contains(h.view(), "Needs attention") {
		t.Fatalf("no overview after the database answered:\n%s", h.view())
	}
	if strings.Contains(h.view(), "retry now") {
		t.Error("the retry key is still offered")
	}
}

// TestConnectErrorLines: pgconn's multi-line connection error reads as
// one paragraph on the connect screen, with no U+FFFD where its line
// breaks and tabs were.
func TestConnectErrorLines(t *testing.T) {
	src := &failingInfo{fakeSource: newFakeSource(), err: errors.New("failed to connect to `user=alice database=opsdesk`:\n" +
		"\t127.0.0.1:5432 (localhost): dial error: dial tcp 127.0.0.1:5432: connect: connection refused\n" +
		"\t[::1]:5432 (localhost): dial error: dial tcp [::1]:5432: connect: connection refused")}
	h := newSourceHarness(t, src, Options{Context: "prod-eu"}, 80, 24)
	v := h.view()
	words := strings.Join(strings.Fields(v), " ") // the screen wraps it
	if strings.Contains(v, "\uFFFD") || !strings.Contains(words, "database=opsdesk`: 127.0.0.1:5432 (localhost): dial error:") {
		t.Fatalf("the connection error is garbled:\n%s", v)
	}
}

// failingInfo is a store whose server info cannot be read.
type failingInfo struct {
	*fakeSource
	err error
}

func (f *failingInfo) Info(context.Context) (storeview.Info, error) { return storeview.Info{}, f.err }

// TestKeyLookup: :key shows the record, or explains an absent one.
func TestKeyLookup(t *testing.T) {
	h := newHarness(t, newFakeSource(), 120, 40)
	h.keys(":key acme/create-ticket/run-42:create-ticket<enter>")
	if !strings.Contains(h.view(), "Operation 48213") {
		t.Fatalf("the record is not shown:\n%s", h.view())
	}
	h.keys(":key acme/create-ticket/nope<enter>")
	if !strings.Contains(h.view(), "No attempt was ever recorded for this identity.") {
		t.Fatalf("no explanation:\n%s", h.view())
	}
	if len(h.m.stack) != 2 {
		t.Fatalf("a second lookup stacked another detail: %d screens", len(h.m.stack))
	}
	h.keys("q")
	if h.m.active() != h.m.overview() || h.quit {
		t.Fatal("q did not go back from the detail")
	}
	h.keys("q")
	if !h.quit {
		t.Fatal("q did not quit from the overview")
	}
}

// TestFastTyping: runes that arrive in one message (typed quickly) act
// one by one; a paste goes whole into the open input.
func TestFastTyping(t *testing.T) {
	h := newHarness(t, newFakeSource(), 80, 24)
	h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(":stuck")}).keys("<enter>")
	if h.m.active() != h.m.list() || h.m.list().filterText != "state:stuck" {
		t.Fatalf("typed quickly, :stuck did not open the stuck list")
	}
	h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jj")})
	if h.m.list().sel != 1 || !h.m.refresh.frozen {
		t.Fatalf("typed quickly, jj moved to %d (frozen %v)", h.m.list().sel, h.m.refresh.frozen)
	}
	h.keys("/")
	h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("tool:create-ticket"), Paste: true}).keys("<enter>")
	if h.m.list().filterText != "state:stuck tool:create-ticket" {
		t.Fatalf("the pasted filter reads %q", h.m.list().filterText)
	}
}

func TestParseCommand(t *testing.T) {
	msg, err := parseCommand(":ops state:stuck tool:x")
	if err != nil {
		t.Fatal(err)
	}
	nav := msg.(listNav)
	if nav.target() != screenList || nav.filterText != "state:stuck tool:x" || nav.sort != storeview.SortLease {
		t.Fatalf("got %+v", nav)
	}
	msg, _ = parseCommand("conflicts tenant:acme")
	if nav := msg.(listNav); !nav.filter.Conflicted || nav.filter.Tenants[0] != "acme" {
		t.Fatalf("got %+v", nav)
	}
	msg, _ = parseCommand("key acme/deploy-service/deploy/web/42")
	if id := *msg.(detailNav).ident; id != (identity{"acme", "deploy-service", "deploy/web/42"}) {
		t.Fatalf("got %+v", id)
	}
	for _, bad := range []string{"key acme/tool", "ops state:nope", "frob"} {
		if _, err := parseCommand(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if msg, _ := parseCommand("quit"); msg != (tea.QuitMsg{}) {
		t.Error("quit does not quit")
	}
}

// TestFlow runs the console in a real Bubble Tea program: start, filter
// from the overview, open a detail, back, and quit.
func TestFlow(t *testing.T) {
	src := newFakeSource()
	tm := teatest.NewTestModel(t, New(src, Options{Context: "prod-eu", NoColor: true}), teatest.WithInitialTermSize(120, 40))
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
	wait("esc clears it")
	tm.Type("q") // back to the overview
	tm.Type("q") // and quit
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
	if final.active() != final.overview() {
		t.Errorf("ended on screen %s, want the overview", final.active().id())
	}
	if final.list().filterText != "state:stuck" || len(final.list().page.Rows) != 2 {
		t.Errorf("the list holds %q with %d rows", final.list().filterText, len(final.list().page.Rows))
	}
	if final.detail().d == nil || final.detail().d.ID != 48213 {
		t.Error("the detail did not show 48213")
	}
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
			if time.Now().After(deadline) {
				t.Fatalf("%q did not appear; output since the last step:\n%s", what, l.buf.Bytes()[l.mark:])
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestFlowCommandLine: the : line reaches a lookup and ctrl+c quits from
// anywhere, even while typing.
func TestFlowCommandLine(t *testing.T) {
	src := newFakeSource()
	tm := teatest.NewTestModel(t, New(src, Options{NoColor: true}), teatest.WithInitialTermSize(80, 24))
	wait := (&screenLog{tm: tm}).wait(t)
	wait("Needs attention")
	tm.Type(":key acme/create-ticket/nothing-here")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("No attempt was ever recorded")
	tm.Type("/") // nothing to filter on a detail: ignored
	tm.Type(":ops")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
	if !final.cmd.active || final.cmd.input.Value() != "ops" {
		t.Errorf("ctrl+c did not quit while typing %q", final.cmd.input.Value())
	}
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
			if len(h.m.list().page.Rows) < 30 {
				b.Fatalf("only %d rows", len(h.m.list().page.Rows))
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = h.m.View()
			}
		})
	}
}
