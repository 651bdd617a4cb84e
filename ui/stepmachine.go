package ui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile"
)

// stepMachine is the step machine every flow runs on: its steps in order
// and the way back, the breadcrumbs, the reason, a confirmation that
// defaults to No (typed where a flow asks for it), the write, its answer,
// and what changed when the database refused a record that changed
// since. Every step shows the record as the detail showed it.
//
// It is a component as bubbles' are: its KeyMap, SetSize, an Update that
// returns the machine and a View. It calls nothing of the flow that owns
// it. The flow hands it what it shows (setPage, after every change), and
// acts on what Update reports (takeEvents): the flow started, its write
// is to run, the write answered, the machine started over.
type stepMachine struct {
	navigator
	// KeyMap is the machine's keys. It enables and words them for its
	// steps (wordKeys); a flow words them for its own steps after.
	KeyMap stepKeyMap
	st     Styles
	f      fetcher
	after  func(time.Duration, tea.Msg) tea.Cmd
	w, h   int
	sid    screenID
	dec    Decider

	// Set by the flow when it is built; the conflict reveal sets its
	// crumbs as it starts, since they depend on the record.
	crumbs []crumb
	first  step
	own    []stepInput // the flow's own inputs, by step
	// confirms: the reason goes on to a confirmation; otherwise straight
	// to the write. reasonAccept words enter on the reason, and
	// reasonPrompt asks for it.
	confirms     bool
	reasonAccept string
	reasonPrompt string
	// reveals: the write changes no record, only audits a reveal. esc
	// while it is under way gives up on it (a large value over a slow
	// link), and when the database does not answer, the screen says
	// nothing was shown rather than that a change may have been applied.
	reveals bool
	// needsPending: the flow decides on a pending record, so one read
	// from a list that is no longer pending opens nothing.
	needsPending bool

	// page is what the flow shows at the step, as it last handed it over;
	// events, what Update reported since the flow last took them.
	page   stepPage
	events []stepEvent
	// nav is how the flow was opened on its record (open), and backTo
	// names where it returns to ("the record", "the list").
	nav    flowNav
	backTo string

	rec      readmodel.Detail
	step     step
	trail    []step // the steps behind, for esc
	seq      int    // numbers every request of the flow
	frame    int
	spin     bool // a spinner frame is scheduled
	reason   textinput.Model
	typed    textinput.Model
	inputErr string
	// capture tells whether the step takes every key, as of the last
	// setPage.
	capture bool

	// offset is how far the step's text is scrolled.
	offset int
	// loadSeq numbers the read of a record opened from a list; loadErr
	// says why it could not be read.
	loadSeq int
	loadErr error

	// Outcome.
	applySeq   int
	res        reconcile.Result
	err        error
	cancel     context.CancelFunc
	refetchSeq int
	refetching bool
	nowRec     *readmodel.Detail // the record read again after a refusal
	refetchErr error

	// After a write the database did not answer, the record is read
	// again (at once, and when the database answers again) to tell
	// whether it was applied: sent is the reason the write carried,
	// checked the record as last read.
	sent     string
	checkSeq int
	checking bool
	checked  *readmodel.Detail
	checkErr error
}

// stepKeyMap is the step machine's keys, taken from the console's: going
// on, confirming or not, going back, scrolling the step's text. A flow's
// own keys (choosing, asking again) are the flow's.
type stepKeyMap struct {
	Next, Accept, Cancel key.Binding
	Yes, No              key.Binding
	ScrollDown, ScrollUp key.Binding
}

// newStepKeyMap is the machine's keys as the console binds them.
func newStepKeyMap(k KeyMap) stepKeyMap {
	return stepKeyMap{Next: k.Next, Accept: k.Accept, Cancel: k.Cancel, Yes: k.Yes, No: k.No, ScrollDown: k.ScrollDown, ScrollUp: k.ScrollUp}
}

// stepInput is an input of a flow's own step, which the machine focuses,
// sizes and hands the keys to.
type stepInput struct {
	at step
	in textinput.Model
}

// stepPage is what a flow shows where its machine is, handed to the
// machine (setPage) whenever it may have changed; the machine lays it out
// around its own text.
type stepPage struct {
	title string
	// text is the flow's page at pageStep: all of a step of its own;
	// above the prompt on the reason and the confirmation; on the result,
	// what a write that succeeded shows.
	text []string
	// pin stays under the text of a step of the flow's own (its input).
	pin []string
	// typed asks for the record's operation id to confirm; "" confirms
	// with y/N.
	typed string
	// waiting: the flow waits on something of its own (the provider), so
	// the spinner turns.
	waiting bool
}

// stepEvent is what happened in the machine that its flow acts on, once
// Update returned: the machine does not call its flow.
type stepEvent struct {
	kind  eventKind
	value any // evApplied: what the write read
}

// eventKind names what happened.
type eventKind int

const (
	// evStarted: the flow starts on m.rec, opened as m.nav says; it does
	// what it does first (asks the provider).
	evStarted eventKind = iota + 1
	// evSubmit: the operator confirmed; the flow runs its write (apply).
	evSubmit
	// evApplied: the write succeeded; the flow keeps what it read.
	evApplied
	// evLeft: the machine started over or gave up the write; the flow
	// forgets what it keeps.
	evLeft
)

// newSteps is a flow's machine with the steps every flow ends with: the
// reason, the confirmation, the write under way and its result.
func newSteps(d deps, sid screenID, dec Decider) stepMachine {
	m := stepMachine{KeyMap: newStepKeyMap(d.keys), st: d.st, f: d.f, after: d.after, sid: sid, dec: dec, confirms: true, reasonAccept: "next",
		reasonPrompt: "Reason (required; kept in the audit trail with your role):"}
	m.reason = textInput(d.st, "", 500)
	m.typed = textInput(d.st, "", typedLimit)
	return m
}

// textInput is a one-line input in the console's looks, with a steady
// cursor (a blinking one would redraw the screen twice a second).
func textInput(st Styles, placeholder string, limit int) textinput.Model {
	in := textinput.New()
	in.Prompt = "> "
	in.Placeholder = placeholder
	in.CharLimit = limit
	in.PromptStyle = st.Bold
	in.TextStyle = st.Input
	in.PlaceholderStyle = st.Muted
	in.Cursor.Style = st.Selected
	in.Cursor.TextStyle = st.Input
	in.Cursor.SetMode(cursor.CursorStatic)
	return in
}

// typedLimit is the most characters a typed confirmation takes (an
// operation id has at most 19 digits).
const typedLimit = 20

// inputAt is the input of step st, nil when it has none; a step with
// one takes every key.
func (m *stepMachine) inputAt(st step) *textinput.Model {
	switch st {
	case stepReason:
		return &m.reason
	case stepConfirm:
		if m.typedConfirm() {
			return &m.typed
		}
		return nil
	}
	for i := range m.own {
		if m.own[i].at == st {
			return &m.own[i].in
		}
	}
	return nil
}

// addInput gives the flow's step st an input.
func (m *stepMachine) addInput(st step, in textinput.Model) {
	m.own = append(m.own, stepInput{at: st, in: in})
}

// setPage takes what the flow shows now: the scrolling keys are enabled
// when it does not fit. The flow words its keys (after wordKeys) before,
// since a page may name them.
func (m *stepMachine) setPage(p stepPage) {
	m.page = p
	_, _, more := m.layout()
	m.KeyMap.ScrollDown.SetEnabled(more)
	m.KeyMap.ScrollUp.SetEnabled(more)
	m.capture = m.step == stepApplying || m.inputAt(m.step) != nil
}

// pageStep is the step whose page the flow hands over: the confirmation's
// while its write is under way, the result's once it succeeded, none
// where the machine shows its own text.
func (m *stepMachine) pageStep() step {
	switch {
	case m.step == stepApplying:
		return stepConfirm
	case m.step == stepLoading, m.step == stepResult && m.err != nil:
		return ""
	}
	return m.step
}

// takeEvents returns what happened since the flow last took it.
func (m *stepMachine) takeEvents() []stepEvent {
	evs := m.events
	m.events = nil
	return evs
}

func (m *stepMachine) report(kind eventKind, value any) {
	m.events = append(m.events, stepEvent{kind: kind, value: value})
}

// pinned is what stays under the text of step st (a prompt and its input).
func (m *stepMachine) pinned(st step) []string {
	switch st {
	case stepReason:
		var out []string
		m.para(&out, m.reasonPrompt, nil)
		return append(out, " "+m.reason.View())
	case stepConfirm, stepApplying:
		return m.confirmPrompt()
	}
	return m.page.pin
}

// textAt is the text of step st.
func (m *stepMachine) textAt(st step) []string {
	switch st {
	case stepLoading:
		return m.loadingView()
	case stepResult:
		return m.resultView()
	}
	return m.page.text
}

// submit completes one of the machine's steps: it checks what was
// entered and moves on.
func (m *stepMachine) submit() tea.Cmd {
	switch m.step {
	case stepReason:
		if strings.TrimSpace(m.reason.Value()) == "" {
			m.inputErr = "a reason is required: it goes into the audit trail"
			return nil
		}
		if !m.confirms {
			m.report(evSubmit, nil)
			return nil
		}
		return m.forward(stepConfirm)
	case stepConfirm:
		if !m.typedConfirm() {
			// enter is No: the confirmation defaults to it.
			_, cmd := m.stepBack()
			return cmd
		}
		if m.typed.Value() != strconv.FormatInt(m.rec.ID, 10) {
			m.inputErr = "that is not this record's operation id: nothing was done"
			m.typed.SetValue("")
			return nil
		}
		m.report(evSubmit, nil)
		return nil
	case stepResult:
		m.goTo(navBack{})
	}
	return nil
}

// machineKeys enables and words the keys of the machine's own steps.
func (m *stepMachine) machineKeys(k *stepKeyMap) {
	switch m.step {
	case stepReason:
		m.inputKeys(k, m.reasonAccept)
	case stepConfirm:
		if m.typedConfirm() {
			k.Accept.SetEnabled(true)
			k.Accept.SetHelp("enter", "confirm")
			k.Cancel.SetEnabled(true)
			return
		}
		k.Yes.SetEnabled(true)
		k.No.SetEnabled(true)
		k.No.SetKeys("n", "N", "enter")
		k.No.SetHelp("n/enter", "no")
	case stepApplying:
		k.Cancel.SetEnabled(m.reveals)
		k.Cancel.SetHelp("esc", "cancel the reveal")
	case stepResult:
		k.Next.SetEnabled(!m.refetching && !m.checking)
		k.Next.SetHelp("enter", "back to "+m.backTo)
	}
}

// resultRoom is how many lines a flow's result step has for what it read,
// below the title, the steps, what the write did and the title of what
// it read.
func (m *stepMachine) resultRoom() int {
	head := 3 + 2                                                                               // the title, the steps, a blank line; done, a blank line
	head += len(wrap("record "+termtext.Clean(m.res.AuditRef())+", committed", max(1, m.w-15))) // the audit field
	head += 2                                                                                   // a blank line, the value's title
	return max(1, m.h-head)
}

// inputKeys are the keys of a step with a text input: enter goes on
// (accept says how), esc goes a step back or cancels at the first.
func (m *stepMachine) inputKeys(k *stepKeyMap, accept string) {
	k.Accept.SetEnabled(true)
	k.Accept.SetHelp("enter", accept)
	k.Cancel.SetEnabled(true)
	if len(m.trail) == 0 {
		k.Cancel.SetHelp("esc", "cancel")
	}
}

func (m *stepMachine) id() screenID         { return m.sid }
func (m *stepMachine) current(seq int) bool { return seq == m.seq }
func (m *stepMachine) asOf() time.Time      { return m.rec.DBTime }

// open starts the machine for a role that may decide: on the record a
// detail shows, at its first step, reporting evStarted; or on a record of
// a list, read first. ok is false when it does not open from where the
// operator is; the flow then pushes itself on the stack.
func (m *stepMachine) open(n navMsg, at opening) (tea.Cmd, bool) {
	fn, ok := n.(flowNav)
	switch {
	case !ok || !at.perms.decide:
		return nil, false
	case fn.rec != nil && at.active().id() == screenDetail:
		m.backTo = "the record"
		m.nav = fn
		return m.start(*fn.rec), true
	case fn.rec == nil && fn.id > 0 && at.active().id() == screenList:
		m.backTo = "the list"
		m.reset(readmodel.Detail{Row: readmodel.Row{ID: fn.id}})
		m.enter(stepLoading)
		m.seq++
		m.loadSeq, m.loadErr = m.seq, nil
		seq, id, src := m.seq, fn.id, m.f.src
		load := run(m.f, func(ctx context.Context) (readmodel.Detail, error) { return src.Get(ctx, id) },
			func(d readmodel.Detail, err error) tea.Msg { return loadMsg{seq: seq, d: d, err: err} })
		m.nav = fn
		return tea.Batch(load, m.spinner()), true
	}
	return nil, false
}

// start begins the flow on rec at its first step.
func (m *stepMachine) start(rec readmodel.Detail) tea.Cmd {
	m.reset(rec)
	cmd := m.enter(m.first)
	m.report(evStarted, nil)
	return cmd
}

// onLoad starts the flow on the record read for it; a record that is no
// longer pending, or could not be read, is said and nothing starts.
func (m *stepMachine) onLoad(msg loadMsg) tea.Cmd {
	if msg.seq != m.loadSeq || m.step != stepLoading {
		return nil
	}
	switch {
	case msg.err != nil:
		m.loadErr = msg.err
		return nil
	case m.needsPending && !msg.d.Pending():
		m.rec = msg.d
		m.loadErr = fmt.Errorf("operation %d is %s now: there is nothing to decide", msg.d.ID, stateText(msg.d.State))
		return nil
	}
	return m.start(msg.d)
}

// loadingView is the wait for the record opened from a list.
func (m *stepMachine) loadingView() []string {
	var out []string
	switch {
	case m.loadErr != nil:
		m.para(&out, "✗ "+termtext.Clean(m.loadErr.Error()), m.st.Error.Render)
		out = append(out, "")
		m.para(&out, "esc goes back to the list.", m.st.Muted.Render)
	default:
		out = append(out, " "+spinFrames[m.frame]+" reading the record…")
	}
	return out
}

// reset starts the machine over on rec, at the flow's first step, and
// reports evLeft.
func (m *stepMachine) reset(rec readmodel.Detail) {
	m.leave()
	m.report(evLeft, nil)
	m.rec = rec
	m.trail = nil
	m.inputErr = ""
	for _, in := range m.allInputs() {
		in.SetValue("")
		in.Blur()
	}
	m.res, m.err, m.nowRec, m.refetchErr, m.refetching = reconcile.Result{}, nil, nil, nil, false
	m.sent, m.checking, m.checked, m.checkErr = "", false, nil, nil
	m.step = m.first
}

// allInputs are the machine's inputs and the flow's.
func (m *stepMachine) allInputs() []*textinput.Model {
	out := []*textinput.Model{&m.reason, &m.typed}
	for i := range m.own {
		out = append(out, &m.own[i].in)
	}
	return out
}

// capturing: text inputs take every key, and so does the wait for the
// database's answer (q must not leave before it arrives).
func (m *stepMachine) capturing() bool { return m.capture }

// typedConfirm tells whether the flow confirms by typing the record's
// operation id.
func (m *stepMachine) typedConfirm() bool { return m.page.typed != "" }

// SetSize lays the machine out for a new size; what fitted may scroll
// now, and the other way round, once the flow hands its page over again.
func (m *stepMachine) SetSize(w, h int) {
	m.w, m.h = w, h
	for _, in := range m.allInputs() {
		in.Width = max(1, w-8)
	}
	m.typed.Width = typedLimit + 1
}

// leave forgets what the machine must not keep once the operator leaves
// the flow: a write being fetched, the reason typed.
func (m *stepMachine) leave() {
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
	m.applySeq = 0 // an answer still on its way is dropped
	m.reason.SetValue("")
	m.typed.SetValue("")
}

// spinner schedules the next frame unless one is scheduled.
func (m *stepMachine) spinner() tea.Cmd {
	if m.spin || m.after == nil {
		return nil
	}
	m.spin = true
	return m.after(120*time.Millisecond, spinMsg{})
}

func (m *stepMachine) busy() bool {
	return m.step == stepApplying || m.step == stepLoading && m.loadErr == nil || m.refetching || m.checking || m.page.waiting
}

// enter moves to step st, focusing its input.
func (m *stepMachine) enter(st step) tea.Cmd {
	m.inputErr = ""
	for _, in := range m.allInputs() {
		in.Blur()
	}
	m.step = st
	m.offset = 0
	var cmd tea.Cmd
	switch in := m.inputAt(st); {
	case st == stepConfirm && in != nil:
		m.typed.SetValue("")
		cmd = m.typed.Focus()
	case in != nil:
		cmd = in.Focus()
	}
	return cmd
}

// forward goes on to st, remembering where esc returns to.
func (m *stepMachine) forward(st step) tea.Cmd {
	m.trail = append(m.trail, m.step)
	return m.enter(st)
}

// stepBack handles esc: one step back. At the flow's first step, and
// once it is done, the root leaves it; while the database answers,
// nothing.
func (m *stepMachine) stepBack() (bool, tea.Cmd) {
	switch {
	case m.step == stepApplying:
		return true, nil
	case m.step == stepResult || len(m.trail) == 0:
		return false, nil
	}
	prev := m.trail[len(m.trail)-1]
	m.trail = m.trail[:len(m.trail)-1]
	return true, m.enter(prev)
}

// backLabels word esc and q for the step.
func (m *stepMachine) backLabels() (esc, q string) {
	switch {
	case m.step == stepResult:
		return "back", "back"
	case len(m.trail) == 0:
		return "cancel", "cancel"
	}
	return "previous step", "cancel"
}

// wordKeys enables and words the machine's keys for its step, the
// scrolling keys aside (setPage): a flow words them for its own steps
// after.
func (m *stepMachine) wordKeys() {
	k := &m.KeyMap
	for _, b := range []*key.Binding{&k.Next, &k.Yes, &k.No, &k.Accept, &k.Cancel} {
		b.SetEnabled(false)
	}
	k.Next.SetHelp("enter", "next")
	k.Cancel.SetHelp("esc", "previous step")
	m.machineKeys(k)
}

// Update takes the machine's messages and keys; a flow takes its own
// messages, and the keys its step offers it first (offers), before it
// hands the rest here. What the flow is to act on, it takes after
// (takeEvents), and then hands its page over again.
func (m stepMachine) Update(msg tea.Msg) (stepMachine, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case applyMsg:
		cmd = m.onApply(msg)
	case loadMsg:
		cmd = m.onLoad(msg)
	case dbBackMsg:
		cmd = m.recheck()
	case checkMsg:
		if msg.seq == m.checkSeq && m.checking {
			m.checking = false
			m.checkErr = msg.err
			if msg.err == nil {
				d := msg.d
				m.checked = &d
			}
		}
	case refetchMsg:
		if msg.seq == m.refetchSeq {
			m.refetching = false
			if msg.err != nil {
				m.refetchErr = msg.err
			} else {
				d := msg.d
				m.nowRec = &d
			}
		}
	case spinMsg:
		m.spin = false
		if m.busy() {
			m.frame = (m.frame + 1) % len(spinFrames)
			cmd = m.spinner()
		}
	case tea.KeyMsg:
		cmd = m.key(msg)
	default:
		cmd = m.updateInput(msg)
	}
	return m, cmd
}

// offers tells whether key msg goes to the flow's own handling of the
// step before the machine's: enter on a step with an input, any key but
// scrolling on one without, none while the write is under way.
func (m *stepMachine) offers(msg tea.KeyMsg) bool {
	k := m.KeyMap
	switch {
	case key.Matches(msg, k.ScrollDown, k.ScrollUp), m.step == stepApplying:
		return false
	case m.inputAt(m.step) != nil:
		return key.Matches(msg, k.Accept)
	}
	return true
}

// key handles the keys the root and the flow leave to the machine.
func (m *stepMachine) key(msg tea.KeyMsg) tea.Cmd {
	k := m.KeyMap
	switch {
	case key.Matches(msg, k.ScrollDown):
		m.scroll(+1)
		return nil
	case key.Matches(msg, k.ScrollUp):
		m.scroll(-1)
		return nil
	}
	if m.step == stepApplying {
		if key.Matches(msg, k.Cancel) {
			m.report(evLeft, nil)
			return m.abandon()
		}
		return nil
	}
	if m.inputAt(m.step) != nil {
		switch {
		case key.Matches(msg, k.Cancel):
			if handled, cmd := m.stepBack(); handled {
				return cmd
			}
			m.goTo(navBack{})
			return nil
		case key.Matches(msg, k.Accept):
			return m.submit()
		}
		return m.updateInput(msg)
	}
	switch {
	case key.Matches(msg, k.Yes):
		m.report(evSubmit, nil)
		return nil
	case key.Matches(msg, k.No):
		_, cmd := m.stepBack()
		return cmd
	case key.Matches(msg, k.Next):
		return m.submit()
	}
	return nil
}

func (m *stepMachine) updateInput(msg tea.Msg) tea.Cmd {
	in := m.inputAt(m.step)
	if in == nil {
		return nil
	}
	var cmd tea.Cmd
	*in, cmd = in.Update(msg)
	if _, ok := msg.(tea.KeyMsg); ok {
		m.inputErr = ""
	}
	return cmd
}

// apply sends the flow's write, work, in a command: what the flow does
// on evSubmit.
func (m *stepMachine) apply(work func(ctx context.Context) (applied, error)) tea.Cmd {
	if m.dec == nil || work == nil {
		return nil
	}
	m.trail = append(m.trail, m.step)
	m.step = stepApplying
	m.seq++
	m.applySeq = m.seq
	seq := m.seq
	fe := m.f
	if m.reveals {
		fe.ctx, m.cancel = context.WithCancel(fe.ctx)
	}
	cmd := run(fe, work, func(a applied, err error) tea.Msg {
		return applyMsg{seq: seq, res: a.res, value: a.value, err: err}
	})
	return tea.Batch(cmd, m.spinner())
}

func (m *stepMachine) onApply(msg applyMsg) tea.Cmd {
	if msg.seq != m.applySeq || m.step != stepApplying {
		return nil
	}
	m.step = stepResult
	m.res, m.err = msg.res, msg.err
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
	if msg.err == nil {
		m.report(evApplied, msg.value)
	}
	m.sent = m.typedReason()
	m.reason.SetValue("")
	if m.ambiguous() {
		return m.check()
	}
	if errors.Is(msg.err, reconcile.ErrChanged) {
		// Show what changed: read the record again.
		m.seq++
		m.refetchSeq, m.refetching, m.nowRec = m.seq, true, nil
		seq, id, src := m.seq, m.rec.ID, m.f.src
		return tea.Batch(run(m.f, func(ctx context.Context) (readmodel.Detail, error) { return src.Get(ctx, id) },
			func(d readmodel.Detail, err error) tea.Msg { return refetchMsg{seq: seq, d: d, err: err} }), m.spinner())
	}
	return nil
}

// ambiguous tells whether the flow's result is a change the database did
// not answer: applied or not, only a read of the record can tell.
func (m *stepMachine) ambiguous() bool {
	var refused *reconcile.RefusedError
	return m.step == stepResult && m.err != nil && !m.reveals && !errors.As(m.err, &refused)
}

// check reads the record again to find out whether the write the
// database did not answer was applied.
func (m *stepMachine) check() tea.Cmd {
	m.seq++
	m.checkSeq, m.checking = m.seq, true
	seq, id, src := m.seq, m.rec.ID, m.f.src
	return tea.Batch(run(m.f, func(ctx context.Context) (readmodel.Detail, error) { return src.Get(ctx, id) },
		func(d readmodel.Detail, err error) tea.Msg { return checkMsg{seq: seq, d: d, err: err} }), m.spinner())
}

// recheck reads the record again when the database answers again after
// a write it did not answer: a write that stalled may have committed
// since the first read.
func (m *stepMachine) recheck() tea.Cmd {
	if !m.ambiguous() || m.checking {
		return nil
	}
	return m.check()
}

// abandon gives up on a write still under way (a reveal being fetched):
// its request is cancelled and the flow leaves at once, forgetting what
// it keeps. Its audit record may well have committed already (it commits
// before the value is read): the operator is told so.
func (m *stepMachine) abandon() tea.Cmd {
	m.leave()
	m.step = m.first
	m.goTo(navBack{})
	return func() tea.Msg {
		return noteMsg("reveal cancelled, nothing shown; its audit record may be committed")
	}
}

// View renders the flow: the title, the steps and the current step's
// text, which scrolls when it is longer than the screen, above what is
// pinned under it and the error of what was entered.
func (m stepMachine) View() string {
	if m.w <= 0 || m.h <= 0 {
		return ""
	}
	body, tail, _ := m.layout()
	lines := append([]string{m.page.title, m.crumbLine(), ""}, body...)
	lines = append(lines, tail...)
	if len(lines) > m.h {
		lines = lines[:m.h]
	}
	return strings.Join(lines, "\n")
}

// layout is the step's text as it fits (scrolled, with the position when
// it does not fit whole), what goes under it, and whether it scrolls.
func (m *stepMachine) layout() (body, tail []string, scrolls bool) {
	body = m.textAt(m.step)
	tail = m.pinned(m.step)
	if m.inputErr != "" {
		tail = append(tail, "")
		for _, l := range wrap("✗ "+m.inputErr, m.w-2) {
			tail = append(tail, " "+m.st.Error.Render(l))
		}
	}
	room := m.h - 3 - len(tail)
	if len(body) <= room || room < 2 {
		return body, tail, false
	}
	room-- // the position line
	off := min(max(0, m.offset), len(body)-room)
	more := fmt.Sprintf(" lines %d–%d of %d · pgdn/pgup scroll", off+1, off+room, len(body))
	return append(slices.Clip(body[off:off+room]), m.st.Muted.Render(truncate(more, m.w))), tail, true
}

// scroll pages the step's text by a screen (dir +1 or -1).
func (m *stepMachine) scroll(dir int) {
	body, _, scrolls := m.layout()
	if !scrolls {
		return
	}
	room := len(body) - 1 // less the position line
	last := len(m.textAt(m.step)) - room
	m.offset = min(max(0, min(m.offset, last)+dir*max(1, room-1)), last)
}

// recordTitle is the title of a flow on one record: what it does (its
// start, "Reconcile operation "), the record's id and identity.
func (m *stepMachine) recordTitle(what string) string {
	head := what + strconv.FormatInt(m.rec.ID, 10)
	if m.rec.Tenant == "" && m.rec.Tool == "" && m.rec.Key == "" {
		// Not read yet: no identity to show, rather than "  /  /".
		return " " + m.st.Title.Render(head)
	}
	ident := termtext.Clean(m.rec.Tenant) + " / " + termtext.Clean(m.rec.Tool) + " / " + termtext.Clean(m.rec.Key)
	return " " + m.st.Title.Render(head) + "  " + truncate(ident, max(1, m.w-width(head)-4))
}

// crumbLine names the flow's steps, the current one marked.
func (m *stepMachine) crumbLine() string {
	var parts []string
	at, name := 0, ""
	for i, c := range m.crumbs {
		part := c.name
		if slices.Contains(c.steps, m.step) {
			at, name = i+1, c.name
			part = m.st.Bold.Render("[" + part + "]")
		}
		parts = append(parts, part)
	}
	line := " " + strings.Join(parts, " › ") + fmt.Sprintf("   step %d of %d", at, len(m.crumbs))
	if width(line) > m.w {
		line = " " + fmt.Sprintf("step %d of %d: %s", at, len(m.crumbs), name)
	}
	return m.st.Muted.Render(truncate(line, m.w))
}

// field lays out a labelled value, wrapping the value.
func (m *stepMachine) field(out *[]string, label, value string) {
	const labelW = 12
	vw := max(1, m.w-labelW-3)
	for i, l := range wrap(value, vw) {
		if i == 0 {
			*out = append(*out, " "+m.st.Muted.Render(pad(label, labelW))+" "+l)
		} else {
			*out = append(*out, " "+strings.Repeat(" ", labelW)+" "+l)
		}
	}
}

// heading is a title, wrapped to the width.
func (m *stepMachine) heading(text string) []string {
	var out []string
	m.para(&out, text, m.st.Title.Render)
	return out
}

// para adds wrapped text, indented by one space and styled.
func (m *stepMachine) para(out *[]string, text string, render func(...string) string) {
	*out = append(*out, indented(text, max(1, m.w-2), " ", render)...)
}

// typedReason is the reason as it will be recorded.
func (m *stepMachine) typedReason() string { return strings.TrimSpace(m.reason.Value()) }

// subject names the record and the version the operator saw.
func (m *stepMachine) subject() string {
	return "operation " + strconv.FormatInt(m.rec.ID, 10) + ", version " + strconv.FormatInt(m.rec.Version, 10) + " as you saw it"
}

// confirmPrompt is the confirmation's question, pinned under what it
// confirms, or the wait for the database.
func (m *stepMachine) confirmPrompt() []string {
	out := []string{""}
	if m.step == stepApplying {
		return append(out, " "+spinFrames[m.frame]+" asking the database…")
	}
	if m.typedConfirm() {
		m.para(&out, m.page.typed, m.st.Stuck.Render)
		return append(out, " "+m.typed.View())
	}
	return append(out, " "+m.st.Bold.Render("Apply?")+" y yes · "+m.st.Bold.Render("N no")+m.st.Muted.Render(" (enter and esc are no)"))
}

// doneLines are what a successful write shows first: what succeeded,
// the record's state now (when now is not empty), the audit record.
func (m *stepMachine) doneLines(what, now string) []string {
	out := []string{" " + m.st.Completed.Render("✓ Done: "+what), ""}
	if now != "" && m.res.State != "" {
		m.field(&out, "the record", "now "+now+" · version "+strconv.FormatInt(m.res.Version, 10))
	}
	m.field(&out, "audit", "record "+termtext.Clean(m.res.AuditRef())+", committed")
	return out
}

// resultView tells what the write did: done, refused (and what changed),
// or no answer.
func (m *stepMachine) resultView() []string {
	var out []string
	r := m.res
	var refused *reconcile.RefusedError
	switch {
	case m.err == nil:
		return m.page.text
	case errors.As(m.err, &refused):
		m.para(&out, "✗ Refused: "+termtext.Clean(refused.Message), m.st.Error.Render)
		out = append(out, "")
		m.field(&out, "audit", "record "+termtext.Clean(r.AuditRef())+": the refusal is audited; this attempt changed nothing")
		if errors.Is(m.err, reconcile.ErrChanged) {
			out = append(out, "", " "+m.st.Title.Render("Changed since you looked"))
			out = append(out, m.changedLines()...)
		}
	default:
		what := "decision"
		if m.reveals {
			what = "reveal"
		}
		out = append(out, " "+m.st.Error.Render("✗ The database did not answer the "+what), "")
		m.para(&out, plainError(m.err), m.st.Error.Render)
		out = append(out, "")
		if m.reveals {
			m.para(&out, "Nothing was shown, and no record changed. Its audit record may have committed "+
				"(h on the record lists its audit history); reveal again to see it.", nil)
			return out
		}
		out = append(out, m.checkLines()...)
	}
	return out
}

// backToText is where enter on the result goes, as its key says.
func (m *stepMachine) backToText() string {
	if m.backTo == "" {
		return "the record"
	}
	return m.backTo
}

// checkLines tell whether the decision the database did not answer was
// applied, from the record read again: applied when a decision with the
// reason it carried, new since the operator looked, is on the record (its
// audit record named); not applied when the record is at the version the
// decision expected, or changed since without it.
func (m *stepMachine) checkLines() []string {
	var out []string
	if m.checked == nil {
		switch {
		case m.checking:
			out = append(out, " "+spinFrames[m.frame]+" reading the record again to find out whether it was applied…")
		case m.checkErr != nil:
			m.para(&out, "✗ Could not read the record again: "+plainError(m.checkErr), m.st.Error.Render)
			out = append(out, "")
			m.para(&out, "It may or may not have been applied: the record is read again the moment the database answers.", nil)
		}
		return out
	}
	was, now := m.rec, *m.checked
	read := "read at " + clock(now.DBTime) + " UTC"
	if dec, ok := m.sentDecision(now); ok {
		out = append(out, " "+m.st.Completed.Render("✓ Applied: the record shows this decision"), "")
		m.field(&out, "the record", "now "+stateText(now.State)+" · version "+strconv.FormatInt(now.Version, 10)+", "+read)
		m.field(&out, "audit", "record "+termtext.Clean(now.Tenant)+"#"+strconv.FormatInt(dec.AuditSeq, 10)+", committed")
		m.field(&out, "decided", decisionText(&now, dec))
	} else if now.Version == was.Version {
		out = append(out, " "+m.st.Released.Render("○ Not applied: the record is as you saw it"), "")
		m.field(&out, "the record", stateText(now.State)+" · version "+strconv.FormatInt(now.Version, 10)+", "+read)
		m.field(&out, "audit", "no record of this decision")
		out = append(out, "")
		m.para(&out, "Nothing changed: go back to "+m.backToText()+" (enter) and decide again.", m.st.Muted.Render)
	} else {
		out = append(out, " "+m.st.Error.Render("✗ Not applied: the record changed since you looked, without this decision"), "")
		out = append(out, m.diffLines(was, now)...)
		out = append(out, "")
		m.para(&out, "Go back to "+m.backToText()+" (enter) and decide again on what it is now.", m.st.Muted.Render)
	}
	if m.checking {
		out = append(out, "", " "+spinFrames[m.frame]+" reading it again…")
	}
	return out
}

// verdict says in a few words what the record read again tells of a
// decision the database did not answer; "" while it cannot tell.
func (m *stepMachine) verdict() string {
	if !m.ambiguous() || m.checked == nil {
		return ""
	}
	now := *m.checked
	if dec, ok := m.sentDecision(now); ok {
		return "applied, audit record " + termtext.Clean(now.Tenant) + "#" + strconv.FormatInt(dec.AuditSeq, 10)
	}
	if now.Version == m.rec.Version {
		return "not applied, the record is as you saw it"
	}
	return "not applied, the record changed since you looked"
}

// sentDecision is the decision the write carried, as the record read
// again has it: one the operator had not seen, with the reason sent.
func (m *stepMachine) sentDecision(now readmodel.Detail) (readmodel.Decision, bool) {
	for i := len(now.Decisions) - 1; i >= 0; i-- {
		d := now.Decisions[i]
		seen := slices.ContainsFunc(m.rec.Decisions, func(o readmodel.Decision) bool { return o.AuditSeq == d.AuditSeq })
		if !seen && d.Reason == m.sent {
			return d, true
		}
	}
	return readmodel.Decision{}, false
}

// changedLines compare the record as the operator saw it with the
// record now.
func (m *stepMachine) changedLines() []string {
	var out []string
	switch {
	case m.refetching:
		return []string{" " + spinFrames[m.frame] + " reading the record again…"}
	case m.refetchErr != nil:
		return []string{" " + m.st.Error.Render(truncate("✗ could not read it again: "+plainError(m.refetchErr), m.w-2))}
	case m.nowRec == nil:
		return nil
	}
	out = m.diffLines(m.rec, *m.nowRec)
	out = append(out, "")
	m.para(&out, "Go back to "+m.backToText()+" (enter) and decide again on what it is now.", m.st.Muted.Render)
	return out
}

// diffLines are what changed from was to now.
func (m *stepMachine) diffLines(was, now readmodel.Detail) []string {
	var out []string
	m.field(&out, "state", stateText(was.State)+" → "+stateText(now.State))
	m.field(&out, "version", strconv.FormatInt(was.Version, 10)+" → "+strconv.FormatInt(now.Version, 10))
	if was.Owner != now.Owner || was.Attempt != now.Attempt {
		m.field(&out, "owner", orDash(termtext.Clean(was.Owner))+" (attempt "+strconv.Itoa(was.Attempt)+") → "+
			orDash(termtext.Clean(now.Owner))+" (attempt "+strconv.Itoa(now.Attempt)+")")
	}
	if was.ResultRef != now.ResultRef {
		m.field(&out, "result ref", orDash(termtext.Clean(was.ResultRef))+" → "+orDash(termtext.Clean(now.ResultRef)))
	}
	if n := len(now.Decisions); n > len(was.Decisions) {
		m.field(&out, "decided", decisionText(&now, now.Decisions[n-1]))
	}
	return out
}
