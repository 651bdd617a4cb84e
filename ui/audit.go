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
	"github.com/charmbracelet/lipgloss"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// screenAudit is the audit trail.
const screenAudit screenID = "audit"

// auditNav opens the audit trail on a filter. history marks an
// operation's history opened from its detail: it stays above the detail,
// and esc goes back to it rather than clearing the filter.
type auditNav struct {
	filter  readmodel.AuditFilter
	history bool
}

func (auditNav) target() screenID { return screenAudit }

func (n auditNav) describe() string { return "audit trail: " + n.filter.String() }

// auditOf opens the audit trail with a filter.
func auditOf(f readmodel.AuditFilter) auditNav { return auditNav{filter: f} }

// auditKind is the audit trail and :audit.
var auditKind = screenKind{
	id:    screenAudit,
	build: func(d deps, _ Config) screen { return newAudit(d) },
	commands: []command{{names: []string{"audit", "trail"}, usage: ":audit [filter]",
		help: "the audit trail, newest first (:audit outcome:denied)", try: "audit", suggest: "audit",
		parse: func(rest string) (tea.Msg, error) {
			f, err := readmodel.ParseAuditFilter(rest)
			if err != nil {
				return nil, err
			}
			return auditOf(f), nil
		}}},
}

// auditScreen browses the audit trail newest first: a filter in the
// audit language, cursor pages, and a pane that tells the selected
// record in words; enter opens the whole record.
type auditScreen struct {
	deps
	navigator
	w, h int

	filter     readmodel.AuditFilter
	filterText string
	// history: the filter is an operation's history, opened from its
	// detail; esc goes back to the detail rather than clearing it.
	history bool
	pageStack[readmodel.AuditCursor]

	seq     int
	loading bool
	loaded  bool
	page    readmodel.AuditPage
	err     error
	sel     int

	filterBar
}

// auditPaneLines is the height of the selected record's pane, fixed so
// that the page size does not change with the selection.
const auditPaneLines = 4

func newAudit(d deps) *auditScreen {
	s := &auditScreen{deps: d, filterBar: newFilterBar(d.st, "outcome:denied action:decide:* age<1h")}
	s.firstPage()
	s.updateKeys()
	return s
}

func (s *auditScreen) id() screenID         { return screenAudit }
func (s *auditScreen) Init() tea.Cmd        { return nil }
func (s *auditScreen) current(seq int) bool { return seq == s.seq }
func (s *auditScreen) capturing() bool      { return s.editing }
func (s *auditScreen) asOf() time.Time      { return s.page.DBTime }

func (s *auditScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	s.input.Width = max(1, w-4)
	s.clampSel()
}

// limit is how many rows fit: the title, the header, a blank line, the
// pane and the filter line take the rest.
func (s *auditScreen) limit() int { return max(1, s.h-4-auditPaneLines) }

// open shows the trail right above the overview, or an operation's
// history above its detail.
func (s *auditScreen) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	a, ok := n.(auditNav)
	if !ok {
		return nil, nil, false
	}
	stack := at.rooted(s)
	if a.history {
		stack = at.pushed(s)
	}
	return stack, s.show(a.filter, a.history), true
}

// show shows a filter from the first page.
func (s *auditScreen) show(f readmodel.AuditFilter, history bool) tea.Cmd {
	s.filter, s.filterText, s.history = f, f.String(), history
	s.closeBar()
	s.firstPage()
	s.sel = 0
	s.loaded = false
	s.page = readmodel.AuditPage{}
	s.err = nil
	s.updateKeys()
	return s.fetch()
}

func (s *auditScreen) fetch() tea.Cmd {
	s.seq++
	s.loading = true
	return s.f.auditList(s.seq, readmodel.AuditQuery{Filter: s.filter, Limit: s.limit(), After: s.pageAfter()})
}

func (s *auditScreen) refresh() tea.Cmd {
	if s.loading {
		return nil
	}
	return s.fetch()
}

// clears tells whether x clears the filter here: not an operation's
// history, which is the detail's.
func (s *auditScreen) clears() bool { return s.filterText != "" && !s.history }

// back: esc goes back (the root's history); x clears the filter.
func (s *auditScreen) back() (bool, tea.Cmd) { return false, nil }

// auditMark is the trail as the operator left it: its filter, page and
// cursor.
type auditMark struct {
	filter     readmodel.AuditFilter
	filterText string
	history    bool
	pages      []*readmodel.AuditCursor
	firsts     []int
	sel        int
}

func (m auditMark) markKey() string { return m.filterText + " " + strconv.FormatBool(m.history) }

func (s *auditScreen) mark() any {
	m := auditMark{filter: s.filter, filterText: s.filterText, history: s.history,
		pages: slices.Clone(s.pages), firsts: slices.Clone(s.firsts), sel: s.sel}
	if s.turning != nil {
		m.pages, m.firsts = slices.Clone(s.turning), slices.Clone(s.turningFirsts)
	}
	return m
}

// restore shows a marked trail again: the same page read afresh, the
// cursor where it was.
func (s *auditScreen) restore(mark any) tea.Cmd {
	m, ok := mark.(auditMark)
	if !ok {
		return nil
	}
	s.show(m.filter, m.history) // its fetch is for the first page: the one below replaces it
	s.pages, s.firsts = slices.Clone(m.pages), slices.Clone(m.firsts)
	if len(s.pages) == 0 {
		s.firstPage()
	}
	s.sel = m.sel
	return s.fetch()
}

// language is the trail's filter language, for help.
func (s *auditScreen) language() string { return readmodel.AuditFilterHelp }

func (s *auditScreen) visibleRows() int { return min(len(s.page.Rows), s.limit()) }

func (s *auditScreen) selected() (readmodel.AuditRow, bool) {
	if s.sel < 0 || s.sel >= s.visibleRows() {
		return readmodel.AuditRow{}, false
	}
	return s.page.Rows[s.sel], true
}

func (s *auditScreen) clampSel() {
	s.sel = min(max(0, s.sel), max(0, s.visibleRows()-1))
}

func (s *auditScreen) updateKeys() {
	s.enableKeys(&s.keys, s.visibleRows() > 0, s.page.Next)
	s.keys.Open.SetHelp("enter", "open record")
	s.keys.ClearFilter.SetEnabled(s.clears())
}

// ShortHelp implements help.KeyMap.
func (s *auditScreen) ShortHelp() []key.Binding {
	if s.editing {
		return []key.Binding{s.keys.Accept, s.keys.Cancel}
	}
	return []key.Binding{combined("↑/↓", "move", s.keys.Up, s.keys.Down), s.keys.Open, s.keys.Filter, s.keys.ClearFilter, s.keys.NextPage, s.keys.PrevPage}
}

// FullHelp implements help.KeyMap.
func (s *auditScreen) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{s.keys.Up, s.keys.Down, s.keys.Top, s.keys.Bottom},
		{s.keys.Open, s.keys.NextPage, s.keys.PrevPage, s.keys.Filter, s.keys.ClearFilter},
	}
}

func (s *auditScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case auditPageMsg:
		s.receive(msg)
	case tea.KeyMsg:
		if s.editing {
			return s, s.edit(msg)
		}
		return s, s.key(msg)
	}
	return s, nil
}

// receive takes a page, keeping the selected record selected when it is
// still there.
func (s *auditScreen) receive(msg auditPageMsg) {
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
	s.page = msg.page
	s.loaded = true
	if had {
		if i := slices.IndexFunc(s.page.Rows, func(r readmodel.AuditRow) bool {
			return r.Tenant == keep.Tenant && r.Seq == keep.Seq
		}); i >= 0 {
			s.sel = i
		}
	}
	s.clampSel()
	s.updateKeys()
}

func (s *auditScreen) key(msg tea.KeyMsg) tea.Cmd {
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
			s.goTo(auditRecordNav{ref: auditRef{Tenant: r.Tenant, Seq: r.Seq}})
		}
	case key.Matches(msg, s.keys.Filter):
		return s.openBar(s.filterText)
	case key.Matches(msg, s.keys.ClearFilter):
		return s.show(readmodel.AuditFilter{}, false)
	}
	return nil
}

// turned fetches the page a turn goes to.
func (s *auditScreen) turned() tea.Cmd {
	s.sel = 0
	s.updateKeys()
	return s.fetch()
}

// edit handles a key in the filter bar: a filter that does not parse is
// an inline error and the trail keeps its previous filter.
func (s *auditScreen) edit(msg tea.KeyMsg) tea.Cmd {
	text, accepted, cmd := s.editKey(msg, s.keys)
	if !accepted {
		return cmd
	}
	f, err := readmodel.ParseAuditFilter(text)
	if err != nil {
		s.inputErr = err
		return nil
	}
	return s.show(f, false)
}

// auditRef names one audit record: its chain and its number.
type auditRef struct {
	Tenant string
	Seq    int64
}

// chainName is a chain as people read it: the tenant, or "global" for the
// chain of events outside any tenant.
func chainName(tenant string) string {
	if tenant == "" {
		return "global"
	}
	return termtext.Clean(tenant)
}

func (r auditRef) String() string { return chainName(r.Tenant) + "#" + strconv.FormatInt(r.Seq, 10) }

// glyphBroken marks an audit record whose hash does not match its
// contents, wherever it shows; brokenText says it in words.
const (
	glyphBroken = "✗"
	brokenText  = "changed after it was written: its hash does not match its contents"
)

// OutcomeText is an audit outcome's glyph and word, so it is never colour
// alone: the console and opsdesk audit list write it alike.
func OutcomeText(o string) string {
	switch o {
	case "succeeded":
		return "✓ succeeded"
	case "denied":
		return "✗ denied"
	case "failed":
		return "! failed"
	}
	return "? " + termtext.Clean(o)
}

func (st Styles) outcome(o string) lipgloss.Style {
	switch o {
	case "succeeded":
		return st.Completed
	case "denied":
		return st.Rejected
	case "failed":
		return st.Stuck
	}
	return st.Bold
}

// operationText is what the record is about: the key and the operation's
// number, or the tool alone (a purge), or "-".
func operationText(r readmodel.AuditRow) string {
	var parts []string
	if r.Key != "" {
		parts = append(parts, termtext.Clean(r.Key))
	}
	if r.OperationID != 0 {
		parts = append(parts, "#"+strconv.FormatInt(r.OperationID, 10))
	}
	return orDash(strings.Join(parts, " "))
}

// fitOperation cuts the key as f says (what tells the page's keys apart
// stays: "…0532:charge", not "order-00…:charge") and keeps the
// operation's number whole.
func fitOperation(r readmodel.AuditRow, w int, f keyFit) string {
	if r.OperationID == 0 || r.Key == "" {
		return truncateMiddle(operationText(r), w)
	}
	id := "#" + strconv.FormatInt(r.OperationID, 10)
	if w < len(id)+6 {
		return truncate(id, w)
	}
	return f.fit(termtext.Clean(r.Key), w-len(id)-1) + " " + id
}

// auditTime is a record's time for the table: the clock on the database's
// day, else the date and minute.
func auditTime(t, now time.Time) string {
	if t.UTC().Format(time.DateOnly) == now.UTC().Format(time.DateOnly) {
		return t.UTC().Format("15:04:05")
	}
	return t.UTC().Format("Jan 02 15:04")
}

// auditColumn is one column of the trail's table.
type auditColumn struct {
	title string
	// drop orders the columns given up on narrow terminals: 1 goes
	// first, 0 never goes.
	drop int
	// flex columns take the room left, down to min, and are cut; other
	// columns are given up before a flex column gets less than comfort.
	flex, min, comfort, max int
	cell                    func(r readmodel.AuditRow) string
	// short is the cell when room is short (the role without the claimed
	// name); nil when there is none.
	short func(r readmodel.AuditRow) string
}

const (
	auditColTime = iota
	auditColChain
	auditColRole
	auditColAction
	auditColOutcome
	auditColTool
	auditColOp
	auditColReason
)

// auditColumns is the trail's table, in display order. Room short, the
// columns go as the operations list's do, by what an operator needs
// least: first a column that says the same on every row (one role, one
// tool: the pane says it), then the role (the pane names the selected
// record's), the tool, for the key and the reason to read comfortably;
// the reason and then the key only when even their minimums do not fit.
// The time, the chain, the action and the outcome never go.
var auditColumns = []auditColumn{
	auditColTime: {title: "TIME", cell: func(r readmodel.AuditRow) string { return auditTime(r.At, r.DBTime) }},
	auditColChain: {title: "CHAIN#SEQ", max: 24, cell: func(r readmodel.AuditRow) string {
		if r.HashBroken {
			return auditRef{r.Tenant, r.Seq}.String() + " " + glyphBroken
		}
		return auditRef{r.Tenant, r.Seq}.String()
	}},
	auditColRole: {title: "ROLE", drop: 1, max: 32, cell: func(r readmodel.AuditRow) string { return whoText(r, 32, true) },
		short: func(r readmodel.AuditRow) string { return whoText(r, 32, false) }},
	auditColAction:  {title: "ACTION", max: 22, cell: func(r readmodel.AuditRow) string { return termtext.Clean(r.Action) }},
	auditColOutcome: {title: "OUTCOME", cell: func(r readmodel.AuditRow) string { return OutcomeText(r.Outcome) }},
	auditColTool:    {title: "TOOL", drop: 2, max: 18, cell: func(r readmodel.AuditRow) string { return orDash(termtext.Clean(r.Tool)) }},
	auditColOp: {title: "KEY #OP", drop: 4, flex: 1, min: 10, comfort: 24, max: 40,
		cell: operationText},
	auditColReason: {title: "REASON", drop: 3, flex: 2, min: 12, comfort: 16, cell: func(r readmodel.AuditRow) string { return orDash(termtext.Clean(r.Reason)) }},
}

// auditDropForComfort is the last drop rank given up for the key and
// the reason to read comfortably (the role and the tool); the reason and
// the key go only when their minimums do not fit.
const auditDropForComfort = 2

// auditLayout is the table's shape for a page at a width: which columns
// show, how wide, and whether the role column is short.
type auditLayout struct {
	widths []int // 0: not shown
	short  bool
	// keys cuts the page's keys so that what tells them apart stays.
	keys keyFit
}

func layoutAudit(rows []readmodel.AuditRow, w int) auditLayout {
	n := len(auditColumns)
	natural := func(short bool) []int {
		ws := make([]int, n)
		for c, col := range auditColumns {
			ws[c] = width(col.title)
			for _, r := range rows {
				cell := col.cell
				if short && col.short != nil {
					cell = col.short
				}
				ws[c] = max(ws[c], width(cell(r)))
			}
			if col.max > 0 {
				ws[c] = min(ws[c], col.max)
			}
		}
		return ws
	}
	// need is the width of the shown columns, the flex ones at their
	// comfortable width or their minimum.
	need := func(ws []int, shown []bool, comfort bool) int {
		total := markWidth
		for c, col := range auditColumns {
			if !shown[c] {
				continue
			}
			cw := ws[c]
			if col.flex > 0 {
				least := max(col.min, width(col.title))
				if comfort {
					least = max(least, col.comfort)
				}
				cw = min(cw, least)
			}
			total += cw + colGap
		}
		return total - colGap
	}
	// uniform columns say the same on every row of the page.
	uniform := make([]bool, n)
	for c, col := range auditColumns {
		uniform[c] = col.drop > 0 && len(rows) > 1
		for _, r := range rows[min(1, len(rows)):] {
			if col.cell(r) != col.cell(rows[0]) {
				uniform[c] = false
				break
			}
		}
	}
	// drop gives up the uniform columns, one at a time by rank until the
	// table fits with the key and the reason comfortable (a bulk run's
	// page, one role, one tool and one reason, keeps the tool and the
	// reason where there is room for them), then columns by rank: up to
	// auditDropForComfort for that comfort, the rest until it fits at all.
	drop := func(ws []int) []bool {
		shown := allShown(n)
		if need(ws, shown, true) <= w {
			return shown
		}
		for rank := 1; rank <= n && need(ws, shown, true) > w; rank++ {
			for c, col := range auditColumns {
				if uniform[c] && col.drop == rank {
					shown[c] = false
				}
			}
		}
		for rank := 1; rank <= n; rank++ {
			if need(ws, shown, rank <= auditDropForComfort) <= w {
				break
			}
			for c, col := range auditColumns {
				if col.drop == rank {
					shown[c] = false
				}
			}
		}
		return shown
	}
	ws := natural(false)
	short := false
	// The claimed names give way first, then the columns.
	if need(ws, allShown(n), true) > w {
		short = true
		ws = natural(true)
	}
	shown := drop(ws)
	// Fixed columns at their width, flex columns at their minimum; the
	// rest goes to the flex columns.
	out := make([]int, n)
	left := w
	for c, col := range auditColumns {
		if !shown[c] {
			continue
		}
		out[c] = ws[c]
		if col.flex > 0 {
			out[c] = min(ws[c], max(col.min, width(col.title)))
		}
	}
	left -= need(out, shown, false)
	// The key grows to a readable width first, then the reason to its
	// whole text, then the key to its own.
	grow := func(c, upTo int) {
		if shown[c] && left > 0 {
			g := max(0, min(left, upTo-out[c]))
			out[c] += g
			left -= g
		}
	}
	grow(auditColOp, min(ws[auditColOp], auditColumns[auditColOp].comfort))
	grow(auditColReason, ws[auditColReason])
	grow(auditColOp, ws[auditColOp])
	if left < 0 {
		// Even the minimums do not fit: the chain gives way last.
		out[auditColChain] = max(6, out[auditColChain]+left)
	}
	var keys []string
	for _, r := range rows {
		if r.Key != "" {
			keys = append(keys, termtext.Clean(r.Key))
		}
	}
	return auditLayout{widths: out, short: short, keys: newKeyFit(keys)}
}

func (s *auditScreen) View() string {
	w := max(1, s.w)
	rowsH := s.limit()
	lines := make([]string, 0, s.h)
	lines = append(lines, spread(s.title(), s.position()+" ", w))

	lay := layoutAudit(s.page.Rows[:s.visibleRows()], w)
	titles := make([]string, len(auditColumns))
	for c, col := range auditColumns {
		titles[c] = col.title
	}
	lines = append(lines, s.st.Header.Render(strings.TrimRight(s.line("  ", lay, func(c int) string { return pad(titles[c], lay.widths[c]) }), " ")))

	body := s.bodyLines(lay, rowsH)
	lines = append(lines, body...)
	for len(lines) < rowsH+2 {
		lines = append(lines, "")
	}
	bottom := append([]string{""}, s.pane(w)...)
	if s.editing {
		bottom = s.filterHelp(w)
	}
	// The filter's help may need more than the pane's room: it covers the
	// last rows, which do not move while the operator types.
	room := s.h - 1
	if len(lines)+len(bottom) > room {
		lines = lines[:max(2, room-len(bottom))]
		if len(lines)+len(bottom) > room {
			bottom = bottom[:max(0, room-len(lines))]
		}
	}
	lines = append(lines, bottom...)
	for len(lines) < room {
		lines = append(lines, "")
	}
	if s.editing {
		lines = append(lines, " "+s.input.View())
	} else {
		hint := " / filter, for example outcome:denied action:decide:* age<1h"
		switch {
		case s.history:
			hint = " this record's history · / changes the filter · esc goes back"
		case s.filterText != "":
			hint = " filter " + termtext.Clean(s.filterText) + " · x clears it · / edits it"
		}
		lines = append(lines, s.st.Muted.Render(truncate(hint, w)))
	}
	return strings.Join(lines, "\n")
}

// title names what is shown: the whole trail, a filter, or an
// operation's history.
func (s *auditScreen) title() string {
	f := s.filter
	if s.history && len(f.OperationIDs) == 1 && len(f.Tenants) == 1 {
		return " " + s.st.Title.Render("Audit history") + "  operation " + strconv.FormatInt(f.OperationIDs[0], 10) +
			" · tenant " + chainName(f.Tenants[0])
	}
	t := " " + s.st.Title.Render("Audit trail")
	if s.filterText != "" {
		return t + "  filter: " + termtext.Clean(s.filterText)
	}
	return t + "  every chain you may see, newest first"
}

func (s *auditScreen) position() string {
	right := "page " + strconv.Itoa(len(s.pages))
	broken := 0
	for _, r := range s.page.Rows[:s.visibleRows()] {
		if r.HashBroken {
			broken++
		}
	}
	if broken > 0 && s.loaded {
		right = s.st.Error.Render(fmt.Sprintf("%s %d changed after written", glyphBroken, broken)) + " · " + right
	}
	switch {
	case s.turning != nil && s.loaded:
		return "page " + strconv.Itoa(len(s.turning)) + " · loading page " + strconv.Itoa(len(s.pages)) + "…"
	case !s.loaded && s.loading:
		return right + " · loading…"
	case s.loaded:
		right += " · " + strconv.Itoa(s.visibleRows()) + " record" + plural(s.visibleRows())
		if s.page.Next != nil {
			return right + " · more"
		}
		return right + " · end"
	}
	return right
}

// line writes the shown columns, two spaces apart, after mark.
func (s *auditScreen) line(mark string, lay auditLayout, cell func(c int) string) string {
	var b strings.Builder
	b.WriteString(mark)
	first := true
	for c := range auditColumns {
		cw := lay.widths[c]
		if cw == 0 {
			continue
		}
		if !first {
			b.WriteString(strings.Repeat(" ", colGap))
		}
		first = false
		b.WriteString(cell(c))
	}
	return b.String()
}

func (s *auditScreen) bodyLines(lay auditLayout, rowsH int) []string {
	if !s.loaded {
		if s.err != nil {
			return []string{"  " + s.st.Error.Render(truncate("✗ could not read the audit trail: "+plainError(s.err), s.w-2))}
		}
		return []string{s.st.Muted.Render("  loading…")}
	}
	n := s.visibleRows()
	if n == 0 {
		msg := "  no audit records yet, or none your role may see"
		switch {
		case len(s.pages) > 1:
			msg = "  no more records on this page · p goes back"
		case s.history:
			msg = "  nobody has acted on this operation: no audit records"
		case s.filterText != "":
			msg = "  no audit records match " + termtext.Clean(s.filterText) + " · x clears the filter"
		}
		return []string{s.st.Muted.Render(truncate(msg, s.w))}
	}
	out := make([]string, 0, n+1)
	for i := range n {
		r := s.page.Rows[i]
		sel := i == s.sel
		mark := "  "
		if sel {
			mark = "▸ "
		}
		l := s.line(mark, lay, func(c int) string {
			col := auditColumns[c]
			v := col.cell(r)
			if lay.short && col.short != nil {
				v = col.short(r)
			}
			cw := lay.widths[c]
			if c == auditColOp {
				v = pad(fitOperation(r, cw, lay.keys), cw)
			} else {
				v = pad(v, cw)
			}
			if c == auditColOutcome && !sel {
				v = s.st.outcome(r.Outcome).Render(v)
			}
			return v
		})
		switch {
		case sel:
			l = s.st.Selected.Render(pad(l, s.w))
		case r.HashBroken:
			l = s.st.Error.Render(strings.TrimRight(l, " "))
		default:
			l = strings.TrimRight(l, " ")
		}
		out = append(out, l)
	}
	if s.err != nil && len(out) < rowsH {
		out = append(out, "  "+s.st.Error.Render(truncate("✗ showing the last good page: "+plainError(s.err), s.w-2)))
	}
	return out
}

// pane tells the selected record in words, in auditPaneLines lines.
func (s *auditScreen) pane(w int) []string {
	r, ok := s.selected()
	if !ok {
		return nil
	}
	head := auditRef{r.Tenant, r.Seq}.String() + " · " + termtext.Clean(r.Action) + " " + OutcomeText(r.Outcome) +
		" · " + stamp(r.At, r.DBTime) + " (" + since(r.At, r.DBTime) + ")"
	who := "by role " + termtext.Clean(r.Role)
	if r.Machine {
		who = "by opsdesk reconciler, role " + termtext.Clean(r.Role) + " (auto_reconcile)"
	}
	if r.DisplayName != "" {
		who += " (claims to be " + strconv.Quote(termtext.Clean(r.DisplayName)) + ")"
	}
	if about := aboutText(r); about != "" {
		who += " · " + about
	}
	var facts []string
	for _, c := range r.Changes() {
		facts = append(facts, c.Field+" "+termtext.Clean(c.Before)+" → "+termtext.Clean(c.After))
	}
	if len(facts) == 0 {
		facts = append(facts, "no change to the operation")
	}
	if r.HasEvidence {
		facts = append(facts, "evidence recorded")
	}
	facts = append(facts, flagTexts(r)...)
	reason := "reason: " + orDash(termtext.Clean(r.Reason))
	title := s.st.Title.Render(truncate(head, w-1))
	if r.HashBroken {
		title = s.st.Error.Render(truncate(glyphBroken+" "+brokenText+" · "+head, w-1))
	}
	lines := []string{
		" " + title,
		"   " + truncate(who, w-3),
		"   " + truncate(strings.Join(facts, " · "), w-3),
		"   " + s.st.Muted.Render(truncate(reason+" · enter: the whole record and its chain check", w-3)),
	}
	return lines
}

// aboutText names the operation (or the tool) a record is about.
func aboutText(r readmodel.AuditRow) string {
	var parts []string
	if r.OperationID != 0 {
		parts = append(parts, "operation #"+strconv.FormatInt(r.OperationID, 10))
	}
	var ident []string
	for _, p := range []string{r.Tool, r.Key} {
		if p != "" {
			ident = append(ident, termtext.Clean(p))
		}
	}
	if len(ident) > 0 {
		parts = append(parts, strings.Join(append([]string{chainName(r.Tenant)}, ident...), "/"))
	}
	return strings.Join(parts, " ")
}

// flagTexts are the record's flags in words.
func flagTexts(r readmodel.AuditRow) []string {
	var out []string
	if r.Forced {
		out = append(out, "⚑ forced over a live lease")
	}
	if r.Override {
		out = append(out, "⚑ overriding the lookup")
	}
	return out
}

// filterHelp is the filter's language under the bar, after the error when
// the filter does not parse.
func (s *auditScreen) filterHelp(w int) []string {
	var out []string
	if s.inputErr != nil {
		kept := "no filter"
		if s.filterText != "" {
			kept = "filter " + termtext.Clean(s.filterText)
		}
		for _, l := range wrap("✗ "+termtext.Clean(s.inputErr.Error())+" (the trail keeps "+kept+")", w-2) {
			out = append(out, " "+s.st.Error.Render(l))
		}
	}
	out = append(out, "")
	for _, para := range strings.Split(readmodel.AuditFilterHelp, "\n") {
		ls := []string{para}
		if width(para) > w-2 {
			ls = wrap(para, w-2)
		}
		for _, l := range ls {
			out = append(out, " "+s.st.Muted.Render(l))
		}
	}
	return out
}

// errNoRecord tells whether err means the record is not there (or not
// visible): the database answered.
func errNoRecord(err error) bool {
	return errors.Is(err, readmodel.ErrNoAuditRecord) || errors.Is(err, readmodel.ErrNotFound)
}
