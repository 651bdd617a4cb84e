package ui

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// screenReview is the retention review.
const screenReview screenID = "review"

// reviewNav opens the retention review.
type reviewNav struct{}

func (reviewNav) target() screenID { return screenReview }

func (reviewNav) describe() string { return "retention review" }

// reviewKind is the retention review and :retention.
var reviewKind = screenKind{
	id:    screenReview,
	build: func(d deps, o Config) screen { return newReview(d, o.Catalog) },
	commands: []command{{names: []string{"retention", "review"}, usage: ":retention", help: "the retention review of every tool",
		try: "retention", suggest: "retention", parse: noArgs("retention", reviewNav{})}},
}

// reviewScreen is the retention review: each tool's policy, what expires
// soon, what waits for a purge, and the warnings; enter lists the selected
// tool's records by expiry, p purges its expired ones (admins).
type reviewScreen struct {
	deps
	navigator
	catalog  map[string]readmodel.ToolPolicy
	w, h     int
	seq      int
	loading  bool
	r        *readmodel.Review
	err      error
	sel      int
	top      int
	canPurge bool
}

func newReview(d deps, catalog map[string]readmodel.ToolPolicy) *reviewScreen {
	s := &reviewScreen{deps: d, catalog: catalog}
	s.updateKeys()
	return s
}

func (s *reviewScreen) id() screenID          { return screenReview }
func (s *reviewScreen) Init() tea.Cmd         { return nil }
func (s *reviewScreen) SetSize(w, h int)      { s.w, s.h = w, h }
func (s *reviewScreen) current(seq int) bool  { return seq == s.seq }
func (s *reviewScreen) capturing() bool       { return false }
func (s *reviewScreen) back() (bool, tea.Cmd) { return false, nil }

// open shows the review right above the overview.
func (s *reviewScreen) open(_ navMsg, at opening) ([]screen, tea.Cmd, bool) {
	return at.rooted(s), s.fetch(), true
}

func (s *reviewScreen) asOf() time.Time {
	if s.r == nil {
		return time.Time{}
	}
	return s.r.DBTime
}

func (s *reviewScreen) fetch() tea.Cmd {
	s.seq++
	s.loading = true
	return s.f.review(s.seq, s.catalog)
}

func (s *reviewScreen) refresh() tea.Cmd {
	if s.loading {
		return nil
	}
	return s.fetch()
}

// allow offers the purge key (or not): the role may purge.
func (s *reviewScreen) allow(p permits) {
	s.canPurge = p.purge
	s.updateKeys()
}

// selected is the selected tool, if any.
func (s *reviewScreen) selected() (readmodel.ToolReview, bool) {
	if s.r == nil || s.sel >= len(s.r.Tools) {
		return readmodel.ToolReview{}, false
	}
	return s.r.Tools[s.sel], true
}

func (s *reviewScreen) updateKeys() {
	t, ok := s.selected()
	s.keys.Up.SetEnabled(ok)
	s.keys.Down.SetEnabled(ok)
	s.keys.Top.SetEnabled(ok)
	s.keys.Bottom.SetEnabled(ok)
	s.keys.Open.SetEnabled(ok && t.InStore)
	s.keys.Open.SetHelp("enter", "list by expiry")
	s.keys.Purge.SetEnabled(ok && s.canPurge && t.Purgeable.N > 0)
}

// ShortHelp implements help.KeyMap.
func (s *reviewScreen) ShortHelp() []key.Binding {
	return []key.Binding{combined("↑/↓", "select", s.keys.Up, s.keys.Down), s.keys.Open, s.keys.Purge}
}

// FullHelp implements help.KeyMap.
func (s *reviewScreen) FullHelp() [][]key.Binding {
	return [][]key.Binding{{s.keys.Up, s.keys.Down, s.keys.Top, s.keys.Bottom}, {s.keys.Open, s.keys.Purge}}
}

func (s *reviewScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case reviewMsg:
		s.loading = false
		s.err = msg.err
		if msg.err == nil {
			r := msg.r
			// The selection stays on its tool as the list refreshes.
			if cur, ok := s.selected(); ok {
				for i, t := range r.Tools {
					if t.Tool == cur.Tool {
						s.sel = i
					}
				}
			}
			s.r = &r
			s.sel = min(s.sel, max(0, len(r.Tools)-1))
		}
		s.updateKeys()
	case tea.KeyMsg:
		if s.r == nil || len(s.r.Tools) == 0 {
			return s, nil
		}
		n := len(s.r.Tools)
		switch {
		case key.Matches(msg, s.keys.Up):
			s.sel = max(0, s.sel-1)
		case key.Matches(msg, s.keys.Down):
			s.sel = min(n-1, s.sel+1)
		case key.Matches(msg, s.keys.Top):
			s.sel = 0
		case key.Matches(msg, s.keys.Bottom):
			s.sel = n - 1
		case key.Matches(msg, s.keys.Open):
			t, _ := s.selected()
			l := listOf(readmodel.Filter{Tools: []string{t.Tool}}, readmodel.SortExpires)
			l.drill = true
			s.goTo(l)
		case key.Matches(msg, s.keys.Purge):
			t, _ := s.selected()
			s.goTo(purgeNav{tool: t})
		}
		s.updateKeys()
	}
	return s, nil
}

// reviewColumn is one column of the review's table.
type reviewColumn struct {
	title string
	right bool
	// drop orders the columns given up on narrow terminals: 1 goes
	// first, 0 never goes.
	drop int
	cell func(t readmodel.ToolReview) string
}

var reviewColumns = []reviewColumn{
	{title: "TOOL", cell: func(t readmodel.ToolReview) string {
		if !t.InCatalog {
			return termtext.Clean(t.Tool) + " ?"
		}
		return termtext.Clean(t.Tool)
	}},
	{title: "RETENTION", drop: 3, cell: func(t readmodel.ToolReview) string {
		if !t.InCatalog {
			return ShortDuration(t.Retention) + "?"
		}
		return ShortDuration(t.Retention)
	}},
	{title: "WINDOW", drop: 2, cell: func(t readmodel.ToolReview) string {
		if !t.InCatalog {
			return "?"
		}
		return ShortDuration(t.RetryWindow)
	}},
	{title: "AFTER", drop: 1, cell: func(t readmodel.ToolReview) string {
		if !t.InCatalog {
			return "?"
		}
		return t.AfterExpiry
	}},
	{title: "24H", right: true, cell: func(t readmodel.ToolReview) string { return ReviewFigure(t.Expiring24h) }},
	{title: "7D", right: true, drop: 4, cell: func(t readmodel.ToolReview) string { return ReviewFigure(t.Expiring7d) }},
	{title: "EXPIRED", right: true, cell: func(t readmodel.ToolReview) string { return ReviewFigure(t.Expired) }},
	{title: "PURGEABLE", right: true, cell: func(t readmodel.ToolReview) string { return ReviewFigure(t.Purgeable) }},
	{title: "WARN", right: true, cell: func(t readmodel.ToolReview) string {
		if len(t.Warnings) == 0 {
			return ""
		}
		return fmt.Sprintf("⚠ %d", len(t.Warnings))
	}},
}

func (s *reviewScreen) View() string {
	if s.r == nil {
		if s.err != nil && !errors.Is(s.err, readmodel.ErrNotFound) {
			return " " + s.st.Error.Render("✗ could not read the retention review: "+plainError(s.err))
		}
		return " loading the retention review…"
	}
	r := s.r
	w := max(1, s.w)
	title := fmt.Sprintf(" Retention review · %d tools", len(r.Tools))
	switch n := r.Warnings(); {
	case n == 1:
		title += " · ⚠ 1 warning"
	case n > 1:
		title += fmt.Sprintf(" · ⚠ %d warnings", n)
	}
	if r.Scoped {
		title += " · your tenants only"
	}
	lines := []string{s.st.Title.Render(truncate(title, w)), ""}
	if purges := s.purgeWarnings(w); len(purges) > 0 {
		lines = append(lines, purges...)
		lines = append(lines, "")
	}
	if len(r.Tools) == 0 {
		lines = append(lines, " no tools: the store is empty and the catalog names none")
		return strings.Join(lines, "\n")
	}

	pane := s.pane(w)
	foot := s.footnote(w)
	rows := max(1, s.h-len(lines)-1-len(pane)-1-len(foot)-1)
	s.top = min(max(s.top, s.sel-rows+1), s.sel)
	if shown := min(rows, len(r.Tools)-s.top); shown < len(r.Tools) {
		// Not every tool fits: say which are shown, as the lists do, so
		// that a short terminal does not hide the others without a word.
		mark := fmt.Sprintf(" · showing %d–%d, ↑/↓ for the others", s.top+1, s.top+shown)
		if width(title+mark) > w {
			// Narrow (60 columns): the short mark, whole, rather than
			// the long one cut before its arrows.
			mark = fmt.Sprintf(" · %d–%d of %d ↑/↓", s.top+1, s.top+shown, len(r.Tools))
		}
		title += mark
		lines[0] = s.st.Title.Render(truncate(title, w))
	}
	lines = append(lines, s.table(w, rows)...)
	lines = append(lines, "")
	lines = append(lines, pane...)
	lines = append(lines, "")
	lines = append(lines, foot...)
	if s.err != nil {
		lines = append(lines, " "+s.st.Error.Render(truncate("✗ showing the last good figures: "+plainError(s.err), w-1)))
	}
	return strings.Join(lines, "\n")
}

// table lays out the header and up to rows tools from s.top, giving up
// columns by their drop rank until the table fits.
func (s *reviewScreen) table(w, rows int) []string {
	tools := s.r.Tools
	cells := make([][]string, len(tools))
	widths := make([]int, len(reviewColumns))
	for c, col := range reviewColumns {
		widths[c] = width(col.title)
	}
	for i, t := range tools {
		cells[i] = make([]string, len(reviewColumns))
		for c, col := range reviewColumns {
			cells[i][c] = col.cell(t)
			widths[c] = max(widths[c], width(cells[i][c]))
		}
	}
	ranks := make([]int, len(reviewColumns))
	for c, col := range reviewColumns {
		ranks[c] = col.drop
	}
	total := func(shown []bool) int {
		n := markWidth
		for c := range reviewColumns {
			if shown[c] {
				n += widths[c] + colGap
			}
		}
		return n
	}
	shown, _ := dropByRank(ranks, func(shown []bool) bool { return total(shown) <= w })
	// The tool's name gives way last.
	if over := total(shown) - w; over > 0 {
		widths[0] = max(6, widths[0]-over)
	}
	line := func(mark string, row []string, header bool) string {
		var b strings.Builder
		b.WriteString(mark)
		for c, col := range reviewColumns {
			if !shown[c] {
				continue
			}
			v := truncate(row[c], widths[c])
			if col.right {
				v = padLeft(v, widths[c])
			} else {
				v = pad(v, widths[c])
			}
			b.WriteString(v)
			b.WriteString(strings.Repeat(" ", colGap))
		}
		out := strings.TrimRight(b.String(), " ")
		if header {
			return s.st.Header.Render(out)
		}
		return out
	}
	titles := make([]string, len(reviewColumns))
	for c, col := range reviewColumns {
		titles[c] = col.title
	}
	out := []string{line("  ", titles, true)}
	for i := s.top; i < len(tools) && i < s.top+rows; i++ {
		if i == s.sel {
			out = append(out, s.st.Selected.Render(pad(line("▸ ", cells[i], false), w)))
			continue
		}
		out = append(out, line("  ", cells[i], false))
	}
	return out
}

// pane is the selected tool in words: its policy, its figures, its oldest
// pending record and its warnings.
func (s *reviewScreen) pane(w int) []string {
	t, ok := s.selected()
	if !ok {
		return nil
	}
	policy := "policy: retention " + ShortDuration(t.Retention) + ", retry window " + ShortDuration(t.RetryWindow) +
		", after expiry " + t.AfterExpiry + afterExpiryNote(t.AfterExpiry)
	if !t.InCatalog {
		policy = "policy: not in the catalog; the library's default retention is " + ShortDuration(t.Retention) +
			", the retry window and after_expiry are unknown here"
	}
	expired := "expired: " + ReviewFigure(t.Expired) + ", of which " + ReviewFigure(t.Purgeable) + " a purge takes now"
	if t.Held > 0 || t.Conflicted > 0 {
		expired += fmt.Sprintf("; kept: %s held, %s with unreviewed conflicts", count(t.Held), count(t.Conflicted))
	}
	oldest := "oldest pending: none"
	if p := t.OldestPending; p != nil {
		oldest = fmt.Sprintf("oldest pending: #%d, lease expires %s", p.ID, since(p.LeaseExpiresAt, s.r.DBTime))
		if readmodel.LeaseEnded(p.LeaseExpiresAt, s.r.DBTime, 0) {
			oldest = fmt.Sprintf("oldest pending: #%d, lease expired %s", p.ID, since(p.LeaseExpiresAt, s.r.DBTime))
		}
		if p.Stuck {
			oldest += " (stuck)"
		}
	}
	var lines []string
	add := func(text string) { lines = append(lines, indented(text, w-3, "   ", nil)...) }
	lines = append(lines, s.st.Title.Render(truncate(" "+termtext.Clean(t.Tool), w)))
	add(policy)
	add("expiring: " + ReviewFigure(t.Expiring24h) + " within 24h, " + ReviewFigure(t.Expiring7d) + " within 7d")
	add(expired)
	add(oldest)
	for _, warn := range t.Warnings {
		for i, l := range wrap("⚠ "+warn, w-3) {
			if i > 0 {
				l = "  " + l
			}
			lines = append(lines, "   "+s.st.Stuck.Render(l))
		}
	}
	return lines
}

// purgeWarnings are the unfinished purge runs, above the table: records
// went and no result record says so yet. The screen names two (one on a
// short terminal); opsdesk retention review lists them all, with their
// reasons.
func (s *reviewScreen) purgeWarnings(w int) []string {
	var lines []string
	add := func(text string) {
		for i, l := range wrap(text, w-3) {
			if i > 0 {
				l = "  " + l
			}
			lines = append(lines, " "+s.st.Stuck.Render(l))
		}
	}
	shown := 2
	if s.h < 30 {
		shown = 1
	}
	runs := s.r.UnfinishedPurges
	for i, u := range runs {
		if i == shown {
			add(fmt.Sprintf("⚠ %d more unfinished purge runs: opsdesk retention review lists them", len(runs)-i))
			break
		}
		what := "every tool"
		if u.Tool != "" {
			what = u.Tool
		}
		add(termtext.Clean(fmt.Sprintf("⚠ unfinished purge run %d of %s, started %s by %s: %s purged, no result record yet; "+
			"%s finishes it by purging again", u.Run, what, since(u.StartedAt, s.r.DBTime), u.Role, count(u.Purged), u.Role)))
	}
	return lines
}

// afterExpiryNote says what a late retry gets.
func afterExpiryNote(after string) string {
	if after == "reject" {
		return " (a retry within the window after the purge gets ErrExpired)"
	}
	return " (a retry after the purge runs again)"
}

func (s *reviewScreen) footnote(w int) []string {
	text := "figures as of db time " + clock(s.r.DBTime) + " UTC; counts above " + count(readmodel.CountCap) +
		" are estimates (~)"
	if s.r.Scoped {
		text = "figures as of db time " + clock(s.r.DBTime) + " UTC; counts above " + count(readmodel.CountCap) +
			" show as " + count(readmodel.CountCap) + "+"
	}
	text += "; a purge counts exactly first"
	var out []string
	for _, l := range wrap(text, w-1) {
		out = append(out, s.st.Muted.Render(" "+l))
	}
	return out
}
