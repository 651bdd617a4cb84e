package ui

import (
	"regexp"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/termtext"
)

// screenAbout is what the console was told of the store it is on
// (Config.About): for the demo, where its catalog, provider, exporter and
// psql are, which its start printed and the console then covered.
const screenAbout screenID = "about"

// aboutNav opens the notes on the store.
type aboutNav struct{}

func (aboutNav) target() screenID { return screenAbout }

func (aboutNav) describe() string { return "notes on this store" }

// aboutKind is the notes on the store and :about.
var aboutKind = screenKind{
	id:    screenAbout,
	build: func(d deps, o Config) screen { return newAbout(d, o.About) },
	commands: []command{{names: []string{"about", "demo"}, usage: ":about",
		help: "notes on this store (the demo's catalog, provider, exporter, psql)", try: "about", suggest: "about",
		parse: noArgs("about", aboutNav{})}},
}

// noteLabel is a note's label and the spaces that align what follows it.
var noteLabel = regexp.MustCompile(`^ *[^ ]+(?: [a-z]+)?:? {2,}`)

// aboutScreen shows Config.About, scrolling when it is long.
type aboutScreen struct {
	deps
	navigator
	scrollText
	w, h  int
	notes []string
}

func newAbout(d deps, notes []string) *aboutScreen {
	s := &aboutScreen{deps: d, notes: notes}
	s.updateKeys()
	return s
}

func (s *aboutScreen) id() screenID          { return screenAbout }
func (s *aboutScreen) Init() tea.Cmd         { return nil }
func (s *aboutScreen) current(int) bool      { return true }
func (s *aboutScreen) capturing() bool       { return false }
func (s *aboutScreen) back() (bool, tea.Cmd) { return false, nil }
func (s *aboutScreen) asOf() time.Time       { return time.Time{} }
func (s *aboutScreen) refresh() tea.Cmd      { return nil }

func (s *aboutScreen) open(_ navMsg, at opening) ([]screen, tea.Cmd, bool) {
	s.offset = 0
	return at.rooted(s), nil, true
}

func (s *aboutScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	s.render()
}

// textH is the height the notes scroll in, under the title.
func (s *aboutScreen) textH() int { return max(1, s.h-2) }

func (s *aboutScreen) render() {
	s.lines = nil
	notes := s.notes
	if len(notes) == 0 {
		notes = []string{"Nothing was noted for this store: the demo notes where its catalog, provider, exporter and " +
			"psql are. The status bar names the server, the database and your role; opsdesk doctor checks them."}
	}
	for _, n := range notes {
		n = termtext.Clean(n)
		if width(n) <= s.w-2 {
			s.lines = append(s.lines, " "+n) // as noted, its alignment kept
			continue
		}
		// Wrapped whole, never cut (a DSN or a path is copied from here),
		// under its label: "  database  postgres://…".
		lead := ""
		if m := noteLabel.FindString(n); m != "" && width(m) < s.w/2 {
			lead, n = m, n[len(m):]
		} else if trimmed := strings.TrimLeft(n, " "); len(trimmed) < len(n) {
			lead, n = n[:len(n)-len(trimmed)], trimmed
		}
		for i, l := range wrap(n, max(1, s.w-2-width(lead))) {
			if i == 0 {
				s.lines = append(s.lines, " "+lead+l)
				continue
			}
			s.lines = append(s.lines, " "+strings.Repeat(" ", width(lead))+l)
		}
	}
	s.clampScroll(s.textH())
	s.updateKeys()
}

func (s *aboutScreen) updateKeys() {
	s.enableScroll(&s.keys, s.textH())
}

// ShortHelp implements help.KeyMap.
func (s *aboutScreen) ShortHelp() []key.Binding {
	return []key.Binding{combined("↑/↓", "scroll", s.keys.Up, s.keys.Down)}
}

// FullHelp implements help.KeyMap.
func (s *aboutScreen) FullHelp() [][]key.Binding {
	return [][]key.Binding{{s.keys.Up, s.keys.Down, s.keys.Top, s.keys.Bottom, s.keys.NextPage, s.keys.PrevPage}}
}

func (s *aboutScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if k, ok := msg.(tea.KeyMsg); ok {
		s.scrollKey(k, s.keys, s.textH())
	}
	return s, nil
}

func (s *aboutScreen) View() string {
	return " " + s.st.Title.Render("About this store") + "\n\n" + s.scrollView(s.w, s.textH(), s.st)
}
