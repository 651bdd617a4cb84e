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
// reveal read (its flow's own type), handed to a keeper.
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

// flow is what one flow supplies to the step machine it runs on; the
// machine does the rest. A flow is its own screen over a stepMachine,
// which calls nothing of it: the flow hands the machine its page and acts
// on the machine's events. Flows that do not yet do so themselves are
// driven by legacySync over the interfaces of what only some flows have:
// stepper (steps of its own), inputter (what their inputs pin),
// typedConfirmer, starter, keeper and waiter.
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
}

// stepper is a flow with steps of its own (deciding, choosing an
// attempt, a plan), or keys of its own on the machine's.
type stepper interface {
	// keysAt enables and words the flow's keys at step st, after the
	// machine did its own.
	keysAt(st step, k *KeyMap)
	// keyAt handles a key at step st and reports whether it did; on a
	// step with an input it sees only enter.
	keyAt(st step, msg tea.KeyMsg) (tea.Cmd, bool)
}

// inputter is a flow whose own steps take text (the machine holds the
// inputs: addInput): what stays pinned under the step's text.
type inputter interface {
	pinAt(st step) []string
}

// typedConfirmer is a flow whose confirmation is typed rather than y/N
// where typedConfirm says, with typedPrompt asking for what; enter on it
// goes to the flow's keyAt, or checks the record's operation id.
type typedConfirmer interface {
	typedConfirm() bool
	typedPrompt() string
}

// starter is a flow that does something at once when it starts on a
// record (asking the provider).
type starter interface{ begin(n flowNav) tea.Cmd }

// keeper is a flow that keeps what its write read (a revealed value).
type keeper interface{ applied(v any) }

// waiter is a flow that also waits on something of its own.
type waiter interface{ waiting() bool }

// legacySync drives machine m for flow f over the optional interfaces,
// while f does not yet act on the machine's events itself: it acts on
// them, hands f's page to m and lets f word its keys.
func legacySync(f flow, m *stepMachine) tea.Cmd {
	var cmd tea.Cmd
	for _, ev := range m.takeEvents() {
		switch ev.kind {
		case evStarted:
			if s, ok := f.(starter); ok {
				cmd = tea.Batch(cmd, s.begin(m.nav))
			}
		case evSubmit:
			cmd = tea.Batch(cmd, m.apply(f.write()))
		case evApplied:
			if k, ok := f.(keeper); ok {
				k.applied(ev.value)
			}
		case evLeft:
			f.leave()
		}
	}
	m.wordKeys()
	if s, ok := f.(stepper); ok {
		s.keysAt(m.step, &m.KeyMap)
	}
	p := stepPage{title: f.title()}
	switch st := m.pageStep(); st {
	case "":
	default:
		p.text = f.page(st)
	}
	if in, ok := f.(inputter); ok {
		p.pin = in.pinAt(m.step)
	}
	if t, ok := f.(typedConfirmer); ok && t.typedConfirm() {
		p.typed = t.typedPrompt()
	}
	if w, ok := f.(waiter); ok {
		p.waiting = w.waiting()
	}
	m.setPage(p)
	return cmd
}

// legacyUpdate is Update of flow f on machine m over the optional
// interfaces: a key the step offers goes to the flow's keyAt first.
func legacyUpdate(f flow, m *stepMachine, msg tea.Msg) tea.Cmd {
	if k, ok := msg.(tea.KeyMsg); ok && m.offers(k) {
		if s, ok := f.(stepper); ok {
			if cmd, ok := s.keyAt(m.step, k); ok {
				return tea.Batch(cmd, legacySync(f, m))
			}
		}
	}
	var cmd tea.Cmd
	*m, cmd = m.Update(msg)
	return tea.Batch(cmd, legacySync(f, m))
}

// legacyOpen opens flow f on machine m.
func legacyOpen(f flow, m *stepMachine, n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	cmd, ok := m.open(n, at)
	if !ok {
		return nil, nil, false
	}
	return at.pushed(f), tea.Batch(cmd, legacySync(f, m)), true
}

// legacyBack is esc in flow f on machine m.
func legacyBack(f flow, m *stepMachine) (bool, tea.Cmd) {
	handled, cmd := m.stepBack()
	return handled, tea.Batch(cmd, legacySync(f, m))
}

// onSteps is what a flow's screen answers from its machine, sm, which the
// flow holds as a component: the flow itself takes the messages (Update),
// the size, esc and the opening, and acts on the machine's events.
type onSteps struct{ sm stepMachine }

func (o *onSteps) id() screenID                { return o.sm.id() }
func (o *onSteps) Init() tea.Cmd               { return nil }
func (o *onSteps) refresh() tea.Cmd            { return nil }
func (o *onSteps) current(seq int) bool        { return o.sm.current(seq) }
func (o *onSteps) asOf() time.Time             { return o.sm.asOf() }
func (o *onSteps) follow() (navMsg, bool)      { return o.sm.follow() }
func (o *onSteps) capturing() bool             { return o.sm.capturing() }
func (o *onSteps) backLabels() (esc, q string) { return o.sm.backLabels() }
func (o *onSteps) ShortHelp() []key.Binding    { return o.sm.ShortHelp() }
func (o *onSteps) FullHelp() [][]key.Binding   { return o.sm.FullHelp() }
func (o *onSteps) View() string                { return o.sm.View() }
func (o *onSteps) leave()                      { o.sm.leave() }
func (o *onSteps) machine() *stepMachine       { return &o.sm }
