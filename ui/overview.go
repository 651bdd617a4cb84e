package ui

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// tile is one selectable item of the overview: the three "needs
// attention" tiles, then each state of the states line.
type tile int

const (
	tileStuck tile = iota
	tileDeferred
	tileConflicted
	tileExpiring
	tilePending
	tileStuckState
	tileDeferredState
	tileCompleted
	tileRejected
	tileReleased
	tileCount
)

// target is the list a tile opens.
func (t tile) target() listNav {
	st := func(s ...readmodel.State) readmodel.Filter { return readmodel.Filter{States: s} }
	switch t {
	case tileStuck, tileStuckState:
		return listOf(st(readmodel.StateStuck), readmodel.SortLease)
	case tileDeferred, tileDeferredState:
		return listOf(st(readmodel.StateDeferred), readmodel.SortLease)
	case tileConflicted:
		return listOf(readmodel.Filter{Conflicted: true}, readmodel.SortNewest)
	case tileExpiring:
		// Exactly the records the tile counts, the soonest first.
		return listOf(readmodel.Filter{ExpiresWithin: 24 * time.Hour}, readmodel.SortExpires)
	case tilePending:
		return listOf(st(readmodel.StatePending), readmodel.SortLease)
	case tileCompleted:
		return listOf(st(readmodel.StateCompleted), readmodel.SortNewest)
	case tileRejected:
		return listOf(st(readmodel.StateRejected), readmodel.SortNewest)
	}
	return listOf(st(readmodel.StateReleased), readmodel.SortNewest)
}

// screenOverview is the first screen, always at the bottom of the stack.
const screenOverview screenID = "overview"

// overviewKind is the overview and its command.
var overviewKind = screenKind{
	id:    screenOverview,
	build: func(d deps, _ Config) screen { return newOverview(d) },
	commands: []command{{names: []string{"overview", "home", "top"}, usage: ":overview", help: "the first screen",
		try: "overview", suggest: "overview", parse: noArgs("overview", overviewNav{})}},
}

// overviewNav opens the overview.
type overviewNav struct{}

func (overviewNav) target() screenID { return screenOverview }

func (overviewNav) describe() string { return "overview" }

// overviewScreen is the first screen: what needs attention, and counts.
type overviewScreen struct {
	deps
	navigator
	w, h    int
	seq     int
	loading bool
	ov      *readmodel.Overview
	err     error
	sel     tile
	// pulse is the stuck count at each overview read since the console
	// opened (at most pulseSamples), each at its database time.
	pulse []pulseSample
}

// pulseSample is the stuck count one overview read gave.
type pulseSample struct {
	at    time.Time
	stuck int64
}

// pulseSamples is how many reads the stuck count's sparkline spans.
const pulseSamples = 60

func newOverview(d deps) *overviewScreen {
	s := &overviewScreen{deps: d}
	s.updateKeys()
	return s
}

func (s *overviewScreen) id() screenID          { return screenOverview }
func (s *overviewScreen) Init() tea.Cmd         { return nil }
func (s *overviewScreen) SetSize(w, h int)      { s.w, s.h = w, h }
func (s *overviewScreen) current(seq int) bool  { return seq == s.seq }
func (s *overviewScreen) capturing() bool       { return false }
func (s *overviewScreen) back() (bool, tea.Cmd) { return false, nil }

// movesSideways: h and l move across the tiles.
func (s *overviewScreen) movesSideways() bool { return true }

// open shows the overview alone on the stack.
func (s *overviewScreen) open(_ navMsg, _ opening) ([]screen, tea.Cmd, bool) {
	return []screen{s}, s.fetch(), true
}

func (s *overviewScreen) asOf() time.Time {
	if s.ov == nil {
		return time.Time{}
	}
	return s.ov.DBTime
}

func (s *overviewScreen) fetch() tea.Cmd {
	s.seq++
	s.loading = true
	return s.f.overview(s.seq)
}

func (s *overviewScreen) refresh() tea.Cmd {
	if s.loading {
		return nil
	}
	return s.fetch()
}

func (s *overviewScreen) updateKeys() {
	loaded := s.ov != nil
	s.keys.Up.SetEnabled(loaded)
	s.keys.Down.SetEnabled(loaded)
	s.keys.Left.SetEnabled(loaded)
	s.keys.Right.SetEnabled(loaded)
	s.keys.Open.SetEnabled(loaded)
	s.keys.Filter.SetEnabled(loaded)
	s.keys.Filter.SetHelp("/", "filter")
	s.keys.Open.SetHelp("enter", "open")
}

// ShortHelp implements help.KeyMap.
func (s *overviewScreen) ShortHelp() []key.Binding {
	return []key.Binding{combined("↑/↓", "select", s.keys.Up, s.keys.Down), s.keys.Open, s.keys.Filter}
}

// FullHelp implements help.KeyMap.
func (s *overviewScreen) FullHelp() [][]key.Binding {
	return [][]key.Binding{{s.keys.Up, s.keys.Down, s.keys.Left, s.keys.Right}, {s.keys.Open, s.keys.Filter}}
}

func (s *overviewScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case overviewMsg:
		if msg.seq != s.seq {
			return s, nil // a stale answer
		}
		s.loading = false
		s.err = msg.err
		if msg.err == nil {
			ov := msg.ov
			s.ov = &ov
			if n := len(s.pulse); n == 0 || ov.DBTime.After(s.pulse[n-1].at) {
				s.pulse = append(s.pulse, pulseSample{at: ov.DBTime, stuck: ov.Stuck})
				s.pulse = s.pulse[max(0, len(s.pulse)-pulseSamples):]
			}
		}
		s.updateKeys()
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, s.keys.Up, s.keys.Left):
			s.sel = s.step(-1)
		case key.Matches(msg, s.keys.Down, s.keys.Right):
			s.sel = s.step(+1)
		case key.Matches(msg, s.keys.Open):
			s.goTo(s.sel.target())
		case key.Matches(msg, s.keys.Filter):
			s.goTo(listNav{sort: readmodel.SortNewest, edit: true})
		}
	}
	return s, nil
}

// shown tells whether a tile is on screen: the states line leaves out
// deferred records when there are none (their own line says so).
func (s *overviewScreen) shown(t tile) bool {
	return t != tileDeferredState || s.ov == nil || s.ov.Deferred > 0
}

// step is the tile dir (+1 or -1) away from the selected one, among those
// shown, round the end.
func (s *overviewScreen) step(dir int) tile {
	t := s.sel
	for range tileCount {
		t = (t + tileCount + tile(dir)) % tileCount
		if s.shown(t) {
			return t
		}
	}
	return s.sel
}

func (s *overviewScreen) View() string {
	if s.ov == nil {
		switch {
		case s.err != nil && !errors.Is(s.err, readmodel.ErrNotFound):
			return " " + s.st.Error.Render("✗ could not read the overview: "+plainError(s.err))
		default:
			return " loading the overview…"
		}
	}
	ov := s.ov
	w := s.w
	cw := max(1, w-4) // inside the box and its padding
	var lines []string
	lines = append(lines, s.boxRule("┌", "Needs attention", "┐"))

	oldest := "nothing stuck"
	if ov.OldestStuck != nil {
		r := ov.OldestStuck
		oldest = "oldest lease expired " + since(r.LeaseExpiresAt, r.DBTime) +
			" (" + termtext.Clean(r.Tool) + ", " + termtext.Clean(r.Tenant) + ")"
		if r.Due() {
			oldest += " · due again"
		}
	}
	next := "nothing deferred"
	if r := ov.NextDue; r != nil {
		next = "next due " + since(r.DeferredUntil, r.DBTime) + " (" + termtext.Clean(r.Tool) + ", " + termtext.Clean(r.Tenant) +
			") · deferred by " + termtext.Clean(r.DeferredBy)
	}
	deferred := count(ov.Deferred)
	if ov.DeferredAtLeast {
		deferred = count(readmodel.CountCap) + "+"
	}
	counts := []string{OverviewFigure(ov, ov.Stuck, ov.StuckEstimated), deferred, OverviewFigure(ov, ov.Conflicted, ov.ConflictedEstimated),
		OverviewFigure(ov, ov.ExpiringSoon, ov.ExpiringEstimated)}
	nw := 5
	for _, c := range counts {
		nw = max(nw, width(c))
	}
	lines = append(lines,
		s.boxLine(s.tileLine(tileStuck, "⚠ stuck", counts[0], nw, oldest, cw), cw),
		s.boxLine(s.tileLine(tileDeferred, stateText(readmodel.StateDeferred), counts[1], nw, next, cw), cw),
		s.boxLine(s.tileLine(tileConflicted, glyphConflicted+" conflicted", counts[2], nw, "unreviewed", cw), cw),
		s.boxLine(s.tileLine(tileExpiring, "⌛ expiring", counts[3], nw, "retention ends in the next 24h", cw), cw),
	)
	lines = append(lines, s.boxRule("├", "States", "┤"))

	completed := OverviewFigure(ov, ov.Completed, ov.CompletedEstimated)
	items := []stateItem{
		{tilePending, readmodel.StatePending, OverviewFigure(ov, ov.Pending, ov.PendingEstimated) + " pending"},
		{tileStuckState, readmodel.StateStuck, OverviewFigure(ov, ov.Stuck, ov.StuckEstimated) + " stuck"},
		{tileDeferredState, readmodel.StateDeferred, deferred + " deferred"},
		{tileCompleted, readmodel.StateCompleted, completed + " completed"},
		{tileRejected, readmodel.StateRejected, OverviewFigure(ov, ov.Rejected, ov.RejectedEstimated) + " rejected"},
		{tileReleased, readmodel.StateReleased, OverviewFigure(ov, ov.Released, ov.ReleasedEstimated) + " released"},
	}
	// The states line wraps on narrow terminals; the selected state is
	// marked with ▸ (and reversed where there is colour).
	items = slices.DeleteFunc(items, func(it stateItem) bool { return !s.shown(it.t) })
	var row string
	rowW := 0
	for i, it := range items {
		part := stateGlyph(it.st) + " " + it.text
		if s.sel == it.t {
			part = s.st.Selected.Render("▸" + part)
		} else {
			part = s.st.state(it.st).Render(stateGlyph(it.st)) + " " + it.text
		}
		pw := width(part)
		sep := ""
		if i < len(items)-1 {
			sep = " ·"
		}
		if rowW > 0 && rowW+1+pw+len(sep) > cw {
			lines = append(lines, s.boxLine(row, cw))
			row, rowW = "", 0
		}
		if rowW > 0 {
			row += " "
			rowW++
		}
		row += part + sep
		rowW += pw + len(sep)
	}
	lines = append(lines, s.boxLine(row, cw))

	var tail []string
	tail = append(tail, s.st.Box.Render("└"+strings.Repeat("─", max(0, w-2))+"┘"))
	tail = append(tail, "")
	note := " " + s.sel.describe() + " · enter opens it"
	tail = append(tail, s.st.Muted.Render(truncate(note, w)))
	asOf := " counts as of db time " + clock(ov.DBTime) + " UTC"
	if ov.Estimated() {
		asOf += "; ~ marks an estimate (counts above " + count(readmodel.CountCap) + " are estimated), the others are exact"
		if ov.Scoped {
			asOf = " counts as of db time " + clock(ov.DBTime) + " UTC; counts above " + count(readmodel.CountCap) +
				" show as " + count(readmodel.CountCap) + "+ (statistics span every tenant, not just yours)"
		}
	}
	for _, l := range wrap(asOf, w-1) {
		tail = append(tail, s.st.Muted.Render(" "+l))
	}
	if s.err != nil {
		tail = append(tail, " "+s.st.Error.Render(truncate("✗ showing the last good counts: "+plainError(s.err), w-1)))
	}
	lines = append(lines, s.pulseLines(cw, s.h-len(lines)-len(tail))...)
	return strings.Join(append(lines, tail...), "\n")
}

// stateItem is one state on the states line: its tile and its words.
type stateItem struct {
	t    tile
	st   readmodel.State
	text string
}

// describe says what a tile opens.
func (t tile) describe() string {
	switch t {
	case tileStuck, tileStuckState:
		return "stuck records, the longest expired lease first"
	case tileDeferred, tileDeferredState:
		return "deferred records, out of the queue until their reminder"
	case tileConflicted:
		return "records with unreviewed conflicting attempts"
	case tileExpiring:
		return "completed records, the soonest retention expiry first"
	case tilePending:
		return "pending records with a live lease"
	case tileCompleted:
		return "completed records, newest first"
	case tileRejected:
		return "records completed with a business rejection"
	}
	return "records released by an operator"
}

// tileLine is one "needs attention" tile: marker, label, count, note.
func (s *overviewScreen) tileLine(t tile, label, n string, nw int, note string, cw int) string {
	const labelW = 12
	mark := " "
	if s.sel == t {
		mark = "▸"
	}
	rest := pad(padLeft(n, nw)+"   "+note, max(0, cw-2-labelW))
	if s.sel == t {
		return s.st.Selected.Render(mark + " " + pad(label, labelW) + rest)
	}
	// Colour the label only; its glyph and word already say it.
	st := s.st.Stuck
	switch t {
	case tileDeferred:
		st = s.st.Pending
	case tileConflicted:
		st = s.st.Conflict
	case tileExpiring:
		st = s.st.Expiring
	}
	return mark + " " + st.Render(pad(label, labelW)) + rest
}

func (s *overviewScreen) boxLine(content string, cw int) string {
	return s.st.Box.Render("│") + " " + pad(content, cw) + " " + s.st.Box.Render("│")
}

func (s *overviewScreen) boxRule(left, title, right string) string {
	inner := max(0, s.w-2)
	t := " " + title + " "
	fill := max(0, inner-width(t))
	return s.st.Box.Render(left) + s.st.Title.Render(t) + s.st.Box.Render(strings.Repeat("─", fill)+right)
}
