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

// flowStep is one step of a flow: what it shows, which keys it offers,
// and how it goes on.
type flowStep struct {
	// input is the step's text input, nil when it has none; a step with
	// one takes every key.
	input func() *textinput.Model
	// enter runs when the operator arrives (nil: focus the input).
	enter func() tea.Cmd
	// view is the step's text, which scrolls when it is longer than the
	// screen; pin is what stays under it (a prompt and its input).
	view func() []string
	pin  func() []string
	// keys enables and words the step's keys; the machine disabled the
	// flow's keys first.
	keys func(k *KeyMap)
	// key handles the step's own keys and reports whether it did; enter
	// (Next or Accept) goes to submit.
	key    func(msg tea.KeyMsg) (tea.Cmd, bool)
	submit func() tea.Cmd
}

// crumb is one name of a flow's breadcrumbs and the steps it covers.
type crumb struct {
	name  string
	steps []step
}

// applied is what a flow's write answered: the audit record, and what a
// reveal read (its flow's own type), handed to onApplied.
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

// spinFrames animate what is waiting on the database or the provider.
var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// flow is the step machine every flow on a record runs on: its steps in
// order and the way back, the reason, a confirmation that defaults to No
// (typed where a flow asks for it), the write, its answer, and what
// changed when the database refused a record that changed since. A flow
// (reconcileFlow, ackFlow, revealFlow) embeds it and fills in its steps
// and hooks when it is built; every step shows the record as the detail
// showed it.
type flow struct {
	deps
	navigator
	w, h int
	sid  screenID
	dec  Decider

	// Filled in by the flow.
	what   func() string // the title's start: "Reconcile operation "
	crumbs []crumb
	steps  map[step]*flowStep
	first  step
	inputs []*textinput.Model // every input, to blur and size
	// confirmHead is the confirmation's body above its prompt, and the
	// body while the write is under way.
	confirmHead func() []string
	// typedNeeded tells whether the confirmation is typed rather than
	// y/N: the record's operation id, which typedPrompt asks for.
	typedNeeded func() bool
	typedPrompt func() string
	// write builds the flow's write as it is to run now.
	write func() func(ctx context.Context) (applied, error)
	// reveals: the write changes no record, only audits a reveal. esc
	// while it is under way gives up on it (a large value over a slow
	// link), and when the database does not answer, the screen says
	// nothing was shown rather than that a change may have been applied.
	reveals bool
	// done says what succeeded; stateLine shows the record's new state;
	// doneMore adds lines after the audit record.
	done      func() string
	stateLine bool
	// resultState words the record's state after the write (nil: the
	// state the database answered).
	resultState func() string
	doneMore    func() []string
	// onApplied keeps what a successful write returned; onLeave forgets
	// what the flow must not keep; resized lays out for a new size;
	// busyMore tells whether the flow waits on something else; onMsg
	// takes the flow's own messages.
	onApplied func(v any)
	onLeave   func()
	resized   func()
	busyMore  func() bool
	onMsg     func(msg tea.Msg) (tea.Cmd, bool)
	// begin starts what the flow does at once (asking the provider);
	// self is the screen the flow is, to go on the stack.
	begin func(n flowNav) tea.Cmd
	self  screen
	// needsPending: the flow decides on a pending record, so one read
	// from a list that is no longer pending opens nothing.
	needsPending bool
	pending      flowNav
	// back names where the flow returns to ("the record", "the list").
	backTo string

	// titled is the whole title of a flow that is not on one record (a
	// bulk reconciliation); nil for the record's.
	titled func() string

	rec      readmodel.Detail
	step     step
	trail    []step // the steps behind, for esc
	seq      int    // numbers every request of the flow
	frame    int
	spin     bool // a spinner frame is scheduled
	reason   textinput.Model
	typed    textinput.Model
	inputErr string

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
}

// newFlow is a flow's machine with the steps every flow ends with: the
// reason, the confirmation, the write under way and its result.
func newFlow(d deps, sid screenID, dec Decider) flow {
	f := flow{deps: d, sid: sid, dec: dec, steps: map[step]*flowStep{}}
	f.reason = textInput(d.st, "", 500)
	f.typed = textInput(d.st, "", typedLimit)
	return f
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

// commonSteps adds the steps every flow ends with; afterReason goes on
// from the reason (to the confirmation, or straight to the write).
func (f *flow) commonSteps(afterReason func() tea.Cmd, reasonHead func() []string, acceptReason string) {
	f.steps[stepReason] = &flowStep{
		input: func() *textinput.Model { return &f.reason },
		view:  reasonHead,
		pin: func() []string {
			var out []string
			f.para(&out, "Reason (required; kept in the audit trail with your role):", nil)
			return append(out, " "+f.reason.View())
		},
		keys: func(k *KeyMap) { f.inputKeys(k, acceptReason) },
		submit: func() tea.Cmd {
			if strings.TrimSpace(f.reason.Value()) == "" {
				f.inputErr = "a reason is required: it goes into the audit trail"
				return nil
			}
			return afterReason()
		},
	}
	f.steps[stepConfirm] = &flowStep{
		input: func() *textinput.Model {
			if f.typedConfirm() {
				return &f.typed
			}
			return nil
		},
		enter: func() tea.Cmd {
			if !f.typedConfirm() {
				return nil
			}
			f.typed.SetValue("")
			return f.typed.Focus()
		},
		view: func() []string { return f.confirmHead() },
		pin:  f.confirmPrompt,
		keys: func(k *KeyMap) {
			if f.typedConfirm() {
				k.Accept.SetEnabled(true)
				k.Accept.SetHelp("enter", "confirm")
				k.Cancel.SetEnabled(true)
				return
			}
			k.Yes.SetEnabled(true)
			k.No.SetEnabled(true)
			k.No.SetKeys("n", "N", "enter")
			k.No.SetHelp("n/enter", "no")
		},
		submit: func() tea.Cmd {
			if !f.typedConfirm() {
				// enter is No: the confirmation defaults to it.
				_, cmd := f.back()
				return cmd
			}
			if f.typed.Value() != strconv.FormatInt(f.rec.ID, 10) {
				f.inputErr = "that is not this record's operation id: nothing was done"
				f.typed.SetValue("")
				return nil
			}
			return f.apply()
		},
	}
	f.steps[stepApplying] = &flowStep{
		view: func() []string { return f.confirmHead() },
		pin:  f.confirmPrompt,
		keys: func(k *KeyMap) {
			k.Cancel.SetEnabled(f.reveals)
			k.Cancel.SetHelp("esc", "cancel the reveal")
		},
	}
	f.steps[stepResult] = &flowStep{
		view: f.resultView,
		keys: func(k *KeyMap) {
			k.Next.SetEnabled(!f.refetching)
			k.Next.SetHelp("enter", "back to "+f.backTo)
		},
		submit: func() tea.Cmd {
			f.goTo(navBack{})
			return nil
		},
	}
	f.steps[stepLoading] = &flowStep{view: f.loadingView}
	f.inputs = append(f.inputs, &f.reason, &f.typed)
}

// scrollsResult makes the result step of a flow that shows what it read
// (a revealed value) scroll through t, room lines high, once the write
// succeeded.
func (f *flow) scrollsResult(t *scrollText, room func() int) {
	result := f.steps[stepResult]
	resultKeys := result.keys
	result.keys = func(k *KeyMap) {
		resultKeys(k)
		if f.err == nil {
			t.enableScroll(k, room())
		}
	}
	result.key = func(msg tea.KeyMsg) (tea.Cmd, bool) {
		return nil, t.scrollKey(msg, f.keys, room())
	}
}

// resultRoom is how many lines a flow's result step has for what it read,
// below the title, the steps, what the write did and the title of what
// it read.
func (f *flow) resultRoom() int {
	head := 3 + 2                                                                               // the title, the steps, a blank line; done, a blank line
	head += len(wrap("record "+termtext.Clean(f.res.AuditRef())+", committed", max(1, f.w-15))) // the audit field
	head += 2                                                                                   // a blank line, the value's title
	return max(1, f.h-head)
}

// inputKeys are the keys of a step with a text input: enter goes on
// (accept says how), esc goes a step back or cancels at the first.
func (f *flow) inputKeys(k *KeyMap, accept string) {
	k.Accept.SetEnabled(true)
	k.Accept.SetHelp("enter", accept)
	k.Cancel.SetEnabled(true)
	if len(f.trail) == 0 {
		k.Cancel.SetHelp("esc", "cancel")
	}
}

func (f *flow) id() screenID         { return f.sid }
func (f *flow) Init() tea.Cmd        { return nil }
func (f *flow) current(seq int) bool { return seq == f.seq }
func (f *flow) asOf() time.Time      { return f.rec.DBTime }

// refresh does nothing: the flow works on the record as the operator
// saw it, and the status bar keeps that read's database time.
func (f *flow) refresh() tea.Cmd { return nil }

// open starts the flow, for a role that may decide: on the record a
// detail shows, at its first step, where begin does what the flow does
// first; or on a record of a list, read first.
func (f *flow) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	fn, ok := n.(flowNav)
	switch {
	case !ok || !at.perms.decide:
		return nil, nil, false
	case fn.rec != nil && at.active().id() == screenDetail:
		f.backTo = "the record"
		return at.pushed(f.self), f.start(fn, *fn.rec), true
	case fn.rec == nil && fn.id > 0 && at.active().id() == screenList:
		f.backTo = "the list"
		f.reset(readmodel.Detail{Row: readmodel.Row{ID: fn.id}})
		f.enter(stepLoading)
		f.seq++
		f.loadSeq, f.loadErr = f.seq, nil
		seq, id, src := f.seq, fn.id, f.f.src
		load := run(f.f, func(ctx context.Context) (readmodel.Detail, error) { return src.Get(ctx, id) },
			func(d readmodel.Detail, err error) tea.Msg { return loadMsg{seq: seq, d: d, err: err} })
		f.pending = fn
		return at.pushed(f.self), tea.Batch(load, f.spinner()), true
	}
	return nil, nil, false
}

// start begins the flow on rec at its first step.
func (f *flow) start(fn flowNav, rec readmodel.Detail) tea.Cmd {
	f.reset(rec)
	cmd := f.enter(f.first)
	if f.begin != nil {
		cmd = tea.Batch(cmd, f.begin(fn))
		f.updateKeys()
	}
	return cmd
}

// onLoad starts the flow on the record read for it; a record that is no
// longer pending, or could not be read, is said and nothing starts.
func (f *flow) onLoad(msg loadMsg) tea.Cmd {
	if msg.seq != f.loadSeq || f.step != stepLoading {
		return nil
	}
	switch {
	case msg.err != nil:
		f.loadErr = msg.err
		return nil
	case f.needsPending && !msg.d.Pending():
		f.rec = msg.d
		f.loadErr = fmt.Errorf("operation %d is %s now: there is nothing to decide", msg.d.ID, stateText(msg.d.State))
		return nil
	}
	return f.start(f.pending, msg.d)
}

// loadingView is the wait for the record opened from a list.
func (f *flow) loadingView() []string {
	var out []string
	switch {
	case f.loadErr != nil:
		f.para(&out, "✗ "+termtext.Clean(f.loadErr.Error()), f.st.Error.Render)
		out = append(out, "")
		f.para(&out, "esc goes back to the list.", f.st.Muted.Render)
	default:
		out = append(out, " "+spinFrames[f.frame]+" reading the record…")
	}
	return out
}

// reset starts the machine over on rec, at the flow's first step.
func (f *flow) reset(rec readmodel.Detail) {
	f.leave()
	f.rec = rec
	f.trail = nil
	f.inputErr = ""
	for _, in := range f.inputs {
		in.SetValue("")
		in.Blur()
	}
	f.res, f.err, f.nowRec, f.refetchErr, f.refetching = reconcile.Result{}, nil, nil, nil, false
	f.step = f.first
}

// capturing: text inputs take every key, and so does the wait for the
// database's answer (q must not leave before it arrives).
func (f *flow) capturing() bool {
	if f.step == stepApplying {
		return true
	}
	st := f.steps[f.step]
	return st != nil && st.input != nil && st.input() != nil
}

// typedConfirm tells whether the confirmation is typed.
func (f *flow) typedConfirm() bool { return f.typedNeeded != nil && f.typedNeeded() }

func (f *flow) SetSize(w, h int) {
	f.w, f.h = w, h
	if f.resized != nil {
		f.resized()
	}
	for _, in := range f.inputs {
		in.Width = max(1, w-8)
	}
	f.typed.Width = typedLimit + 1
	// What fitted may scroll now, and the other way round.
	f.updateKeys()
}

// leave forgets what the flow must not keep once the operator leaves it:
// a value being fetched or shown, the reason typed.
func (f *flow) leave() {
	if f.cancel != nil {
		f.cancel()
		f.cancel = nil
	}
	f.applySeq = 0 // an answer still on its way is dropped
	if f.onLeave != nil {
		f.onLeave()
	}
	f.reason.SetValue("")
	f.typed.SetValue("")
}

// spinner schedules the next frame unless one is scheduled.
func (f *flow) spinner() tea.Cmd {
	if f.spin || f.deps.after == nil {
		return nil
	}
	f.spin = true
	return f.deps.after(120*time.Millisecond, spinMsg{})
}

func (f *flow) busy() bool {
	return f.step == stepApplying || f.step == stepLoading && f.loadErr == nil || f.refetching ||
		f.busyMore != nil && f.busyMore()
}

// enter moves to step st, focusing its input.
func (f *flow) enter(st step) tea.Cmd {
	f.inputErr = ""
	for _, in := range f.inputs {
		in.Blur()
	}
	f.step = st
	f.offset = 0
	var cmd tea.Cmd
	if s := f.steps[st]; s != nil {
		switch {
		case s.enter != nil:
			cmd = s.enter()
		case s.input != nil:
			if in := s.input(); in != nil {
				cmd = in.Focus()
			}
		}
	}
	f.updateKeys()
	return cmd
}

// forward goes on to st, remembering where esc returns to.
func (f *flow) forward(st step) tea.Cmd {
	f.trail = append(f.trail, f.step)
	return f.enter(st)
}

// back handles esc: one step back. At the flow's first step, and once it
// is done, the root leaves it; while the database answers, nothing.
func (f *flow) back() (bool, tea.Cmd) {
	switch {
	case f.step == stepApplying:
		return true, nil
	case f.step == stepResult || len(f.trail) == 0:
		return false, nil
	}
	prev := f.trail[len(f.trail)-1]
	f.trail = f.trail[:len(f.trail)-1]
	return true, f.enter(prev)
}

// backLabels word esc and q for the step.
func (f *flow) backLabels() (esc, q string) {
	switch {
	case f.step == stepResult:
		return "back", "back"
	case len(f.trail) == 0:
		return "cancel", "cancel"
	}
	return "previous step", "cancel"
}

func (f *flow) updateKeys() {
	k := &f.keys
	for _, b := range []*key.Binding{&k.Next, &k.Yes, &k.No, &k.Override, &k.AskAgain, &k.Choose, &k.EditRef, &k.Up, &k.Down,
		&k.Top, &k.Bottom, &k.NextPage, &k.PrevPage, &k.Accept, &k.Cancel} {
		b.SetEnabled(false)
	}
	k.Next.SetHelp("enter", "next")
	k.Cancel.SetHelp("esc", "previous step")
	if s := f.steps[f.step]; s != nil && s.keys != nil {
		s.keys(k)
	}
	_, _, more := f.layout()
	k.ScrollDown.SetEnabled(more)
	k.ScrollUp.SetEnabled(more)
}

// ShortHelp implements help.KeyMap.
func (f *flow) ShortHelp() []key.Binding {
	k := f.keys
	scroll := combined("pgdn/pgup", "scroll", k.ScrollDown, k.ScrollUp)
	if f.capturing() {
		return []key.Binding{k.Accept, k.Cancel, scroll, k.ForceQuit}
	}
	if f.step == stepResult {
		return []key.Binding{k.Next, combined("↑/↓", "scroll", k.Up, k.Down), combined("pgdn/pgup", "page", k.NextPage, k.PrevPage), scroll}
	}
	return []key.Binding{combined("↑/↓", "choose", k.Up, k.Down), k.Next, k.Yes, k.No, k.Override, k.AskAgain, k.EditRef, scroll}
}

// FullHelp implements help.KeyMap.
func (f *flow) FullHelp() [][]key.Binding {
	k := f.keys
	return [][]key.Binding{{k.Next, k.Accept, k.Cancel, k.Up, k.Down, k.Choose}, {k.Yes, k.No, k.Override, k.AskAgain, k.EditRef},
		{k.ScrollDown, k.ScrollUp}}
}

func (f *flow) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case applyMsg:
		cmd = f.onApply(msg)
	case loadMsg:
		cmd = f.onLoad(msg)
	case refetchMsg:
		if msg.seq == f.refetchSeq {
			f.refetching = false
			if msg.err != nil {
				f.refetchErr = msg.err
			} else {
				d := msg.d
				f.nowRec = &d
			}
		}
	case spinMsg:
		f.spin = false
		if f.busy() {
			f.frame = (f.frame + 1) % len(spinFrames)
			cmd = f.spinner()
		}
	case tea.KeyMsg:
		cmd = f.key(msg)
	default:
		handled := false
		if f.onMsg != nil {
			cmd, handled = f.onMsg(msg)
		}
		if !handled {
			cmd = f.updateInput(msg)
		}
	}
	f.updateKeys()
	return f, cmd
}

// key handles the keys the root leaves to the flow.
func (f *flow) key(msg tea.KeyMsg) tea.Cmd {
	k := f.keys
	st := f.steps[f.step]
	switch {
	case key.Matches(msg, k.ScrollDown):
		f.scroll(+1)
		return nil
	case key.Matches(msg, k.ScrollUp):
		f.scroll(-1)
		return nil
	}
	if f.capturing() {
		switch {
		case f.step == stepApplying:
			if key.Matches(msg, k.Cancel) {
				return f.abandon()
			}
			return nil
		case key.Matches(msg, k.Cancel):
			if handled, cmd := f.back(); handled {
				return cmd
			}
			f.goTo(navBack{})
			return nil
		case key.Matches(msg, k.Accept):
			return f.submit()
		}
		return f.updateInput(msg)
	}
	if st != nil && st.key != nil {
		if cmd, ok := st.key(msg); ok {
			return cmd
		}
	}
	switch {
	case key.Matches(msg, k.Yes):
		return f.apply()
	case key.Matches(msg, k.No):
		_, cmd := f.back()
		return cmd
	case key.Matches(msg, k.Next):
		return f.submit()
	}
	return nil
}

func (f *flow) updateInput(msg tea.Msg) tea.Cmd {
	st := f.steps[f.step]
	if st == nil || st.input == nil {
		return nil
	}
	in := st.input()
	if in == nil {
		return nil
	}
	var cmd tea.Cmd
	*in, cmd = in.Update(msg)
	if _, ok := msg.(tea.KeyMsg); ok {
		f.inputErr = ""
	}
	return cmd
}

// submit completes the step: it checks what was entered and moves on.
func (f *flow) submit() tea.Cmd {
	if st := f.steps[f.step]; st != nil && st.submit != nil {
		return st.submit()
	}
	return nil
}

// apply sends the flow's write in a command.
func (f *flow) apply() tea.Cmd {
	if f.dec == nil {
		return nil
	}
	f.trail = append(f.trail, f.step)
	f.step = stepApplying
	f.seq++
	f.applySeq = f.seq
	seq, work := f.seq, f.write()
	fe := f.f
	if f.reveals {
		fe.ctx, f.cancel = context.WithCancel(fe.ctx)
	}
	cmd := run(fe, work, func(a applied, err error) tea.Msg {
		return applyMsg{seq: seq, res: a.res, value: a.value, err: err}
	})
	f.updateKeys()
	return tea.Batch(cmd, f.spinner())
}

func (f *flow) onApply(msg applyMsg) tea.Cmd {
	if msg.seq != f.applySeq || f.step != stepApplying {
		return nil
	}
	f.step = stepResult
	f.res, f.err = msg.res, msg.err
	if f.cancel != nil {
		f.cancel()
		f.cancel = nil
	}
	if msg.err == nil && f.onApplied != nil {
		f.onApplied(msg.value)
	}
	f.reason.SetValue("")
	if errors.Is(msg.err, reconcile.ErrChanged) {
		// Show what changed: read the record again.
		f.seq++
		f.refetchSeq, f.refetching, f.nowRec = f.seq, true, nil
		seq, id, src := f.seq, f.rec.ID, f.f.src
		return tea.Batch(run(f.f, func(ctx context.Context) (readmodel.Detail, error) { return src.Get(ctx, id) },
			func(d readmodel.Detail, err error) tea.Msg { return refetchMsg{seq: seq, d: d, err: err} }), f.spinner())
	}
	return nil
}

// abandon gives up on a write still under way (a reveal being fetched):
// its request is cancelled and the flow leaves at once. Its audit record
// may well have committed already (it commits before the value is read):
// the operator is told so.
func (f *flow) abandon() tea.Cmd {
	f.leave()
	f.step = f.first
	f.goTo(navBack{})
	return func() tea.Msg {
		return noteMsg("reveal cancelled, nothing shown; its audit record may be committed")
	}
}

// View renders the title, the steps and the current step's text, which
// scrolls when it is longer than the screen, above what is pinned under
// it and the error of what was entered.
func (f *flow) View() string {
	if f.w <= 0 || f.h <= 0 {
		return ""
	}
	body, tail, _ := f.layout()
	lines := append([]string{f.title(), f.crumbLine(), ""}, body...)
	lines = append(lines, tail...)
	if len(lines) > f.h {
		lines = lines[:f.h]
	}
	return strings.Join(lines, "\n")
}

// layout is the step's text as it fits (scrolled, with the position when
// it does not fit whole), what goes under it, and whether it scrolls.
func (f *flow) layout() (body, tail []string, scrolls bool) {
	st := f.steps[f.step]
	if st != nil && st.view != nil {
		body = st.view()
	}
	if st != nil && st.pin != nil {
		tail = st.pin()
	}
	if f.inputErr != "" {
		tail = append(tail, "")
		for _, l := range wrap("✗ "+f.inputErr, f.w-2) {
			tail = append(tail, " "+f.st.Error.Render(l))
		}
	}
	room := f.h - 3 - len(tail)
	if len(body) <= room || room < 2 {
		return body, tail, false
	}
	room-- // the position line
	off := min(max(0, f.offset), len(body)-room)
	more := fmt.Sprintf(" lines %d–%d of %d · pgdn/pgup scroll", off+1, off+room, len(body))
	return append(slices.Clip(body[off:off+room]), f.st.Muted.Render(truncate(more, f.w))), tail, true
}

// scroll pages the step's text by a screen (dir +1 or -1).
func (f *flow) scroll(dir int) {
	body, _, scrolls := f.layout()
	if !scrolls {
		return
	}
	room := len(body) - 1 // less the position line
	last := len(f.steps[f.step].view()) - room
	f.offset = min(max(0, min(f.offset, last)+dir*max(1, room-1)), last)
}

func (f *flow) title() string {
	if f.titled != nil {
		return f.titled()
	}
	head := f.what() + strconv.FormatInt(f.rec.ID, 10)
	ident := termtext.Clean(f.rec.Tenant) + " / " + termtext.Clean(f.rec.Tool) + " / " + termtext.Clean(f.rec.Key)
	return " " + f.st.Title.Render(head) + "  " + truncate(ident, max(1, f.w-width(head)-4))
}

// crumbLine names the flow's steps, the current one marked.
func (f *flow) crumbLine() string {
	var parts []string
	at, name := 0, ""
	for i, c := range f.crumbs {
		part := c.name
		if slices.Contains(c.steps, f.step) {
			at, name = i+1, c.name
			part = f.st.Bold.Render("[" + part + "]")
		}
		parts = append(parts, part)
	}
	line := " " + strings.Join(parts, " › ") + fmt.Sprintf("   step %d of %d", at, len(f.crumbs))
	if width(line) > f.w {
		line = " " + fmt.Sprintf("step %d of %d: %s", at, len(f.crumbs), name)
	}
	return f.st.Muted.Render(truncate(line, f.w))
}

// field lays out a labelled value, wrapping the value.
func (f *flow) field(out *[]string, label, value string) {
	const labelW = 12
	vw := max(1, f.w-labelW-3)
	for i, l := range wrap(value, vw) {
		if i == 0 {
			*out = append(*out, " "+f.st.Muted.Render(pad(label, labelW))+" "+l)
		} else {
			*out = append(*out, " "+strings.Repeat(" ", labelW)+" "+l)
		}
	}
}

// heading is a title, wrapped to the width.
func (f *flow) heading(text string) []string {
	var out []string
	f.para(&out, text, f.st.Title.Render)
	return out
}

// para adds wrapped text, indented by one space and styled.
func (f *flow) para(out *[]string, text string, render func(...string) string) {
	*out = append(*out, indented(text, max(1, f.w-2), " ", render)...)
}

// typedReason is the reason as it will be recorded.
func (f *flow) typedReason() string { return strings.TrimSpace(f.reason.Value()) }

// subject names the record and the version the operator saw.
func (f *flow) subject() string {
	return "operation " + strconv.FormatInt(f.rec.ID, 10) + ", version " + strconv.FormatInt(f.rec.Version, 10) + " as you saw it"
}

// confirmPrompt is the confirmation's question, pinned under what it
// confirms, or the wait for the database.
func (f *flow) confirmPrompt() []string {
	out := []string{""}
	if f.step == stepApplying {
		return append(out, " "+spinFrames[f.frame]+" asking the database…")
	}
	if f.typedConfirm() {
		f.para(&out, f.typedPrompt(), f.st.Stuck.Render)
		return append(out, " "+f.typed.View())
	}
	return append(out, " "+f.st.Bold.Render("Apply?")+" y yes · "+f.st.Bold.Render("N no")+f.st.Muted.Render(" (enter and esc are no)"))
}

// resultView tells what the write did: done, refused (and what changed),
// or no answer.
func (f *flow) resultView() []string {
	var out []string
	r := f.res
	var refused *reconcile.RefusedError
	switch {
	case f.err == nil:
		out = append(out, " "+f.st.Completed.Render("✓ Done: "+f.done()), "")
		if f.stateLine && r.State != "" {
			now := stateText(readmodel.State(r.State))
			if f.resultState != nil {
				now = f.resultState()
			}
			f.field(&out, "the record", "now "+now+" · version "+strconv.FormatInt(r.Version, 10))
		}
		f.field(&out, "audit", "record "+termtext.Clean(r.AuditRef())+", committed")
		if f.doneMore != nil {
			out = append(out, f.doneMore()...)
		}
	case errors.As(f.err, &refused):
		f.para(&out, "✗ Refused: "+termtext.Clean(refused.Message), f.st.Error.Render)
		out = append(out, "")
		f.field(&out, "audit", "record "+termtext.Clean(r.AuditRef())+": the refusal is audited; this attempt changed nothing")
		if errors.Is(f.err, reconcile.ErrChanged) {
			out = append(out, "", " "+f.st.Title.Render("Changed since you looked"))
			out = append(out, f.changedLines()...)
		}
	default:
		what, more := "decision", "It may or may not have been applied: the record is read again when you go back."
		if f.reveals {
			what, more = "reveal", "Nothing was shown, and no record changed. Its audit record may have committed "+
				"(h on the record lists its audit history); reveal again to see it."
		}
		out = append(out, " "+f.st.Error.Render("✗ The database did not answer the "+what), "")
		f.para(&out, termtext.Clean(f.err.Error()), f.st.Error.Render)
		out = append(out, "")
		f.para(&out, more, nil)
	}
	return out
}

// changedLines compare the record as the operator saw it with the
// record now.
func (f *flow) changedLines() []string {
	var out []string
	switch {
	case f.refetching:
		return []string{" " + spinFrames[f.frame] + " reading the record again…"}
	case f.refetchErr != nil:
		return []string{" " + f.st.Error.Render(truncate("✗ could not read it again: "+termtext.Clean(f.refetchErr.Error()), f.w-2))}
	case f.nowRec == nil:
		return nil
	}
	was, now := f.rec, *f.nowRec
	f.field(&out, "state", stateText(was.State)+" → "+stateText(now.State))
	f.field(&out, "version", strconv.FormatInt(was.Version, 10)+" → "+strconv.FormatInt(now.Version, 10))
	if was.Owner != now.Owner || was.Attempt != now.Attempt {
		f.field(&out, "owner", orDash(termtext.Clean(was.Owner))+" (attempt "+strconv.Itoa(was.Attempt)+") → "+
			orDash(termtext.Clean(now.Owner))+" (attempt "+strconv.Itoa(now.Attempt)+")")
	}
	if was.ResultRef != now.ResultRef {
		f.field(&out, "result ref", orDash(termtext.Clean(was.ResultRef))+" → "+orDash(termtext.Clean(now.ResultRef)))
	}
	if n := len(now.Decisions); n > len(was.Decisions) {
		f.field(&out, "decided", decisionText(&now, now.Decisions[n-1]))
	}
	out = append(out, "")
	f.para(&out, "Go back to the record (enter) and decide again on what it is now.", f.st.Muted.Render)
	return out
}
