package ui

import (
	"strconv"

	"github.com/charmbracelet/bubbles/key"

	"github.com/opsdesk/opsdesk/reconcile"
)

// KeyMap holds every key binding of the console. The help screen and the
// footer are generated from it; a binding that does not apply where the
// operator is gets disabled, so it is neither shown nor matched.
type KeyMap struct {
	// Moving.
	Up, Down, Left, Right key.Binding
	Top, Bottom           key.Binding
	NextPage, PrevPage    key.Binding
	// Acting on what is selected.
	Open   key.Binding
	Filter key.Binding
	Sort   key.Binding
	// Going places.
	Back key.Binding
	// Toggle swaps the screen shown with the one before it (k9s's -).
	Toggle key.Binding
	// ClearFilter clears a list's whole filter; esc goes back instead.
	ClearFilter key.Binding
	Command     key.Binding
	Help        key.Binding
	Quit        key.Binding
	// ForceQuit quits from anywhere, even while typing.
	ForceQuit key.Binding
	// Refresh control.
	Pause  key.Binding
	Faster key.Binding
	Slower key.Binding
	// Retry reconnects now when the database could not be reached at start.
	Retry key.Binding
	// ErrorDetail shows the last error whole, where the screens show it
	// in one plain line.
	ErrorDetail key.Binding
	// Accept and Cancel apply inside the filter bar and the command line.
	Accept key.Binding
	Cancel key.Binding

	// Writes, on a record's detail: offered only to a role the database
	// lets decide, never in a read-only context.
	Reconcile    key.Binding
	AckConflicts key.Binding
	Reveal       key.Binding
	RevealIntent key.Binding
	// RevealConflict shows a conflicting attempt's request beside the
	// original, what differs marked.
	RevealConflict key.Binding
	// History, on a record's detail, opens its audit history; Operation,
	// on an audit record, opens the operation it is about.
	History   key.Binding
	Operation key.Binding
	// Purge, on the retention review: offered only to a role the database
	// lets purge.
	Purge key.Binding
	// Inside a decision's flow.
	Next     key.Binding
	Yes      key.Binding
	No       key.Binding
	Override key.Binding
	AskAgain key.Binding
	Choose   key.Binding
	EditRef  key.Binding
	// BulkReconcile, on a list: every listed record by its lookup;
	// offered only to a role the database lets decide.
	BulkReconcile key.Binding
	// OpenGroup, on a bulk plan, shows every record of the selected group
	// (the plan shows samples).
	OpenGroup key.Binding
	// ScrollDown and ScrollUp page through a flow's text; they are never
	// letters, so they work while a reason is typed.
	ScrollDown key.Binding
	ScrollUp   key.Binding
}

// DefaultKeyMap returns the console's key bindings.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:          key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:        key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Left:        key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←/h", "left")),
		Right:       key.NewBinding(key.WithKeys("right", "l"), key.WithHelp("→/l", "right")),
		Top:         key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g/home", "first")),
		Bottom:      key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G/end", "last")),
		NextPage:    key.NewBinding(key.WithKeys("n", "pgdown"), key.WithHelp("n/pgdn", "next page")),
		PrevPage:    key.NewBinding(key.WithKeys("p", "pgup"), key.WithHelp("p/pgup", "prev page")),
		Open:        key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
		Filter:      key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Sort:        key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
		ClearFilter: key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "clear filter"), key.WithDisabled()),
		Back:        key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Toggle:      key.NewBinding(key.WithKeys("-"), key.WithHelp("-", "last view")),
		Command:     key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "go to")),
		Help:        key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:        key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
		ForceQuit:   key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
		Pause:       key.NewBinding(key.WithKeys(" "), key.WithHelp("space", "pause")),
		Faster:      key.NewBinding(key.WithKeys("+", "="), key.WithHelp("+", "faster")),
		Slower:      key.NewBinding(key.WithKeys("_"), key.WithHelp("_", "slower")),
		Retry:       key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "retry now"), key.WithDisabled()),
		ErrorDetail: key.NewBinding(key.WithKeys("E"), key.WithHelp("E", "error details"), key.WithDisabled()),
		Accept:      key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "apply")),
		Cancel:      key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),

		Reconcile:      key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reconcile"), key.WithDisabled()),
		AckConflicts:   key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "ack conflicts"), key.WithDisabled()),
		Reveal:         key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "reveal result"), key.WithDisabled()),
		RevealIntent:   key.NewBinding(key.WithKeys("i"), key.WithHelp("i", "reveal intent"), key.WithDisabled()),
		RevealConflict: key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "compare conflict"), key.WithDisabled()),
		Purge:          key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "purge expired"), key.WithDisabled()),
		History:        key.NewBinding(key.WithKeys("h"), key.WithHelp("h", "audit history"), key.WithDisabled()),
		Operation:      key.NewBinding(key.WithKeys("o", "enter"), key.WithHelp("o", "open operation"), key.WithDisabled()),

		Next:     key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "next"), key.WithDisabled()),
		Yes:      key.NewBinding(key.WithKeys("y", "Y"), key.WithHelp("y", "yes, apply"), key.WithDisabled()),
		No:       key.NewBinding(key.WithKeys("n", "N"), key.WithHelp("n", "no"), key.WithDisabled()),
		Override: key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "override the lookup"), key.WithDisabled()),
		AskAgain: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "ask again"), key.WithDisabled()),
		Choose:   chooseBinding(),
		EditRef:  key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "edit the reference"), key.WithDisabled()),

		BulkReconcile: key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "reconcile all by lookup"), key.WithDisabled()),
		OpenGroup:     key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "all its records"), key.WithDisabled()),

		ScrollDown: key.NewBinding(key.WithKeys("pgdown"), key.WithHelp("pgdn", "scroll down"), key.WithDisabled()),
		ScrollUp:   key.NewBinding(key.WithKeys("pgup"), key.WithHelp("pgup", "scroll up"), key.WithDisabled()),
	}
}

// combined is one help entry for several bindings ("↑/↓ move"), for the
// footer. It holds their keys and shows only when one of them is enabled.
func combined(help, desc string, bs ...key.Binding) key.Binding {
	var keys []string
	enabled := false
	for _, x := range bs {
		keys = append(keys, x.Keys()...)
		enabled = enabled || x.Enabled()
	}
	b := key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	b.SetEnabled(enabled)
	return b
}

// chooseBinding picks a decision by its number: 1 to the number of
// reconcile.Kinds.
func chooseBinding() key.Binding {
	var keys []string
	for i := range reconcile.Kinds {
		keys = append(keys, strconv.Itoa(i+1))
	}
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp("1-"+strconv.Itoa(len(keys)), "choose"), key.WithDisabled())
}
