package ui

import (
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/termtext"
)

// screenConnect is the screen shown until the database first answers.
const screenConnect screenID = "connect"

// connectScreen is shown until the database first answers: a clear
// message and a retry, never a crash.
type connectScreen struct {
	deps
	navigator
	w, h     int
	context  string
	seq      int
	loading  bool
	attempts int
	err      error
	// every is the retry interval, set by the root; paused stops retries.
	every  time.Duration
	paused bool
}

func newConnect(d deps, context string) *connectScreen {
	return &connectScreen{deps: d, context: context}
}

func (s *connectScreen) id() screenID          { return screenConnect }
func (s *connectScreen) Init() tea.Cmd         { return nil }
func (s *connectScreen) SetSize(w, h int)      { s.w, s.h = w, h }
func (s *connectScreen) current(seq int) bool  { return seq == s.seq }
func (s *connectScreen) capturing() bool       { return false }
func (s *connectScreen) back() (bool, tea.Cmd) { return false, nil }
func (s *connectScreen) asOf() time.Time       { return time.Time{} }

// open refuses: the root shows the connect screen itself, nothing
// navigates to it.
func (s *connectScreen) open(navMsg, opening) ([]screen, tea.Cmd, bool) { return nil, nil, false }

// ShortHelp implements help.KeyMap; the root adds retry and quit.
func (s *connectScreen) ShortHelp() []key.Binding { return nil }

// FullHelp implements help.KeyMap.
func (s *connectScreen) FullHelp() [][]key.Binding { return nil }

func (s *connectScreen) fetch() tea.Cmd {
	s.seq++
	s.loading = true
	s.attempts++
	return s.f.connect(s.seq)
}

func (s *connectScreen) refresh() tea.Cmd {
	if s.loading {
		return nil
	}
	return s.fetch()
}

func (s *connectScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if msg, ok := msg.(connectMsg); ok && msg.seq == s.seq {
		s.loading = false
		s.err = nil
		if !msg.reachable() {
			s.err = msg.err
		}
	}
	return s, nil
}

func (s *connectScreen) View() string {
	name := s.context
	if name == "" {
		name = "the configured database"
	} else {
		name = "context " + termtext.Clean(name)
	}
	if s.err == nil {
		return "\n " + "Connecting to " + name + "…"
	}
	w := max(1, s.w-4)
	lines := []string{"", " " + s.st.Error.Render("✗ Cannot reach the database of "+name), ""}
	for _, l := range wrap(termtext.Clean(s.err.Error()), w) {
		lines = append(lines, "   "+l)
	}
	lines = append(lines, "")
	retry := "Retrying every " + interval(s.every) + " (attempt " + strconv.Itoa(s.attempts) + ")."
	if s.paused {
		retry = "Retries are paused (space resumes; attempt " + strconv.Itoa(s.attempts) + ")."
	}
	if s.loading {
		retry = "Trying again now (attempt " + strconv.Itoa(s.attempts) + ")…"
	}
	for _, l := range wrap(retry+" Press r to retry now, ctrl+c to quit.", w) {
		lines = append(lines, "   "+l)
	}
	for _, l := range wrap("Check the context's DSN and that the server is up; opsdesk doctor checks the connection step by step.", w) {
		lines = append(lines, "   "+s.st.Muted.Render(l))
	}
	return strings.Join(lines, "\n")
}

// interval writes a refresh interval: 500ms, 2s, 1m.
func interval(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return ShortDuration(d)
}
