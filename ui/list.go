package ui

import (
	"errors"
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

// screenList is the operations list.
const screenList screenID = "list"

// listNav opens the operations list on a filter and a sort.
type listNav struct {
	filter     readmodel.Filter
	filterText string
	sort       readmodel.Sort
	// edit opens the filter bar.
	edit bool
	// drill keeps the screen the list is opened from below it (the
	// retention review), so that esc goes back there.
	drill bool
}

func (listNav) target() screenID { return screenList }

func (n listNav) describe() string { return "operations list: " + n.filterText }

// listOf opens the operations list with a filter.
func listOf(f readmodel.Filter, sort readmodel.Sort) listNav {
	return listNav{filter: f, filterText: f.String(), sort: sort}
}

// listKind is the operations list and its commands: every record, the
// stuck ones, the conflicted ones.
var listKind = screenKind{
	id:    screenList,
	build: func(d deps, o Config) screen { s := newList(d); s.bulk = o.Bulk != nil; return s },
	commands: []command{
		{names: []string{"ops", "op", "operations", "list", "ls"}, usage: ":ops [filter]",
			help: "operations, optionally filtered (:ops state:stuck tool:x)", try: "ops", suggest: "ops ",
			parse: func(rest string) (tea.Msg, error) {
				f, err := readmodel.ParseFilter(rest)
				if err != nil {
					return nil, err
				}
				sort := readmodel.SortNewest
				if len(f.States) == 1 && (f.States[0] == readmodel.StateStuck || f.States[0] == readmodel.StatePending) {
					sort = readmodel.SortLease
				}
				return listOf(f, sort), nil
			}},
		{names: []string{"stuck"}, usage: ":stuck [filter]", help: "stuck records, the longest expired lease first",
			try: "stuck", suggest: "stuck", parse: func(rest string) (tea.Msg, error) {
				f, err := readmodel.ParseFilter(rest)
				if err != nil {
					return nil, err
				}
				if len(f.States) > 0 && !slices.Equal(f.States, []readmodel.State{readmodel.StateStuck}) {
					// Never rewritten without a word into state:stuck.
					return nil, fmt.Errorf(":stuck lists stuck records only: drop the state: term, or write :ops %s", termtext.Clean(f.String()))
				}
				f.States = []readmodel.State{readmodel.StateStuck}
				return listOf(f, readmodel.SortLease), nil
			}},
		{names: []string{"conflicts", "conflicted", "conflict"}, usage: ":conflicts [filter]",
			help: "records with unreviewed conflicting attempts", try: "conflicts", suggest: "conflicts",
			parse: func(rest string) (tea.Msg, error) {
				f, err := readmodel.ParseFilter(rest)
				if err != nil {
					return nil, err
				}
				f.Conflicted = true
				return listOf(f, readmodel.SortNewest), nil
			}},
	},
}

// listScreen browses operations: a filter, a sort, and keyset pages.
type listScreen struct {
	deps
	navigator
	w, h int

	filter     readmodel.Filter
	filterText string
	sort       readmodel.Sort
	pageStack[readmodel.Cursor]

	// seq numbers the requests; pageSeq is the page's latest and
	// countSeq the count's, whose answers alone are taken.
	seq, pageSeq, countSeq int
	loading                bool
	loaded                 bool
	page                   readmodel.Page
	err                    error
	sel                    int

	// The count of the filter's records comes after its page, as an
	// answer of its own (a count costs more than a page): total is
	// the last one, for the filter text totalFor; counting names the
	// filter a count is on its way for ("" and counting false: none).
	total              readmodel.Count
	totalFor, countFor string
	counted, counting  bool
	totalErr           error

	// cells caches the formatted rows of the page; widths their layout.
	cells   [][colCount]string
	measure measure
	widths  [colCount]int

	// keep is the record selected when a refresh of the same page was
	// asked for, to keep it selected; left is that record when it left
	// the page, to say so (0: none).
	keep, left int64
	// lastGood keeps the last first page each filter and sort showed, and
	// lastTotal the last count of each filter, so that a list opened
	// again during an outage shows its last rows, marked stale, rather
	// than nothing.
	lastGood  map[string]readmodel.Page
	lastTotal map[string]readmodel.Count
	// writes tells whether the console offers decisions to this role;
	// bulk whether it has bulk reconciliations to offer with them.
	writes, bulk bool
	// drilled: the list was opened from another screen (the retention
	// review) with its filter, which it says; esc goes back there.
	drilled bool

	filterBar
}

// lastGoodMax bounds how many lists' last pages are kept.
const lastGoodMax = 16

func newList(d deps) *listScreen {
	s := &listScreen{deps: d, sort: readmodel.SortNewest, filterBar: newFilterBar(d.st, "state:stuck tool:create-ticket age>10m"),
		lastGood: map[string]readmodel.Page{}, lastTotal: map[string]readmodel.Count{}}
	s.firstPage()
	s.updateKeys()
	return s
}

func (s *listScreen) id() screenID    { return screenList }
func (s *listScreen) Init() tea.Cmd   { return nil }
func (s *listScreen) capturing() bool { return s.editing }
func (s *listScreen) asOf() time.Time { return s.page.DBTime }

// current tells whether seq is the latest page request, or the count on
// its way: the answers of any other are stale.
func (s *listScreen) current(seq int) bool {
	return seq == s.pageSeq || (s.counting && seq == s.countSeq)
}

// SetSize lays the table out again; a page of another size comes with the
// next refresh.
func (s *listScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	s.input.Width = max(1, w-4)
	s.relayout()
	s.clampSel()
}

// limit is how many rows fit: the title, the header and the filter line
// take three lines.
func (s *listScreen) limit() int { return max(1, s.h-3) }

// open shows the list right above the overview, or above the screen it
// drills down from.
func (s *listScreen) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	l, ok := n.(listNav)
	if !ok {
		return nil, nil, false
	}
	cmd := s.show(l.filter, l.filterText, l.sort)
	s.drilled = l.drill
	if l.edit {
		cmd = tea.Batch(cmd, s.startEdit())
	}
	if l.drill {
		return at.pushed(s), cmd, true
	}
	return at.rooted(s), cmd, true
}

// show shows a new filter and sort from the first page.
func (s *listScreen) show(f readmodel.Filter, text string, sort readmodel.Sort) tea.Cmd {
	if sort == "" {
		sort = readmodel.SortNewest
	}
	s.filter, s.filterText, s.sort = f, text, sort
	s.closeBar()
	return s.restart()
}

// restart goes back to the first page and fetches it; until it arrives
// the list shows the first page it last showed for the filter and sort,
// if any.
func (s *listScreen) restart() tea.Cmd {
	s.firstPage()
	s.sel = 0
	s.keep, s.left = 0, 0
	return s.reload()
}

// reload fetches the page the stack ends with, showing meanwhile the
// first page last shown for the filter and sort, when it is the first.
func (s *listScreen) reload() tea.Cmd {
	s.err = nil
	if c, ok := s.lastTotal[s.filterText]; ok && s.totalFor != s.filterText {
		s.total, s.totalFor, s.counted, s.totalErr = c, s.filterText, true, nil
	}
	if p, ok := s.lastGood[s.lastGoodKey()]; ok && len(s.pages) == 1 {
		s.setPage(p)
	} else {
		s.loaded = false
		s.page = readmodel.Page{}
		s.cells = nil
		s.relayout()
	}
	s.updateKeys()
	return s.fetch()
}

// listMark is the list as the operator left it: its filter, sort, page
// and the record the cursor was on.
type listMark struct {
	filter     readmodel.Filter
	filterText string
	sort       readmodel.Sort
	drilled    bool
	pages      []*readmodel.Cursor
	firsts     []int
	sel        int
	keep       int64
}

func (m listMark) markKey() string {
	return string(m.sort) + " " + m.filterText + " " + strconv.FormatBool(m.drilled)
}

func (s *listScreen) mark() any {
	m := listMark{filter: s.filter, filterText: s.filterText, sort: s.sort, drilled: s.drilled,
		pages: slices.Clone(s.pages), firsts: slices.Clone(s.firsts), sel: s.sel}
	if s.turning != nil {
		m.pages, m.firsts = slices.Clone(s.turning), slices.Clone(s.turningFirsts)
	}
	if r, ok := s.selected(); ok {
		m.keep = r.ID
	}
	return m
}

// restore shows a marked list again: the same page read afresh, the
// cursor on the same record when it is still there (else where it was,
// and the list says the record left).
func (s *listScreen) restore(mark any) tea.Cmd {
	m, ok := mark.(listMark)
	if !ok {
		return nil
	}
	s.filter, s.filterText, s.sort, s.drilled = m.filter, m.filterText, m.sort, m.drilled
	s.closeBar()
	s.pages, s.firsts, s.turning, s.turningFirsts = slices.Clone(m.pages), slices.Clone(m.firsts), nil, nil
	if len(s.pages) == 0 {
		s.firstPage()
	}
	s.sel, s.keep, s.left = m.sel, m.keep, 0
	return s.reload()
}

// lastGoodKey names the list shown: its filter and sort.
func (s *listScreen) lastGoodKey() string { return string(s.sort) + " " + s.filterText }

func (s *listScreen) query() readmodel.Query {
	return readmodel.Query{Filter: s.filter, Sort: s.sort, Limit: s.limit(), After: s.pageAfter()}
}

// fetch asks for the current page; an older request's answer will be
// dropped.
func (s *listScreen) fetch() tea.Cmd {
	s.seq++
	s.pageSeq = s.seq
	s.loading = true
	return s.f.list(s.pageSeq, s.query())
}

// count asks for the count of the filter's records, after a page came:
// unless the first page holds them all (it then says how many), or a
// count of the same filter is on its way (its answer will do). An older
// count of another filter is dropped when it answers.
func (s *listScreen) count() tea.Cmd {
	if s.pageHoldsAll() {
		s.counting = false
		return nil
	}
	if s.counting && s.countFor == s.filterText {
		return nil
	}
	s.seq++
	s.countSeq = s.seq
	s.counting, s.countFor = true, s.filterText
	return s.f.total(s.countSeq, s.filter)
}

// pageHoldsAll tells whether the page shown is the first and the last:
// its rows are every record the filter matches, as of its read.
func (s *listScreen) pageHoldsAll() bool { return s.loaded && len(s.pages) == 1 && s.page.Next == nil }

// receiveTotal takes a count, if it is the latest asked for.
func (s *listScreen) receiveTotal(msg totalMsg) {
	if !s.counting || msg.seq != s.countSeq {
		return // stale: another count is on its way, or none is wanted
	}
	s.counting = false
	if msg.err != nil {
		if s.totalFor != s.countFor {
			s.counted = false // the count shown, if any, was another filter's
		}
		s.totalErr = msg.err
		return
	}
	s.total, s.totalFor, s.counted, s.totalErr = msg.total, s.countFor, true, nil
	if len(s.lastTotal) >= lastGoodMax {
		clear(s.lastTotal)
	}
	s.lastTotal[s.totalFor] = msg.total
}

// refresh reads the page again, keeping the selected record selected.
func (s *listScreen) refresh() tea.Cmd {
	if s.loading {
		return nil
	}
	s.keep = 0
	if r, ok := s.selected(); ok {
		s.keep = r.ID
	}
	return s.fetch()
}

// back: esc goes back (the root's history); x clears the filter.
func (s *listScreen) back() (bool, tea.Cmd) { return false, nil }

// clearFilter shows every record, from the first page.
func (s *listScreen) clearFilter() tea.Cmd { return s.show(readmodel.Filter{}, "", s.sort) }

func (s *listScreen) selected() (readmodel.Row, bool) {
	if s.sel < 0 || s.sel >= s.visibleRows() {
		return readmodel.Row{}, false
	}
	return s.page.Rows[s.sel], true
}

func (s *listScreen) visibleRows() int { return min(len(s.page.Rows), s.limit()) }

func (s *listScreen) clampSel() {
	s.sel = min(max(0, s.sel), max(0, s.visibleRows()-1))
}

// language is the list's filter language, for help.
func (s *listScreen) language() string { return readmodel.FilterHelp }

// allow offers (or withdraws) decisions on the list's rows.
func (s *listScreen) allow(p permits) {
	s.writes = p.decide
	s.updateKeys()
}

func (s *listScreen) updateKeys() {
	s.enableKeys(&s.keys, s.visibleRows() > 0, s.page.Next)
	s.keys.Sort.SetHelp("s", "sort by "+sortName(nextSort(s.sort)).short())
	r, ok := s.selected()
	s.keys.Reconcile.SetEnabled(s.writes && ok && r.Pending())
	// R only where it can act, as r: on a list of stuck records that
	// shows some (without a tool it says to name one); never on the
	// conflicts, completed or empty lists, where it could only refuse.
	stuckOnly := slices.Equal(s.filter.States, []readmodel.State{readmodel.StateStuck}) && !s.filter.Conflicted
	s.keys.BulkReconcile.SetEnabled(s.writes && s.bulk && stuckOnly && s.visibleRows() > 0)
	s.keys.ClearFilter.SetEnabled(s.filterText != "")
}

// ShortHelp implements help.KeyMap.
func (s *listScreen) ShortHelp() []key.Binding {
	if s.editing {
		return []key.Binding{s.keys.Accept, s.keys.Cancel}
	}
	return []key.Binding{combined("↑/↓", "move", s.keys.Up, s.keys.Down), s.keys.Open, s.keys.Reconcile, s.keys.BulkReconcile, s.keys.Filter, s.keys.ClearFilter, s.keys.NextPage, s.keys.PrevPage}
}

// FullHelp implements help.KeyMap.
func (s *listScreen) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{s.keys.Up, s.keys.Down, s.keys.Top, s.keys.Bottom},
		{s.keys.Open, s.keys.Reconcile, s.keys.BulkReconcile, s.keys.NextPage, s.keys.PrevPage, s.keys.Sort, s.keys.Filter, s.keys.ClearFilter},
	}
}

func (s *listScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case pageMsg:
		return s, s.receive(msg)
	case totalMsg:
		s.receiveTotal(msg)
		return s, nil
	case tea.KeyMsg:
		if s.editing {
			return s, s.edit(msg)
		}
		cmd := s.key(msg)
		s.updateKeys() // r applies to the row now selected
		return s, cmd
	}
	if s.editing {
		var cmd tea.Cmd
		s.input, cmd = s.input.Update(msg)
		return s, cmd
	}
	return s, nil
}

// receive takes a page, and asks for the count of its filter's records.
// A refresh keeps the selected record selected, and when it left the page
// the cursor stays where it was and the list says so until the operator
// moves. An error keeps the rows shown, which are then stale.
func (s *listScreen) receive(msg pageMsg) tea.Cmd {
	if msg.seq != s.pageSeq {
		return nil // a stale answer: a newer request is on its way
	}
	s.loading = false
	s.err = msg.err
	s.settle(msg.err == nil)
	keep := s.keep
	s.keep = 0
	if msg.err != nil {
		s.updateKeys()
		return nil
	}
	s.setPage(msg.page)
	if len(s.pages) == 1 {
		if len(s.lastGood) >= lastGoodMax {
			clear(s.lastGood)
		}
		s.lastGood[s.lastGoodKey()] = msg.page
	}
	if keep != 0 {
		if i := slices.IndexFunc(s.page.Rows, func(r readmodel.Row) bool { return r.ID == keep }); i >= 0 && i < s.visibleRows() {
			s.sel = i
		} else {
			s.left = keep
		}
	}
	s.clampSel()
	s.updateKeys()
	return s.count()
}

// setPage shows a page's rows.
func (s *listScreen) setPage(p readmodel.Page) {
	s.page = p
	s.loaded = true
	s.cells = make([][colCount]string, len(p.Rows))
	for i, r := range p.Rows {
		s.cells[i] = rowCells(r)
	}
	s.measure = measureCells(s.cells)
	s.relayout()
	s.clampSel()
}

func (s *listScreen) relayout() {
	if s.cells == nil {
		s.measure = measureCells(nil)
	}
	s.widths = layoutColumns(s.measure, s.w)
}

func (s *listScreen) key(msg tea.KeyMsg) tea.Cmd {
	s.left = 0 // the operator moved on
	handled, turned := s.pageKey(msg, s.keys, &s.sel, s.visibleRows(), s.page.Next)
	if turned {
		return s.turned()
	}
	if handled {
		return nil
	}
	switch {
	case key.Matches(msg, s.keys.Open):
		if r, ok := s.selected(); ok {
			s.goTo(detailNav{id: r.ID})
		}
	case key.Matches(msg, s.keys.Reconcile):
		// The flow reads the record first: its version is the one the
		// decision expects.
		if r, ok := s.selected(); ok {
			s.goTo(flowNav{to: screenReconcile, id: r.ID})
		}
	case key.Matches(msg, s.keys.BulkReconcile):
		// The flow says why when the filter cannot start a run.
		s.goTo(bulkNav{filter: s.filter})
	case key.Matches(msg, s.keys.Sort):
		s.sort = nextSort(s.sort)
		return s.restart()
	case key.Matches(msg, s.keys.Filter):
		return s.openBar(s.filterText)
	case key.Matches(msg, s.keys.ClearFilter):
		return s.clearFilter()
	}
	return nil
}

// turned fetches the page a turn goes to; until it arrives n and p are
// disabled.
func (s *listScreen) turned() tea.Cmd {
	s.sel = 0
	s.updateKeys()
	return s.fetch()
}

// startEdit opens the filter bar on the current filter.
func (s *listScreen) startEdit() tea.Cmd { return s.openBar(s.filterText) }

// edit handles a key in the filter bar. A filter that does not parse is an
// inline error and the list keeps its previous filter.
func (s *listScreen) edit(msg tea.KeyMsg) tea.Cmd {
	text, accepted, cmd := s.editKey(msg, s.keys)
	if !accepted {
		return cmd
	}
	f, err := readmodel.ParseFilter(text)
	if err != nil {
		s.inputErr = err
		return nil
	}
	return s.show(f, f.String(), s.sort)
}

func nextSort(cur readmodel.Sort) readmodel.Sort {
	i := slices.Index(readmodel.Sorts, cur)
	return readmodel.Sorts[(i+1)%len(readmodel.Sorts)]
}

// sortName describes a sort for people.
type sortName readmodel.Sort

func (s sortName) short() string {
	switch readmodel.Sort(s) {
	case readmodel.SortLease:
		return "lease expiry"
	case readmodel.SortExpires:
		return "retention"
	}
	return "newest"
}

func (s *listScreen) View() string {
	w := s.w
	rowsH := s.limit()
	lines := make([]string, 0, s.h)

	left := " " + s.st.Title.Render("Operations")
	if s.filterText != "" {
		left += "  filter: " + termtext.Clean(s.filterText)
	} else {
		left += "  all records"
	}
	left += "  sort: " + sortName(s.sort).short()
	lines = append(lines, spread(left, s.position()+" ", w))

	// Header.
	var hb strings.Builder
	hb.WriteString(strings.Repeat(" ", markWidth))
	s.writeCells(&hb, func(c col, cw int) string { return fitCell(c, columns[c].title, cw) })
	lines = append(lines, s.st.Bold.Render(hb.String()))

	// Rows.
	body := s.bodyLines(rowsH)
	lines = append(lines, body...)
	for len(lines) < rowsH+2 {
		lines = append(lines, "")
	}

	// The filter line, with an inline error above it when the filter is
	// wrong.
	if s.editing {
		if s.inputErr != nil {
			errs := wrap("✗ "+termtext.Clean(s.inputErr.Error())+" (the list keeps "+s.keptFilter()+")", w-2)
			if len(errs) > 3 {
				errs = errs[:3]
			}
			n := len(errs)
			lines = lines[:len(lines)-n]
			for _, e := range errs {
				lines = append(lines, " "+s.st.Error.Render(e))
			}
		}
		lines = append(lines, " "+s.input.View())
	} else {
		lines = append(lines, s.hint(w))
	}
	return strings.Join(lines, "\n")
}

// position says which rows of how many the page shows ("1–21 of 66"),
// and that they are stale when the last read failed.
func (s *listScreen) position() string {
	right := "page " + strconv.Itoa(len(s.pages))
	switch {
	case s.turning != nil && s.loaded:
		// The rows are still those of the page before the turn.
		right = "page " + strconv.Itoa(len(s.turning)) + " · loading page " + strconv.Itoa(len(s.pages)) + "…"
	case !s.loaded && s.loading:
		right += " · loading…"
	case s.loaded:
		if n := s.visibleRows(); n > 0 {
			first := s.firstRow()
			right = strconv.Itoa(first+1) + "–" + strconv.Itoa(first+n) + s.totalText() + " · " + right
		} else {
			right = "none" + s.totalText() + " · " + right
		}
	}
	if s.loaded && s.err != nil {
		right = s.st.Stuck.Render("⚠ stale, as of "+clock(s.page.DBTime)) + " · " + right
	}
	return right
}

// totalText is " of" and how many records the filter matches, as far as
// the list knows: the page's own rows when it holds them all, else the
// last count of the filter; while none has come, that one is on its way.
func (s *listScreen) totalText() string {
	switch {
	case s.pageHoldsAll():
		return " of " + ReviewFigure(readmodel.Count{N: int64(len(s.page.Rows))})
	case s.counted && s.totalFor == s.filterText:
		return " of " + ReviewFigure(s.total)
	case s.counting:
		return " of … (counting)"
	case s.totalErr != nil:
		return " of ? (not counted)"
	}
	return ""
}

func (s *listScreen) keptFilter() string {
	if s.filterText == "" {
		return "no filter"
	}
	return "filter " + termtext.Clean(s.filterText)
}

// hint is the line under the table: that the selected record left the
// list, or the selected record's deferral, or how to filter.
func (s *listScreen) hint(w int) string {
	r, ok := s.selected()
	switch {
	case s.left != 0:
		return s.st.Stuck.Render(truncate(" ▸ "+strconv.FormatInt(s.left, 10)+" left this page (decided, or changed) · the cursor is on another record", w))
	case ok && deferralLine(r) != "":
		return s.st.Muted.Render(truncate(" ▸ "+strconv.FormatInt(r.ID, 10)+" "+deferralLine(r), w))
	case s.drilled:
		return s.st.Muted.Render(truncate(" filter "+termtext.Clean(s.filterText)+" · esc goes back · / edits it", w))
	case s.filterText != "":
		return s.st.Muted.Render(truncate(" filter "+termtext.Clean(s.filterText)+" · x clears it · / edits it", w))
	}
	return s.st.Muted.Render(truncate(" / filter, for example state:stuck tool:create-ticket age>10m", w))
}

// bodyLines renders the table rows, or why there are none.
func (s *listScreen) bodyLines(rowsH int) []string {
	if !s.loaded {
		switch {
		case s.err != nil && !errors.Is(s.err, readmodel.ErrNotFound):
			return []string{"  " + s.st.Error.Render(truncate("✗ could not list operations: "+plainError(s.err), s.w-2))}
		default:
			return []string{s.st.Muted.Render("  loading…")}
		}
	}
	n := s.visibleRows()
	if n == 0 {
		msg := "  no operations recorded yet"
		switch {
		case len(s.pages) > 1:
			msg = "  no more records on this page · p goes back"
		case s.filterText != "":
			msg = "  no operations match " + termtext.Clean(s.filterText) + " · x clears the filter"
		}
		return []string{s.st.Muted.Render(truncate(msg, s.w))}
	}
	out := make([]string, 0, n)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.Reset()
		selected := i == s.sel
		if selected {
			b.WriteString("▸ ")
		} else {
			b.WriteString("  ")
		}
		s.writeCells(&b, func(c col, cw int) string {
			cell := fitCell(c, s.cells[i][c], cw)
			if c == colState && !selected {
				cell = s.st.row(s.page.Rows[i]).Render(cell)
			}
			return cell
		})
		line := b.String()
		if selected {
			line = s.st.Selected.Render(line)
		}
		out = append(out, line)
	}
	if s.err != nil && len(out) < rowsH {
		out = append(out, "  "+s.st.Error.Render(truncate("✗ showing the last good page: "+plainError(s.err), s.w-2)))
	}
	return out
}

// writeCells writes the shown columns (width above zero), two spaces
// apart, as cell renders them: the header and every row line up.
func (s *listScreen) writeCells(b *strings.Builder, cell func(c col, width int) string) {
	first := true
	for c := range colCount {
		cw := s.widths[c]
		if cw == 0 {
			continue
		}
		if !first {
			b.WriteString("  ")
		}
		first = false
		b.WriteString(cell(c, cw))
	}
}
