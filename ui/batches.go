package ui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// screenBatches is the list of past bulk runs.
const screenBatches screenID = "batches"

// batchesNav opens the list of past bulk runs.
type batchesNav struct{}

func (batchesNav) target() screenID { return screenBatches }

func (batchesNav) describe() string { return "past bulk runs" }

// batchesKind is the list of past bulk runs and :batches.
var batchesKind = screenKind{
	id:    screenBatches,
	build: func(d deps, _ Config) screen { return newBatches(d) },
	commands: []command{{names: []string{"batches", "runs"}, usage: ":batches",
		help: "past bulk runs, newest first (enter: a run's records)", try: "batches", suggest: "batches",
		parse: noArgs("batches", batchesNav{})}},
}

// batchesScreen lists past bulk runs (R, resolve --by-lookup) and
// reconciler passes newest first, as their start (opsdesk.batches) and
// their decisions' audit records tell them and as far as the role may see
// them: when, by whom, what, the filter, and each group's counts. A pane
// tells the selected run whole; enter opens the audit trail on its
// records (batch:ID).
type batchesScreen struct {
	deps
	navigator
	w, h int
	pageStack[readmodel.BatchCursor]

	seq     int
	loading bool
	loaded  bool
	page    readmodel.BatchPage
	err     error
	sel     int
}

// batchPaneLines is the height of the selected run's pane (a blank line
// first).
const batchPaneLines = 4

// lines is how many lines each run takes in the list: its head, and its
// groups' counts, on two lines below 100 columns so that no count is cut.
func (s *batchesScreen) lines() int {
	if s.w < 100 {
		return 3
	}
	return 2
}

func newBatches(d deps) *batchesScreen {
	s := &batchesScreen{deps: d}
	s.firstPage()
	s.updateKeys()
	return s
}

func (s *batchesScreen) id() screenID          { return screenBatches }
func (s *batchesScreen) Init() tea.Cmd         { return nil }
func (s *batchesScreen) current(seq int) bool  { return seq == s.seq }
func (s *batchesScreen) capturing() bool       { return false }
func (s *batchesScreen) back() (bool, tea.Cmd) { return false, nil }
func (s *batchesScreen) asOf() time.Time       { return s.page.DBTime }

func (s *batchesScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	s.clampSel()
}

// limit is how many runs fit: the title, the pane and the hint take the
// rest.
func (s *batchesScreen) limit() int { return max(1, (s.h-2-batchPaneLines)/s.lines()) }

// open shows the runs right above the overview, from the first page.
func (s *batchesScreen) open(_ navMsg, at opening) ([]screen, tea.Cmd, bool) {
	s.firstPage()
	s.sel, s.loaded, s.err, s.page = 0, false, nil, readmodel.BatchPage{}
	s.updateKeys()
	return at.rooted(s), s.fetch(), true
}

func (s *batchesScreen) fetch() tea.Cmd {
	s.seq++
	s.loading = true
	return s.f.batches(s.seq, readmodel.BatchQuery{Limit: s.limit(), After: s.pageAfter()})
}

func (s *batchesScreen) refresh() tea.Cmd {
	if s.loading {
		return nil
	}
	return s.fetch()
}

func (s *batchesScreen) visibleRows() int { return min(len(s.page.Batches), s.limit()) }

func (s *batchesScreen) selected() (readmodel.Batch, bool) {
	if s.sel < 0 || s.sel >= s.visibleRows() {
		return readmodel.Batch{}, false
	}
	return s.page.Batches[s.sel], true
}

func (s *batchesScreen) clampSel() { s.sel = min(max(0, s.sel), max(0, s.visibleRows()-1)) }

func (s *batchesScreen) updateKeys() {
	s.enableKeys(&s.keys, s.visibleRows() > 0, s.page.Next)
	s.keys.Open.SetHelp("enter", "its records")
}

// ShortHelp implements help.KeyMap.
func (s *batchesScreen) ShortHelp() []key.Binding {
	return []key.Binding{combined("↑/↓", "move", s.keys.Up, s.keys.Down), s.keys.Open, s.keys.NextPage, s.keys.PrevPage}
}

// FullHelp implements help.KeyMap.
func (s *batchesScreen) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{s.keys.Up, s.keys.Down, s.keys.Top, s.keys.Bottom},
		{s.keys.Open, s.keys.NextPage, s.keys.PrevPage},
	}
}

func (s *batchesScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case batchesMsg:
		s.receive(msg)
	case tea.KeyMsg:
		handled, turned := s.pageKey(msg, s.keys, &s.sel, s.visibleRows(), s.page.Next)
		switch {
		case turned:
			s.sel = 0
			s.updateKeys()
			return s, s.fetch()
		case handled:
		case key.Matches(msg, s.keys.Open):
			if b, ok := s.selected(); ok {
				s.goTo(auditOf(readmodel.BatchFilter(b.ID)))
			}
		}
	}
	return s, nil
}

// receive takes a page, keeping the selected run selected when it is
// still there.
func (s *batchesScreen) receive(msg batchesMsg) {
	if msg.seq != s.seq {
		return
	}
	s.loading = false
	s.err = msg.err
	s.settle(msg.err == nil)
	if msg.err != nil {
		s.updateKeys()
		return
	}
	keep, had := s.selected()
	s.page, s.loaded = msg.page, true
	if had {
		if i := slices.IndexFunc(s.page.Batches, func(b readmodel.Batch) bool { return b.ID == keep.ID }); i >= 0 {
			s.sel = i
		}
	}
	s.clampSel()
	s.updateKeys()
}

func (s *batchesScreen) View() string {
	w := max(1, s.w)
	room := max(1, s.h-1)
	lines := []string{spread(" "+s.st.Title.Render("Bulk runs")+"  newest first, with their decisions' audit records",
		"page "+strconv.Itoa(len(s.pages))+" ", w)}
	lines = append(lines, s.body(w)...)
	bottom := s.pane(w)
	for len(lines) < room-len(bottom) {
		lines = append(lines, "")
	}
	lines = append(lines[:min(len(lines), max(1, room-len(bottom)))], bottom...)
	for len(lines) < room {
		lines = append(lines, "")
	}
	lines = append(lines, s.st.Muted.Render(truncate(" a record skipped before its decision, or a decision that never answered, has no audit record", w)))
	return strings.Join(lines[:min(len(lines), max(1, s.h))], "\n")
}

// body is the page's runs, two lines each: when, how long, by whom, what;
// then each group's counts.
func (s *batchesScreen) body(w int) []string {
	if !s.loaded {
		if s.err != nil {
			return []string{"  " + s.st.Error.Render(truncate("✗ could not read the bulk runs: "+plainError(s.err), w-2))}
		}
		return []string{s.st.Muted.Render("  loading…")}
	}
	n := s.visibleRows()
	if n == 0 {
		msg := "  no bulk runs you may see (R on a stuck list starts one)"
		if len(s.pages) > 1 {
			msg = "  no more runs on this page · p goes back"
		}
		return []string{s.st.Muted.Render(truncate(msg, w))}
	}
	// Who decided is as wide as the page's widest, up to a third of the
	// line: the columns after it line up.
	byW := 0
	for _, b := range s.page.Batches[:n] {
		byW = max(byW, width(batchBy(b)))
	}
	byW = min(byW, max(8, w/3))
	out := make([]string, 0, n*s.lines())
	for i := range n {
		b := s.page.Batches[i]
		mark := "  "
		if i == s.sel {
			mark = "▸ "
		}
		span := "-"
		switch {
		case b.FirstAt == nil:
		case b.Span < time.Second:
			span = "<1s" // one decision, or all within a second
		default:
			span = ShortDuration(b.Span)
		}
		head := fmt.Sprintf("%s%s  %s  %s  %s", mark, pad(batchWhen(b, s.page.DBTime), 12), pad(span, 6),
			pad(truncate(batchBy(b), byW), byW), batchWhat(b))
		line := truncate(" "+head, w)
		if i == s.sel {
			line = s.st.Selected.Render(line)
		}
		out = append(out, line)
		groups := packGroups(b, max(1, w-6), s.lines()-1)
		for j := range s.lines() - 1 {
			l := ""
			if j < len(groups) {
				l = truncate("      "+groups[j], w)
			}
			out = append(out, l)
		}
	}
	return out
}

// pane tells the selected run whole.
func (s *batchesScreen) pane(w int) []string {
	b, ok := s.selected()
	if !ok {
		return nil
	}
	field := func(label, value string) string {
		return truncate(" "+s.st.Muted.Render(pad(label, 8))+" "+value, w)
	}
	when := "started " + auditTime(b.StartedAt, s.page.DBTime) + " UTC · "
	if b.FirstAt == nil || b.LastAt == nil {
		when += "no decision you may see"
	} else if first, last := auditTime(*b.FirstAt, s.page.DBTime), auditTime(*b.LastAt, s.page.DBTime); first == last {
		when += "decided " + first
	} else {
		when += "decided " + first + " → " + last
	}
	return []string{
		"",
		field("batch", termtext.Clean(b.ID)+" · "+when),
		field("filter", termtext.Clean(b.FilterText())),
		field("enter", "the audit trail filtered to batch:"+termtext.Clean(b.ID)),
	}
}

// batchWhen is when a run started, on the database's day as a clock time.
func batchWhen(b readmodel.Batch, now time.Time) string { return auditTime(b.StartedAt, now) }

// batchBy is who decided: the roles, each person's claimed name after;
// for a run with no decision the role sees, who started it.
func batchBy(b readmodel.Batch) string {
	roles, names := b.Roles, b.DisplayNames
	if len(roles) == 0 {
		roles, names = []string{b.StartedBy}, nil
		if b.StartedByName != nil {
			names = []string{*b.StartedByName}
		}
	}
	by := cleanJoin(roles)
	if len(names) > 0 {
		by += " (" + cleanJoin(names) + ")"
	}
	return by
}

// batchWhat is what was decided: how many records of which tools, in
// which tenants.
func batchWhat(b readmodel.Batch) string {
	if b.Records == 0 {
		return "no decision you may see"
	}
	tenants := make([]string, len(b.Tenants))
	for i, t := range b.Tenants {
		tenants[i] = chainName(t)
	}
	return fmt.Sprintf("%s record%s · %s · %s", count(int64(b.Operations)), plural(b.Operations), cleanJoin(b.Tools),
		strings.Join(tenants, ", "))
}

// packGroups is each group's counts ("found → completed 4 decided, 1
// skipped"), whole groups to a line of width w, " · " between them, on at
// most n lines (the last takes what is left, cut).
func packGroups(b readmodel.Batch, w, n int) []string {
	if len(b.Groups) == 0 {
		return []string{"filter: " + termtext.Clean(b.FilterText())}
	}
	var out []string
	line := ""
	for _, g := range b.Groups {
		part := termtext.Clean(g.Label()) + " " + g.Counts()
		switch {
		case line == "":
			line = part
		case width(line)+3+width(part) <= w || len(out) == n-1:
			line += " · " + part
		default:
			out = append(out, line)
			line = part
		}
	}
	return append(out, line)
}

// cleanJoin is stored names, each cleaned, comma-separated.
func cleanJoin(values []string) string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = termtext.Clean(v)
	}
	return strings.Join(out, ", ")
}
