package ui

import (
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// screenBulkGroup is every record of one group of a bulk plan.
const screenBulkGroup screenID = "bulk-group"

// bulkGroupNav opens a plan's group: its records as looked up, the batch
// they belong to, how their keys are cut, and the database time of the
// listing (what every version in it is as of).
type bulkGroupNav struct {
	group    bulk.Group
	batch    string
	fit      keyFit
	listedAt time.Time
}

func (bulkGroupNav) target() screenID { return screenBulkGroup }

// bulkGroupKind is a plan's group; o on the bulk plan opens it.
var bulkGroupKind = screenKind{id: screenBulkGroup, build: func(d deps, _ Config) screen { return newBulkGroup(d) }}

// bulkGroupScreen shows every record of a bulk plan's group, where the
// plan shows three: scrollable, and filtered by / to the records whose
// id, tenant, key or note holds the text typed. It reads nothing: the
// records are the plan's, as looked up. esc goes back to the plan.
type bulkGroupScreen struct {
	deps
	navigator
	w, h int

	nav        bulkGroupNav
	filterText string
	shown      int // records the filter keeps

	scrollText
	filterBar
}

func newBulkGroup(d deps) *bulkGroupScreen {
	s := &bulkGroupScreen{deps: d, filterBar: newFilterBar(d.st, "text in the id, tenant, key or note, e.g. acme or 404")}
	s.updateKeys()
	return s
}

func (s *bulkGroupScreen) id() screenID          { return screenBulkGroup }
func (s *bulkGroupScreen) Init() tea.Cmd         { return nil }
func (s *bulkGroupScreen) current(int) bool      { return false }
func (s *bulkGroupScreen) capturing() bool       { return s.editing }
func (s *bulkGroupScreen) refresh() tea.Cmd      { return nil }
func (s *bulkGroupScreen) asOf() time.Time       { return s.nav.listedAt }
func (s *bulkGroupScreen) back() (bool, tea.Cmd) { return false, nil }

func (s *bulkGroupScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	s.input.Width = max(1, w-4)
	s.render()
}

// open shows the group above the plan.
func (s *bulkGroupScreen) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	g, ok := n.(bulkGroupNav)
	if !ok || at.active().id() != screenBulk {
		return nil, nil, false
	}
	s.nav, s.filterText, s.offset = g, "", 0
	s.closeBar()
	s.render()
	return at.pushed(s), nil, true
}

// textH is the height the records scroll in: the title, a blank line and
// the filter line take the rest.
func (s *bulkGroupScreen) textH() int { return max(1, s.h-3) }

func (s *bulkGroupScreen) updateKeys() {
	s.enableScroll(&s.keys, s.textH())
	s.keys.ClearFilter.SetEnabled(s.filterText != "")
}

// ShortHelp implements help.KeyMap.
func (s *bulkGroupScreen) ShortHelp() []key.Binding {
	if s.editing {
		return []key.Binding{s.keys.Accept, s.keys.Cancel}
	}
	return []key.Binding{combined("↑/↓", "scroll", s.keys.Up, s.keys.Down), combined("pgdn/pgup", "page", s.keys.NextPage, s.keys.PrevPage),
		s.keys.Filter, s.keys.ClearFilter}
}

// FullHelp implements help.KeyMap.
func (s *bulkGroupScreen) FullHelp() [][]key.Binding {
	return [][]key.Binding{{s.keys.Up, s.keys.Down, s.keys.NextPage, s.keys.PrevPage, s.keys.Top, s.keys.Bottom},
		{s.keys.Filter, s.keys.ClearFilter}}
}

func (s *bulkGroupScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return s, nil
	}
	if s.editing {
		text, accepted, cmd := s.editKey(km, s.keys)
		if accepted {
			s.closeBar()
			s.filterText, s.offset = termtext.Clean(text), 0
			s.render()
		}
		return s, cmd
	}
	switch {
	case s.scrollKey(km, s.keys, s.textH()):
	case key.Matches(km, s.keys.Filter):
		return s, s.openBar(strings.TrimSpace(s.filterText))
	case key.Matches(km, s.keys.ClearFilter):
		s.filterText, s.offset = "", 0
		s.render()
	}
	return s, nil
}

// matches tells whether the filter keeps item: each word typed, in any
// case, is in its id, tenant, key or note.
func (s *bulkGroupScreen) matches(item bulk.Item) bool {
	hay := strings.ToLower(strconv.FormatInt(item.ID, 10) + " " + termtext.Clean(item.Tenant) + " " +
		termtext.Clean(item.Key) + " " + termtext.Clean(sampleNote(item)))
	for _, word := range strings.Fields(strings.ToLower(s.filterText)) {
		if !strings.Contains(hay, word) {
			return false
		}
	}
	return true
}

func (s *bulkGroupScreen) render() {
	s.lines, s.shown = nil, 0
	g := s.nav.group
	if g.Verdict.Conflicted() {
		s.lines = append(s.lines, s.st.Conflict.Render(truncate(" "+conflictedText(g), s.w)))
	}
	for _, item := range g.Items {
		if s.filterText != "" && !s.matches(item) {
			continue
		}
		s.shown++
		s.lines = append(s.lines, bulkItemLine(s.nav.fit, s.w, item, sampleNote(item)))
	}
	if s.shown == 0 {
		s.lines = append(s.lines, s.st.Muted.Render(truncate("  no record of the group holds "+strconv.Quote(s.filterText)+" · x clears the filter", s.w)))
	}
	s.clampScroll(s.textH())
	s.updateKeys()
}

func (s *bulkGroupScreen) View() string {
	w := max(1, s.w)
	g := s.nav.group
	n := count(int64(g.Count()))
	if s.filterText != "" {
		n = count(int64(s.shown)) + " of " + n
	}
	title := " " + s.st.Title.Render("Bulk plan: the "+g.Verdict.Label()+" group") + "  " + verdictGlyph(g.Verdict) + " " +
		n + " record" + plural(g.Count()) + " → " + g.Verdict.ProposalText()
	lines := []string{truncate(title, w), ""}
	lines = append(lines, strings.Split(s.scrollView(w, s.textH(), s.st), "\n")...)
	for len(lines) < max(1, s.h-1) {
		lines = append(lines, "")
	}
	bottom := s.st.Muted.Render(truncate(" batch "+termtext.Clean(s.nav.batch)+" · as looked up · / filters · esc back to the plan", w))
	switch {
	case s.editing:
		bottom = " " + s.input.View()
	case s.filterText != "":
		bottom = s.st.Muted.Render(truncate(" filter "+strconv.Quote(s.filterText)+" · x clears it · / edits it · esc back to the plan", w))
	}
	lines = append(lines[:max(1, s.h-1)], bottom)
	return strings.Join(lines, "\n")
}
