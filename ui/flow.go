package ui

import (
	"context"
	"errors"
	"time"

	"github.com/charmbracelet/bubbles/key"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// flowNav opens a flow on a record: as the detail showed it (rec), whose
// version a decision expects, or by id from a list, read first.
type flowNav struct {
	to  screenID
	rec *readmodel.Detail
	id  int64
	// field is the stored value a reveal shows.
	field reconcile.Field
}

func (n flowNav) target() screenID { return n.to }

// step names where the operator is in a flow. The steps every flow
// shares are here; a flow names its own in its file.
type step string

const (
	stepLoading  step = "loading" // the record, opened from a list, is read
	stepReason   step = "reason"
	stepConfirm  step = "confirm"
	stepApplying step = "applying"
	stepResult   step = "result"
)

// crumb is one name of a flow's breadcrumbs and the steps it covers.
type crumb struct {
	name  string
	steps []step
}

// applied is what a flow's write answered: the audit record, and what a
// reveal read (its flow's own type), handed to the flow with evApplied.
type applied struct {
	res   reconcile.Result
	value any
}

// Flow messages. They carry the request's sequence number: an answer to
// an older request (another record's lookup, say) is dropped.
type (
	applyMsg struct {
		seq   int
		res   reconcile.Result
		value any
		err   error
	}
	refetchMsg struct {
		seq int
		d   readmodel.Detail
		err error
	}
	loadMsg struct {
		seq int
		d   readmodel.Detail
		err error
	}
	spinMsg struct{}
)

// dbBackMsg tells a flow the database answers again.
type dbBackMsg struct{}

// checkMsg answers the read of a record after a write the database did
// not answer, to find out whether it was applied.
type checkMsg struct {
	seq int
	d   readmodel.Detail
	err error
}

// A flow's read or write is a database answer (dbAnswer).
func (m applyMsg) dbErr() error   { return dbFailure(m.err) }
func (m refetchMsg) dbErr() error { return dbFailure(m.err) }
func (m loadMsg) dbErr() error    { return dbFailure(m.err) }
func (m checkMsg) dbErr() error   { return dbFailure(m.err) }

// dbFailure is err when it says the database did not answer; a refusal,
// a record not found and a request given up on are answers.
func dbFailure(err error) error {
	var refused *reconcile.RefusedError
	if err == nil || errors.As(err, &refused) || errNoRecord(err) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// spinFrames animate what is waiting on the database or the provider.
var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// flow is one of the console's flows: its own screen over a stepMachine
// it holds, which calls nothing of it. After every change (act) the flow
// takes the machine's events (takeEvents) and acts on them, words its own
// keys (after wordKeys) and hands the machine its page (setPage), with
// what only some flows have as data: what an input pins under a step,
// the prompt of a typed confirmation, a wait of its own. A key the step
// offers (offers) goes to the flow before the machine's Update.
type flow interface {
	screen
	leaver
	// title is the flow's first line.
	title() string
	// page is the text of step st: all of it for the flow's own steps;
	// for the reason and the confirmation, the text above the prompt;
	// for the result, what it shows once the write succeeded.
	page(st step) []string
	// write is the flow's write as it is to run now.
	write() func(ctx context.Context) (applied, error)
	// act does what the machine reported, then words the flow's keys and
	// hands the machine its page: the end of every Update, SetSize, esc
	// and opening.
	act() tea.Cmd
	// machine is the flow's step machine, which esc, the size and the
	// opening (flowBack, flowResize, flowOpen) and ctrl+c's interrupter
	// work on.
	machine() *stepMachine
}

// The root tells a flow's screen by the flow interface (its status bar
// says refresh is paused in it), so a flow that stopped satisfying it
// would only be seen there: these fail to build instead.
var (
	_ flow = (*ackFlow)(nil)
	_ flow = (*revealFlow)(nil)
	_ flow = (*conflictFlow)(nil)
	_ flow = (*reconcileFlow)(nil)
	_ flow = (*bulkFlow)(nil)
)

// flowBack is esc in flow f: a step back on its machine, which f acts on.
func flowBack(f flow) (bool, tea.Cmd) {
	handled, cmd := f.machine().stepBack()
	return handled, tea.Batch(cmd, f.act())
}

// flowOpen opens flow f on the record n names, from where at says.
func flowOpen(f flow, n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	cmd, ok := f.machine().open(n, at)
	if !ok {
		return nil, nil, false
	}
	return at.pushed(f), tea.Batch(cmd, f.act()), true
}

// flowResize lays flow f out for a new size.
func flowResize(f flow, w, h int) {
	f.machine().SetSize(w, h)
	f.act()
}

// onSteps is what a flow's screen answers from its machine, sm, which the
// flow holds as a component, and its own keys: the flow itself takes the
// messages (Update), the size, esc and the opening, and acts on the
// machine's events.
type onSteps struct {
	sm   stepMachine
	keys KeyMap
}

// newOnSteps is a flow's machine and keys.
func newOnSteps(d deps, sid screenID, dec Decider) onSteps {
	return onSteps{sm: newSteps(d, sid, dec), keys: d.keys}
}

// wordKeys words the machine's keys for its step, and disables the keys
// a flow has of its own beside the machine's: the flow enables those of
// its step after.
func (o *onSteps) wordKeys() {
	o.sm.wordKeys()
	k := &o.keys
	for _, b := range []*key.Binding{&k.Up, &k.Down, &k.Top, &k.Bottom, &k.NextPage, &k.PrevPage, &k.Override, &k.AskAgain, &k.Choose, &k.EditRef} {
		b.SetEnabled(false)
	}
}

// flowShortHelp is the short help of a flow on a record, from its
// machine's keys and its own (k); more are the keys of the flow's own
// steps, after y and n.
func flowShortHelp(m *stepMachine, k KeyMap, more ...key.Binding) []key.Binding {
	mk := m.KeyMap
	scroll := combined("pgdn/pgup", "scroll", mk.ScrollDown, mk.ScrollUp)
	if m.capturing() {
		return []key.Binding{mk.Accept, mk.Cancel, scroll, k.ForceQuit}
	}
	if m.step == stepResult {
		return []key.Binding{mk.Next, combined("↑/↓", "scroll", k.Up, k.Down), combined("pgdn/pgup", "page", k.NextPage, k.PrevPage), scroll}
	}
	out := append([]key.Binding{combined("↑/↓", "choose", k.Up, k.Down), mk.Next, mk.Yes, mk.No}, more...)
	return append(out, scroll)
}

// flowFullHelp is the full help of a flow on a record.
func flowFullHelp(m *stepMachine, k KeyMap) [][]key.Binding {
	mk := m.KeyMap
	return [][]key.Binding{{mk.Next, mk.Accept, mk.Cancel, k.Up, k.Down}, {mk.Yes, mk.No}, {mk.ScrollDown, mk.ScrollUp}}
}

// refresh does nothing: the flow works on the record as the operator
// saw it, and the status bar keeps that read's database time.
func (o *onSteps) refresh() tea.Cmd { return nil }

func (o *onSteps) id() screenID                { return o.sm.id() }
func (o *onSteps) Init() tea.Cmd               { return nil }
func (o *onSteps) current(seq int) bool        { return o.sm.current(seq) }
func (o *onSteps) asOf() time.Time             { return o.sm.asOf() }
func (o *onSteps) follow() (navMsg, bool)      { return o.sm.follow() }
func (o *onSteps) capturing() bool             { return o.sm.capturing() }
func (o *onSteps) backLabels() (esc, q string) { return o.sm.backLabels() }
func (o *onSteps) ShortHelp() []key.Binding    { return flowShortHelp(&o.sm, o.keys) }
func (o *onSteps) FullHelp() [][]key.Binding   { return flowFullHelp(&o.sm, o.keys) }
func (o *onSteps) View() string                { return o.sm.View() }
func (o *onSteps) leave()                      { o.sm.leave() }
func (o *onSteps) machine() *stepMachine       { return &o.sm }
