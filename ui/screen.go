package ui

import (
	"slices"
	"time"

	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"
)

// screen is one page of the console: a tea.Model with its own key help
// and size. The root model owns global keys, refresh and navigation and
// forwards everything else to the active screen.
type screen interface {
	tea.Model
	help.KeyMap
	SetSize(w, h int)
	id() screenID
	// open shows the screen for a navigation message addressed to it and
	// says where it goes on the stack; ok is false when it does not open
	// from where the operator is (a decision without the role to decide,
	// say), and then it changed nothing.
	open(n navMsg, at opening) (stack []screen, cmd tea.Cmd, ok bool)
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

// screenID names a screen, to route navigation and results to it. Each
// screen declares its own in its file.
type screenID string

// screenKind is one kind of screen: how it is built, and the : commands
// that open it.
type screenKind struct {
	id       screenID
	build    func(d deps, o Config) screen
	commands []command
}

// screenKinds is every screen the console navigates to. A new screen is
// its own file (its type, its navigation message, its kind) and one line
// here. The order is the order of the commands in help.
var screenKinds = []screenKind{
	listKind,
	detailKind,
	auditKind,
	batchesKind,
	reviewKind,
	verifyKind,
	overviewKind,
	aboutKind,
	reconcileKind,
	ackKind,
	revealKind,
	conflictKind,
	purgeKind,
	auditRecordKind,
	bulkKind,
	bulkGroupKind,
}

// opening is what a screen that opens needs to know of the console: the
// stack it opens on, the overview at its bottom, and what the role may do.
type opening struct {
	home  screen
	stack []screen
	perms permits
}

// active is the screen the operator opened it from.
func (o opening) active() screen { return o.stack[len(o.stack)-1] }

// rooted is s right above the overview: where a screen opened from a
// command or a tile goes.
func (o opening) rooted(s screen) []screen { return []screen{o.home, s} }

// pushed is s on top of the stack: where a screen drilled into goes. A
// screen shows once: when s is on the stack already, the stack is cut
// back to it.
func (o opening) pushed(s screen) []screen {
	if i := slices.Index(o.stack, s); i >= 0 {
		return slices.Clone(o.stack[:i+1])
	}
	return append(slices.Clone(o.stack), s)
}

// permits are what the console offers the connected role: the database
// decides, the console only stops offering what would be refused.
type permits struct {
	decide bool // decisions, acknowledgements, reveals
	purge  bool // retention purges
}

// permitted is a screen that offers writes when the role may make them.
type permitted interface{ allow(p permits) }

// labeller is a screen that words esc and q itself where they do
// something of their own ("clear filter", "previous step"); an empty word
// leaves the root's.
type labeller interface{ backLabels() (esc, q string) }

// sideways is a screen that takes the left and right keys (h and l),
// which are otherwise free for the screen's own keys.
type sideways interface{ movesSideways() bool }

// filterLanguage is a screen whose / filter has a language that help
// explains.
type filterLanguage interface{ language() string }

// navigator lets a screen ask the root to show another screen. The root
// follows in the same Update, so keys typed right after are not lost to a
// command's round trip.
type navigator struct{ next navMsg }

func (n *navigator) goTo(m navMsg) { n.next = m }

func (n *navigator) follow() (navMsg, bool) {
	if n.next == nil {
		return nil, false
	}
	m := n.next
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

// navMsg asks the root to show a screen. Each screen declares the
// message it opens from, with what it needs.
type navMsg interface {
	// target is the screen the message opens.
	target() screenID
}

// navBack asks the root to leave the active screen.
type navBack struct{}

func (navBack) target() screenID { return "" }
