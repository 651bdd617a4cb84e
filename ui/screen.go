package ui

import (
	"time"

	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/storeview"
)

// screen is one page of the console: a tea.Model with its own key help
// and size. The root model owns global keys, refresh and navigation and
// forwards everything else to the active screen.
type screen interface {
	tea.Model
	help.KeyMap
	SetSize(w, h int)
	id() screenID
	// refresh polls again; it returns nil while a request is in flight.
	refresh() tea.Cmd
	// current tells whether seq is the screen's latest request.
	current(seq int) bool
	// capturing tells whether the screen takes every key (a text input).
	capturing() bool
	// back handles esc inside the screen (clearing a filter, say) and
	// reports whether it did; otherwise the root goes back a screen.
	back() (bool, tea.Cmd)
	// asOf is the database time the shown data was read at.
	asOf() time.Time
	// follow returns where the screen asked to go, once.
	follow() (navMsg, bool)
}

// navigator lets a screen ask the root to show another screen. The root
// follows in the same Update, so keys typed right after are not lost to a
// command's round trip.
type navigator struct{ next *navMsg }

func (n *navigator) goTo(m navMsg) { n.next = &m }

func (n *navigator) follow() (navMsg, bool) {
	if n.next == nil {
		return navMsg{}, false
	}
	m := *n.next
	n.next = nil
	return m, true
}

// deps are what every screen is built with; all of it is read-only.
type deps struct {
	keys KeyMap
	st   Styles
	f    fetcher
	// after schedules msg (a spinner's next frame, say); tests record it
	// instead of waiting.
	after func(time.Duration, tea.Msg) tea.Cmd
}

// leaver is a screen that forgets something when the operator leaves it
// (a revealed value, say).
type leaver interface{ leave() }

// navMsg asks the root to show a screen.
type navMsg struct {
	to screenID
	// For the list.
	filter     storeview.Filter
	filterText string
	sort       storeview.Sort
	// edit opens the filter bar.
	edit bool
	// For the detail: an id, or an identity to look up.
	id    int64
	ident *identity
	// For a decision's flow: what to do, on the record as shown.
	flow flowKind
	rec  *storeview.Detail
	// For a purge: the tool, as the review showed it.
	tool *storeview.ToolReview
	// For the audit trail: a filter, and whether it is an operation's
	// history opened from its detail (kept above the detail; esc goes
	// back to it rather than clearing the filter).
	audit   storeview.AuditFilter
	history bool
	// For an audit record: its chain and number.
	record *auditRef
}

// auditOf opens the audit trail with a filter.
func auditOf(f storeview.AuditFilter) navMsg {
	return navMsg{to: screenAudit, audit: f, filterText: f.String()}
}

// listOf opens the operations list with a filter.
func listOf(f storeview.Filter, sort storeview.Sort) navMsg {
	return navMsg{to: screenList, filter: f, filterText: f.String(), sort: sort}
}
