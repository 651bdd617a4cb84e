package ui

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile"
)

// flowKind is what a flow on a record does.
type flowKind int

const (
	// flowReconcile decides the outcome of a pending record.
	flowReconcile flowKind = iota
	// flowAck acknowledges its unreviewed conflicting attempts.
	flowAck
	// flowReveal shows its stored result, flowRevealIntent its stored
	// intent (the canonical request).
	flowReveal
	flowRevealIntent
)

// reveals tells whether the flow reveals a stored value.
func (k flowKind) reveals() bool { return k == flowReveal || k == flowRevealIntent }

// field is the stored value a reveal shows.
func (k flowKind) field() reconcile.Field {
	if k == flowRevealIntent {
		return reconcile.FieldIntent
	}
	return reconcile.FieldResult
}

// step is where the operator is in a flow.
type step int

const (
	stepContext step = iota
	stepEvidence
	stepDecision
	stepReference // completed: the provider's reference
	stepSnooze    // defer: how long until a reminder
	stepConsequence
	stepReason
	stepConfirm
	stepApplying
	stepResult
)

// askTimeout bounds a lookup; the lookup's own timeout (the catalog's,
// 5s by default) is usually shorter.
const askTimeout = 30 * time.Second

// confirmChars is how many of the key's last characters releasing an
// external effect of unknown outcome asks the operator to type.
const confirmChars = 4

// spinFrames animate what is waiting on the database or the provider.
var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// decisionInfo says what each decision is, in the operator's words.
var decisionInfo = map[reconcile.Decision]struct{ name, gist string }{
	reconcile.Completed:   {"completed", "the effect happened: retries replay its result reference"},
	reconcile.NotExecuted: {"not executed", "it did not happen: release it; the next retry executes again"},
	reconcile.Failed:      {"failed", "it failed for good: retries get the rejection"},
	reconcile.Defer:       {"defer", "not decidable yet: a note and a reminder, nothing changes"},
}

// Flow messages. They carry the request's sequence number: an answer to
// an older request (another record's lookup, say) is dropped.
type (
	askMsg struct {
		seq    int
		answer reconcile.Answer
		ok     bool
		err    error // the lookup panicked
	}
	applyMsg struct {
		seq   int
		res   reconcile.Result
		value reconcile.Revealed
		err   error
	}
	refetchMsg struct {
		seq int
		d   storeview.Detail
		err error
	}
	spinMsg struct{}
)

// decideScreen is the guided flow over one record: reconcile (context,
// evidence, decision, what happens next, reason, confirm), acknowledge
// conflicts (reason, confirm) or reveal the result (reason). Every step
// shows the record as the detail showed it: the decision expects that
// version, and the database refuses it if the record changed since.
type decideScreen struct {
	deps
	navigator
	w, h int
	dec  Decider
	// now is this machine's clock, for when the provider was asked.
	now func() time.Time

	kind    flowKind
	rec     storeview.Detail
	runbook string
	step    step
	trail   []step // the steps behind, for esc
	seq     int    // numbers every request of every flow
	frame   int
	spin    bool // a spinner frame is scheduled

	// Evidence.
	askSeq   int
	asking   bool
	answer   *reconcile.Answer
	noLookup bool
	askErr   error
	askedAt  time.Time

	// Decision.
	choice   int // in reconcile.Decisions
	ref      textinput.Model
	snooze   textinput.Model
	snoozeD  time.Duration
	override bool
	reason   textinput.Model
	typed    textinput.Model
	inputErr string

	// Outcome.
	applySeq int
	res      reconcile.Result
	err      error
	revealed revealedValue
	// cancelReveal cancels the reveal being fetched: esc leaves at once
	// rather than wait for a large value.
	cancelReveal context.CancelFunc
	refetchSeq   int
	refetching   bool
	nowRec       *storeview.Detail // the record read again after a refusal
	refetchErr   error
}

func newDecide(d deps, dec Decider) *decideScreen {
	s := &decideScreen{deps: d, dec: dec, now: time.Now}
	s.ref = s.input("reference", 200)
	s.snooze = s.input("such as 30m, 2h, 1d", 20)
	s.reason = s.input("", 500)
	s.typed = s.input("", confirmChars*4)
	s.updateKeys()
	return s
}

func (s *decideScreen) input(placeholder string, limit int) textinput.Model {
	return textInput(s.st, placeholder, limit)
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

func (s *decideScreen) id() screenID         { return screenDecide }
func (s *decideScreen) Init() tea.Cmd        { return nil }
func (s *decideScreen) current(seq int) bool { return seq == s.seq }
func (s *decideScreen) asOf() time.Time      { return s.rec.DBTime }

// refresh does nothing: the flow works on the record as the operator
// saw it, and the status bar keeps that read's database time.
func (s *decideScreen) refresh() tea.Cmd { return nil }

// capturing: text inputs take every key, and so does the wait for the
// database's answer (q must not leave before it arrives).
func (s *decideScreen) capturing() bool {
	switch s.step {
	case stepReference, stepSnooze, stepReason, stepApplying:
		return true
	case stepConfirm:
		return s.typedConfirm()
	}
	return false
}

func (s *decideScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	s.layOutRevealed()
	for _, in := range []*textinput.Model{&s.ref, &s.snooze, &s.reason, &s.typed} {
		in.Width = max(1, w-8)
	}
	s.typed.Width = confirmChars * 2
}

// start opens a flow on rec. A reconcile flow asks the provider at once,
// so the answer is usually there when the operator reaches the evidence.
func (s *decideScreen) start(k flowKind, rec storeview.Detail) tea.Cmd {
	s.leave()
	s.kind, s.rec = k, rec
	s.trail = nil
	s.answer, s.noLookup, s.askErr, s.asking = nil, false, nil, false
	s.choice, s.override, s.snoozeD, s.inputErr = len(reconcile.Decisions)-1, false, 0, ""
	for _, in := range []*textinput.Model{&s.ref, &s.snooze, &s.reason, &s.typed} {
		in.SetValue("")
		in.Blur()
	}
	s.snooze.SetValue("2h")
	s.res, s.err, s.nowRec, s.refetchErr, s.refetching = reconcile.Result{}, nil, nil, nil, false
	s.runbook = ""
	var cmd tea.Cmd
	switch k {
	case flowReconcile:
		if s.dec != nil {
			s.runbook = s.dec.Runbook(rec.Tool)
		}
		s.step = stepContext
		cmd = s.ask()
	default:
		cmd = s.enter(stepReason)
	}
	s.updateKeys()
	return cmd
}

// leave forgets what the flow must not keep once the operator leaves it:
// a revealed value (or one still being fetched), the reason typed.
func (s *decideScreen) leave() {
	if s.cancelReveal != nil {
		s.cancelReveal()
		s.cancelReveal = nil
	}
	s.applySeq = 0 // an answer still on its way is dropped
	s.revealed.forget()
	s.reason.SetValue("")
	s.typed.SetValue("")
}

// ask runs the tool's lookup in a command.
func (s *decideScreen) ask() tea.Cmd {
	if s.dec == nil {
		return nil
	}
	s.seq++
	s.askSeq, s.asking = s.seq, true
	s.answer, s.askErr, s.noLookup = nil, nil, false
	seq, dec, rec := s.seq, s.dec, s.rec
	f := s.f
	f.timeout = max(f.timeout, askTimeout)
	type asked struct {
		a  reconcile.Answer
		ok bool
	}
	return tea.Batch(run(f, func(ctx context.Context) (asked, error) {
		a, ok := dec.Ask(ctx, rec.Tenant, rec.Tool, rec.Key)
		return asked{a, ok}, nil
	}, func(a asked, err error) tea.Msg {
		return askMsg{seq: seq, answer: a.a, ok: a.ok, err: err}
	}), s.spinner())
}

// spinner schedules the next frame unless one is scheduled.
func (s *decideScreen) spinner() tea.Cmd {
	if s.spin || s.deps.after == nil {
		return nil
	}
	s.spin = true
	return s.deps.after(120*time.Millisecond, spinMsg{})
}

func (s *decideScreen) busy() bool { return s.asking || s.step == stepApplying || s.refetching }

// decision is the decision chosen.
func (s *decideScreen) decision() reconcile.Decision { return reconcile.Decisions[s.choice] }

// live tells whether the record's lease had not expired when it was read.
func (s *decideScreen) live() bool {
	return leaseRelevant(s.rec.Row) && s.rec.LeaseExpiresAt.After(s.rec.DBTime)
}

// verdict is the lookup's definite answer, if any.
func (s *decideScreen) verdict() reconcile.Lookup {
	if s.answer == nil {
		return reconcile.LookupNone
	}
	return s.answer.Evidence.Lookup
}

// contradicts tells whether the decision goes against the lookup's
// definite answer, which needs an explicit override: the rule the
// command applies too (reconcile.Evidence.Contradicts), confirming under
// another reference than the one found included.
func (s *decideScreen) contradicts() bool {
	if s.answer == nil {
		return false
	}
	return s.answer.Evidence.Contradicts(s.decision(), s.typedRef())
}

// typedRef is the reference the operator confirms completed with.
func (s *decideScreen) typedRef() string { return strings.TrimSpace(s.ref.Value()) }

// evidence is what the decision records as its evidence: the lookup's
// answer, or that none was gathered.
func (s *decideScreen) evidence() reconcile.Evidence {
	switch {
	case s.answer != nil:
		return s.answer.Evidence
	case s.noLookup:
		return reconcile.NoLookupEvidence(s.rec.Tool)
	}
	return reconcile.Evidence{}
}

// typedConfirm tells whether confirming needs the key's last characters:
// releasing an external effect whose outcome is unknown may repeat it.
func (s *decideScreen) typedConfirm() bool {
	return s.kind == flowReconcile && s.decision() == reconcile.NotExecuted && effectUnknown(s.rec.Effect)
}

// keyTail is what the typed confirmation must match.
func (s *decideScreen) keyTail() string {
	r := []rune(s.rec.Key)
	return string(r[max(0, len(r)-confirmChars):])
}

func effectUnknown(e string) bool { return normalEffect(e) == "external_unknown" }

func normalEffect(e string) string { return strings.ReplaceAll(e, "-", "_") }

// enter moves to step st, focusing its input.
func (s *decideScreen) enter(st step) tea.Cmd {
	s.inputErr = ""
	for _, in := range []*textinput.Model{&s.ref, &s.snooze, &s.reason, &s.typed} {
		in.Blur()
	}
	s.step = st
	var cmd tea.Cmd
	switch st {
	case stepReference:
		cmd = s.ref.Focus()
	case stepSnooze:
		cmd = s.snooze.Focus()
	case stepReason:
		cmd = s.reason.Focus()
	case stepConfirm:
		if s.typedConfirm() {
			s.typed.SetValue("")
			cmd = s.typed.Focus()
		}
	}
	s.updateKeys()
	return cmd
}

// forward goes on to st, remembering where esc returns to.
func (s *decideScreen) forward(st step) tea.Cmd {
	s.trail = append(s.trail, s.step)
	return s.enter(st)
}

// back handles esc: one step back. At the flow's first step, and once it
// is done, the root leaves it; while the database answers, nothing.
func (s *decideScreen) back() (bool, tea.Cmd) {
	switch {
	case s.step == stepApplying:
		return true, nil
	case s.step == stepResult || len(s.trail) == 0:
		return false, nil
	}
	prev := s.trail[len(s.trail)-1]
	s.trail = s.trail[:len(s.trail)-1]
	return true, s.enter(prev)
}

// backLabels word esc and q for the step.
func (s *decideScreen) backLabels() (esc, q string) {
	switch {
	case s.step == stepResult:
		return "back", "back"
	case len(s.trail) == 0:
		return "cancel", "cancel"
	}
	return "previous step", "cancel"
}

func (s *decideScreen) updateKeys() {
	k := &s.keys
	for _, b := range []*key.Binding{&k.Next, &k.Yes, &k.No, &k.Override, &k.AskAgain, &k.Choose, &k.Up, &k.Down,
		&k.Top, &k.Bottom, &k.NextPage, &k.PrevPage, &k.Accept, &k.Cancel} {
		b.SetEnabled(false)
	}
	k.Next.SetHelp("enter", "next")
	k.Cancel.SetHelp("esc", "previous step")
	switch s.step {
	case stepContext:
		k.Next.SetEnabled(true)
		k.Next.SetHelp("enter", "next: evidence")
	case stepEvidence:
		k.Next.SetEnabled(!s.asking)
		k.Next.SetHelp("enter", "next: decide")
		k.AskAgain.SetEnabled(!s.asking && !s.noLookup && s.dec != nil)
	case stepDecision:
		k.Up.SetEnabled(true)
		k.Down.SetEnabled(true)
		k.Choose.SetEnabled(true)
		k.Next.SetEnabled(true)
	case stepConsequence:
		k.Next.SetEnabled(!s.contradicts() || s.override)
		k.Override.SetEnabled(s.contradicts())
		if s.override {
			k.Override.SetHelp("o", "keep the lookup's answer")
		} else {
			k.Override.SetHelp("o", "override the lookup")
		}
	case stepReference, stepSnooze, stepReason:
		k.Accept.SetEnabled(true)
		k.Accept.SetHelp("enter", "next")
		if s.kind.reveals() && s.step == stepReason {
			k.Accept.SetHelp("enter", "reveal (audited)")
		}
		k.Cancel.SetEnabled(true)
		if len(s.trail) == 0 {
			k.Cancel.SetHelp("esc", "cancel")
		}
	case stepConfirm:
		if s.typedConfirm() {
			k.Accept.SetEnabled(true)
			k.Accept.SetHelp("enter", "confirm")
			k.Cancel.SetEnabled(true)
			break
		}
		k.Yes.SetEnabled(true)
		k.No.SetEnabled(true)
		k.No.SetKeys("n", "N", "enter")
		k.No.SetHelp("n/enter", "no")
	case stepApplying:
		// A reveal may fetch a large value over a slow link: esc
		// gives up on it.
		k.Cancel.SetEnabled(s.kind.reveals())
		k.Cancel.SetHelp("esc", "cancel the reveal")
	case stepResult:
		k.Next.SetEnabled(!s.refetching)
		k.Next.SetHelp("enter", "back to the record")
		if s.kind.reveals() && s.err == nil {
			s.revealed.enableScroll(k, s.revealRoom())
		}
	}
}

// ShortHelp implements help.KeyMap.
func (s *decideScreen) ShortHelp() []key.Binding {
	k := s.keys
	if s.capturing() {
		quit := k.ForceQuit
		return []key.Binding{k.Accept, k.Cancel, quit}
	}
	if s.step == stepResult {
		return []key.Binding{k.Next, combined("↑/↓", "scroll", k.Up, k.Down), combined("pgdn/pgup", "page", k.NextPage, k.PrevPage)}
	}
	return []key.Binding{combined("↑/↓", "choose", k.Up, k.Down), k.Next, k.Yes, k.No, k.Override, k.AskAgain}
}

// FullHelp implements help.KeyMap.
func (s *decideScreen) FullHelp() [][]key.Binding {
	k := s.keys
	return [][]key.Binding{{k.Next, k.Accept, k.Cancel, k.Up, k.Down, k.Choose}, {k.Yes, k.No, k.Override, k.AskAgain}}
}

func (s *decideScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case askMsg:
		s.onAsk(msg)
	case applyMsg:
		cmd = s.onApply(msg)
	case refetchMsg:
		if msg.seq == s.refetchSeq {
			s.refetching = false
			if msg.err != nil {
				s.refetchErr = msg.err
			} else {
				d := msg.d
				s.nowRec = &d
			}
		}
	case spinMsg:
		s.spin = false
		if s.busy() {
			s.frame = (s.frame + 1) % len(spinFrames)
			cmd = s.spinner()
		}
	case tea.KeyMsg:
		cmd = s.key(msg)
	default:
		cmd = s.updateInput(msg)
	}
	s.updateKeys()
	return s, cmd
}

func (s *decideScreen) onAsk(msg askMsg) {
	if msg.seq != s.askSeq {
		return // another flow's, or an earlier ask's
	}
	s.asking = false
	s.askedAt = s.now()
	switch {
	case msg.err != nil:
		s.askErr = msg.err
	case !msg.ok:
		s.noLookup = true
	default:
		a := msg.answer
		s.answer = &a
		if s.step <= stepEvidence {
			// The decision the evidence points at, to start from.
			switch a.Evidence.Lookup {
			case reconcile.LookupFound:
				s.choice = 0
			case reconcile.LookupNotFound:
				s.choice = 1
			}
		}
	}
}

// key handles the keys the root leaves to the flow.
func (s *decideScreen) key(msg tea.KeyMsg) tea.Cmd {
	k := s.keys
	if msg.Type == tea.KeyEnter && !k.Next.Enabled() {
		// enter has nothing to do yet: say why.
		switch {
		case s.step == stepEvidence && s.asking:
			s.inputErr = "waiting for the provider's answer"
		case s.step == stepConsequence:
			return s.submit()
		}
	}
	if s.capturing() {
		switch {
		case s.step == stepApplying:
			if key.Matches(msg, k.Cancel) {
				return s.abandonReveal()
			}
			return nil
		case key.Matches(msg, k.Cancel):
			if handled, cmd := s.back(); handled {
				return cmd
			}
			s.goTo(navMsg{to: screenPrevious})
			return nil
		case key.Matches(msg, k.Accept):
			return s.submit()
		}
		return s.updateInput(msg)
	}
	if s.step == stepResult && s.revealed.scrollKey(msg, k, s.revealRoom()) {
		return nil
	}
	switch {
	case key.Matches(msg, k.Up):
		s.choice = (s.choice + len(reconcile.Decisions) - 1) % len(reconcile.Decisions)
	case key.Matches(msg, k.Down):
		s.choice = (s.choice + 1) % len(reconcile.Decisions)
	case key.Matches(msg, k.Choose):
		n, _ := strconv.Atoi(msg.String())
		s.choice = n - 1
		return s.submit()
	case key.Matches(msg, k.AskAgain):
		return s.ask()
	case key.Matches(msg, k.Override):
		s.override = !s.override
	case key.Matches(msg, k.Yes):
		return s.apply()
	case key.Matches(msg, k.No):
		_, cmd := s.back()
		return cmd
	case key.Matches(msg, k.Next):
		return s.submit()
	}
	return nil
}

func (s *decideScreen) updateInput(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	switch s.step {
	case stepReference:
		s.ref, cmd = s.ref.Update(msg)
	case stepSnooze:
		s.snooze, cmd = s.snooze.Update(msg)
	case stepReason:
		s.reason, cmd = s.reason.Update(msg)
	case stepConfirm:
		s.typed, cmd = s.typed.Update(msg)
	default:
		return nil
	}
	if _, ok := msg.(tea.KeyMsg); ok {
		s.inputErr = ""
	}
	return cmd
}

// submit completes the step: it checks what was entered and moves on.
func (s *decideScreen) submit() tea.Cmd {
	switch s.step {
	case stepContext:
		return s.forward(stepEvidence)
	case stepEvidence:
		if s.asking {
			return nil
		}
		return s.forward(stepDecision)
	case stepDecision:
		switch s.decision() {
		case reconcile.Completed:
			if s.typedRef() == "" && s.answer != nil {
				s.ref.SetValue(s.answer.ResultRef)
				s.ref.CursorEnd()
			}
			return s.forward(stepReference)
		case reconcile.Defer:
			return s.forward(stepSnooze)
		}
		return s.forward(stepConsequence)
	case stepReference:
		if s.typedRef() == "" {
			s.inputErr = "confirming completed needs the provider's result reference: retries will replay it"
			return nil
		}
		return s.forward(stepConsequence)
	case stepSnooze:
		d, err := parseSnooze(s.snooze.Value())
		if err != nil {
			s.inputErr = err.Error()
			return nil
		}
		s.snoozeD = d
		return s.forward(stepConsequence)
	case stepConsequence:
		if s.contradicts() && !s.override {
			s.inputErr = "the decision contradicts the lookup: set the override (o) or go back (esc) and decide otherwise"
			return nil
		}
		return s.forward(stepReason)
	case stepReason:
		if strings.TrimSpace(s.reason.Value()) == "" {
			s.inputErr = "a reason is required: it goes into the audit trail"
			return nil
		}
		if s.kind.reveals() {
			return s.apply()
		}
		return s.forward(stepConfirm)
	case stepConfirm:
		if !s.typedConfirm() {
			// enter is No: the confirmation defaults to it.
			_, cmd := s.back()
			return cmd
		}
		if s.typed.Value() != s.keyTail() {
			s.inputErr = fmt.Sprintf("that is not the key's last %d characters: nothing was done", confirmChars)
			s.typed.SetValue("")
			return nil
		}
		return s.apply()
	case stepResult:
		s.goTo(navMsg{to: screenPrevious})
	}
	return nil
}

// parseSnooze reads a snooze duration: Go's (90m, 2h30m) or whole days
// (1d).
func parseSnooze(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	var d time.Duration
	var err error
	if n, ok := strings.CutSuffix(v, "d"); ok {
		var days int
		days, err = strconv.Atoi(n)
		d = time.Duration(days) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(v)
	}
	switch {
	case err != nil || v == "":
		return 0, fmt.Errorf("%q is not a duration: write 30m, 2h or 1d", v)
	case d < time.Minute:
		return 0, errors.New("snooze for a minute at least")
	case d > 90*24*time.Hour:
		return 0, errors.New("snooze for 90 days at most")
	}
	return d, nil
}

// params is the decision as the database gets it: on the version the
// operator saw, with the lookup's evidence, forced over a live lease
// (deferring needs no force) and overriding the lookup only when it
// contradicts the decision and the operator said so.
func (s *decideScreen) params() reconcile.DecideParams {
	d := s.decision()
	p := reconcile.DecideParams{
		OperationID: s.rec.ID, Decision: d, ExpectVersion: s.rec.Version,
		Reason:   strings.TrimSpace(s.reason.Value()),
		Force:    s.live() && d != reconcile.Defer,
		Override: s.override && s.contradicts(),
	}
	p.Evidence = s.evidence()
	switch d {
	case reconcile.Completed:
		p.ResultRef = s.typedRef()
	case reconcile.Defer:
		p.SnoozeUntil = s.snoozeUntil()
	}
	return p
}

// snoozeUntil is when a deferred record wants attention again, on the
// database clock of the read.
func (s *decideScreen) snoozeUntil() time.Time { return s.rec.DBTime.Add(s.snoozeD) }

// apply sends the flow's write in a command.
func (s *decideScreen) apply() tea.Cmd {
	if s.dec == nil {
		return nil
	}
	s.trail = append(s.trail, s.step)
	s.step = stepApplying
	s.seq++
	s.applySeq = s.seq
	seq, dec, rec, reason := s.seq, s.dec, s.rec, strings.TrimSpace(s.reason.Value())
	type applied struct {
		res   reconcile.Result
		value reconcile.Revealed
	}
	wrap := func(a applied, err error) tea.Msg { return applyMsg{seq: seq, res: a.res, value: a.value, err: err} }
	var cmd tea.Cmd
	switch s.kind {
	case flowReconcile:
		p := s.params()
		cmd = run(s.f, func(ctx context.Context) (applied, error) {
			r, err := dec.Decide(ctx, rec.Tool, p)
			return applied{res: r}, err
		}, wrap)
	case flowAck:
		// Only the conflicts the operator was shown: any that arrived
		// since stay unreviewed.
		var seen []int64
		for _, c := range rec.Conflicts {
			if !c.Reviewed {
				seen = append(seen, c.ID)
			}
		}
		cmd = run(s.f, func(ctx context.Context) (applied, error) {
			r, err := dec.AckConflicts(ctx, rec.ID, seen, reason)
			return applied{res: r}, err
		}, wrap)
	case flowReveal, flowRevealIntent:
		f := s.f
		f.ctx, s.cancelReveal = context.WithCancel(f.ctx)
		field := s.kind.field()
		cmd = run(f, func(ctx context.Context) (applied, error) {
			v, r, err := dec.RevealStart(ctx, rec.ID, field, reason, revealBytes)
			return applied{res: r, value: v}, err
		}, wrap)
	}
	s.updateKeys()
	return tea.Batch(cmd, s.spinner())
}

func (s *decideScreen) onApply(msg applyMsg) tea.Cmd {
	if msg.seq != s.applySeq || s.step != stepApplying {
		return nil
	}
	s.step = stepResult
	s.res, s.err = msg.res, msg.err
	if s.cancelReveal != nil {
		s.cancelReveal()
		s.cancelReveal = nil
	}
	if msg.err == nil && s.kind.reveals() {
		s.revealed.set(msg.value)
		s.layOutRevealed()
	}
	s.reason.SetValue("")
	if errors.Is(msg.err, reconcile.ErrChanged) {
		// Show what changed: read the record again.
		s.seq++
		s.refetchSeq, s.refetching, s.nowRec = s.seq, true, nil
		seq, id, src := s.seq, s.rec.ID, s.f.src
		return tea.Batch(run(s.f, func(ctx context.Context) (storeview.Detail, error) { return src.Get(ctx, id) },
			func(d storeview.Detail, err error) tea.Msg { return refetchMsg{seq: seq, d: d, err: err} }), s.spinner())
	}
	return nil
}

// View renders the title, the steps and the current step's body.
func (s *decideScreen) View() string {
	if s.w <= 0 || s.h <= 0 {
		return ""
	}
	lines := []string{s.title(), s.crumbs(), ""}
	lines = append(lines, s.body()...)
	if s.inputErr != "" {
		lines = append(lines, "")
		for _, l := range wrap("✗ "+s.inputErr, s.w-2) {
			lines = append(lines, " "+s.st.Error.Render(l))
		}
	}
	if len(lines) > s.h {
		lines = lines[:s.h]
	}
	return strings.Join(lines, "\n")
}

func (s *decideScreen) title() string {
	var what string
	switch s.kind {
	case flowReconcile:
		what = "Reconcile operation "
	case flowAck:
		what = "Acknowledge conflicts on operation "
	case flowReveal, flowRevealIntent:
		what = "Reveal the " + string(s.kind.field()) + " of operation "
	}
	head := what + strconv.FormatInt(s.rec.ID, 10)
	ident := Clean(s.rec.Tenant) + " / " + Clean(s.rec.Tool) + " / " + Clean(s.rec.Key)
	return " " + s.st.Title.Render(head) + "  " + truncate(ident, max(1, s.w-width(head)-4))
}

// crumbs names the flow's steps, the current one marked.
func (s *decideScreen) crumbs() string {
	type crumb struct {
		name  string
		steps []step
	}
	var all []crumb
	switch s.kind {
	case flowReconcile:
		all = []crumb{{"context", []step{stepContext}}, {"evidence", []step{stepEvidence}},
			{"decision", []step{stepDecision, stepReference, stepSnooze}}, {"what happens", []step{stepConsequence}},
			{"reason", []step{stepReason}}, {"confirm", []step{stepConfirm, stepApplying}}, {"done", []step{stepResult}}}
	case flowAck:
		all = []crumb{{"reason", []step{stepReason}}, {"confirm", []step{stepConfirm, stepApplying}}, {"done", []step{stepResult}}}
	case flowReveal, flowRevealIntent:
		all = []crumb{{"reason", []step{stepReason, stepApplying}}, {"result", []step{stepResult}}}
	}
	var parts []string
	at, name := 0, ""
	for i, c := range all {
		part := c.name
		for _, st := range c.steps {
			if st == s.step {
				at, name = i+1, c.name
				part = s.st.Bold.Render("[" + part + "]")
			}
		}
		parts = append(parts, part)
	}
	line := " " + strings.Join(parts, " › ") + fmt.Sprintf("   step %d of %d", at, len(all))
	if width(line) > s.w {
		line = " " + fmt.Sprintf("step %d of %d: %s", at, len(all), name)
	}
	return s.st.Muted.Render(truncate(line, s.w))
}

// fields lays out labelled values, wrapping the values.
func (s *decideScreen) field(out *[]string, label, value string) {
	const labelW = 12
	vw := max(1, s.w-labelW-3)
	for i, l := range wrap(value, vw) {
		if i == 0 {
			*out = append(*out, " "+s.st.Muted.Render(pad(label, labelW))+" "+l)
		} else {
			*out = append(*out, " "+strings.Repeat(" ", labelW)+" "+l)
		}
	}
}

// para adds wrapped text, indented by one space and styled.
func (s *decideScreen) para(out *[]string, text string, render func(...string) string) {
	for _, l := range wrap(text, max(1, s.w-2)) {
		if render != nil {
			l = render(l)
		}
		*out = append(*out, " "+l)
	}
}

func (s *decideScreen) body() []string {
	switch s.step {
	case stepContext:
		return s.contextView()
	case stepEvidence:
		return s.evidenceView()
	case stepDecision:
		return s.decisionView()
	case stepReference:
		return s.inputView("Decision: completed", "The provider's result reference, which retries will replay"+s.refSource()+":", s.ref)
	case stepSnooze:
		var out []string
		out = s.inputView("Decision: defer", "Remind again in (on the database clock; such as 30m, 2h, 1d):", s.snooze)
		if d, err := parseSnooze(s.snooze.Value()); err == nil {
			out = append(out, "", " "+s.st.Muted.Render("until "+stamp(s.rec.DBTime.Add(d), s.rec.DBTime)+" UTC ("+Relative(d)+")"))
		}
		return out
	case stepConsequence:
		return s.consequenceView()
	case stepReason:
		return s.reasonView()
	case stepConfirm, stepApplying:
		return s.confirmView()
	case stepResult:
		return s.resultView()
	}
	return nil
}

func (s *decideScreen) refSource() string {
	if s.answer != nil && s.answer.ResultRef != "" {
		return " (from the lookup; edit it if the provider shows another)"
	}
	return ""
}

// effectWords says what a tool's effect kind means for a decision.
func effectWords(e string) (kind, risk string) {
	switch normalEffect(e) {
	case "local":
		return "local: written in the same transaction as the record",
			"Low: a record still pending did not commit its effect."
	case "external_idempotent":
		return "external, idempotent: the provider deduplicates by the operation's key",
			"Low: a retry with the same key cannot make the provider act twice."
	case "external_unknown":
		return "external, outcome unknown: the provider may have acted though nobody saw its answer",
			"High: releasing a record whose effect happened makes the next retry act again; confirming one that never happened loses it. Check the provider before deciding."
	}
	return orDash(Clean(e)), "Unknown effect kind: check the catalog and the provider before deciding."
}

func (s *decideScreen) contextView() []string {
	r := s.rec
	now := r.DBTime
	var out []string
	out = append(out, " "+s.st.Title.Render("Context and risk")+s.st.Muted.Render("  (as read at "+clock(now)+" UTC)"), "")
	kind, risk := effectWords(r.Effect)
	s.field(&out, "tool", Clean(r.Tool)+" · version "+Clean(r.ToolVersion))
	s.field(&out, "effect", kind)
	s.field(&out, "state", stateText(r.State)+" · record version "+strconv.FormatInt(r.Version, 10))
	s.field(&out, "owner", orDash(Clean(r.Owner))+" · attempt "+strconv.Itoa(r.Attempt))
	lease := "-"
	switch {
	case s.live():
		lease = "live: " + orDash(Clean(r.Owner)) + " holds it until " + stamp(r.LeaseExpiresAt, now) + " (" + since(r.LeaseExpiresAt, now) + ")"
	case !r.LeaseExpiresAt.IsZero():
		lease = "expired " + ShortDuration(now.Sub(r.LeaseExpiresAt)) + " ago, at " + stamp(r.LeaseExpiresAt, now) + " (database clock)"
	}
	s.field(&out, "lease", lease)
	s.field(&out, "created", stamp(r.CreatedAt, now)+" ("+since(r.CreatedAt, now)+")")
	conflicts := "none"
	if n := len(r.Conflicts); n > 0 {
		conflicts = fmt.Sprintf("%d conflicting attempt%s (the key reused with another intent), %d unreviewed",
			n, plural(n), unreviewed(r.Conflicts))
	}
	s.field(&out, "conflicts", conflicts)
	if n := len(r.Decisions); n > 0 {
		last := r.Decisions[n-1]
		s.field(&out, "decided", decisionText(&r, last)+" ("+since(last.At, now)+")")
	}
	s.field(&out, "intent", "hidden · "+orDash(Clean(r.FingerprintTag))+" · i on the record reveals it")
	out = append(out, "")
	s.field(&out, "risk", risk)
	if s.live() {
		out = append(out, "")
		s.para(&out, "⚠ The lease is live: deciding needs force, and the decision is recorded as forced. If "+
			orDash(Clean(r.Owner))+" is still working, its late completion will be refused.", s.st.Stuck.Render)
	}
	return out
}

func (s *decideScreen) evidenceView() []string {
	var out []string
	out = append(out, " "+s.st.Title.Render("Evidence: the provider's lookup"), "")
	out = append(out, s.lookupLines()...)
	out = append(out, "", " "+s.st.Title.Render("Runbook")+s.st.Muted.Render(" ("+Clean(s.rec.Tool)+")"))
	if strings.TrimSpace(s.runbook) == "" {
		out = append(out, " "+s.st.Muted.Render("no runbook for this tool in the catalog"))
		return out
	}
	room := max(2, s.h-len(out)-4)
	var rb []string
	for _, l := range strings.Split(strings.TrimRight(s.runbook, "\n"), "\n") {
		for _, wl := range wrap(Clean(l), max(1, s.w-4)) {
			rb = append(rb, "   "+wl)
		}
	}
	if len(rb) > room {
		hidden := len(rb) - room + 1
		rb = append(rb[:room-1], "   "+s.st.Muted.Render(fmt.Sprintf("… %d more line%s in the catalog", hidden, plural(hidden))))
	}
	return append(out, rb...)
}

// lookupLines tell the lookup's state and answer.
func (s *decideScreen) lookupLines() []string {
	var out []string
	switch {
	case s.asking:
		out = append(out, " "+spinFrames[s.frame]+" asking the provider…")
	case s.askErr != nil:
		s.para(&out, "✗ the lookup failed: "+Clean(s.askErr.Error()), s.st.Error.Render)
	case s.noLookup:
		// The same words as the audit record's evidence, and the command's.
		s.para(&out, "⚠ "+Clean(s.evidence().Summary)+".", s.st.Stuck.Render)
		advice := "Check by hand, as the runbook says; the audit trail records that no evidence was gathered."
		if effectUnknown(s.rec.Effect) {
			advice = "The effect is external and its outcome unknown: check the provider by hand, as the runbook says, " +
				"before deciding; the audit trail records that no evidence was gathered."
		}
		s.para(&out, advice, s.st.Muted.Render)
	case s.answer != nil:
		a := s.answer
		verdict := "no definite answer"
		switch a.Evidence.Lookup {
		case reconcile.LookupFound:
			verdict = "✓ found"
			if a.ResultRef != "" {
				verdict += " (reference " + Clean(a.ResultRef) + ")"
			}
		case reconcile.LookupNotFound:
			verdict = "○ not found: the provider has no such effect"
		}
		s.field(&out, "verdict", verdict)
		s.field(&out, "answer", Clean(a.Evidence.Summary))
		if a.Err != nil && !strings.Contains(a.Evidence.Summary, a.Err.Error()) {
			s.field(&out, "why", Clean(a.Err.Error()))
		}
		if d := Clean(a.Evidence.Digest); d != "" {
			// The audit trail keeps it whole; its start identifies it.
			s.field(&out, "digest", truncate(d, len("sha256:")+16)+" (of the answer, kept in the audit)")
		}
		asked := "at " + s.askedAt.UTC().Format("15:04:05") + " UTC (this machine's clock)"
		if s.keys.AskAgain.Enabled() {
			asked += " · r asks again"
		}
		s.field(&out, "asked", asked)
	}
	return out
}

func (s *decideScreen) decisionView() []string {
	var out []string
	head := " " + s.st.Title.Render("Decision")
	switch s.verdict() {
	case reconcile.LookupFound:
		head += s.st.Muted.Render("  (the lookup says found)")
	case reconcile.LookupNotFound:
		head += s.st.Muted.Render("  (the lookup says not found)")
	default:
		head += s.st.Muted.Render("  (no definite answer from the lookup)")
	}
	out = append(out, head, "")
	for i, d := range reconcile.Decisions {
		info := decisionInfo[d]
		mark := "  "
		if i == s.choice {
			mark = "> "
		}
		line := mark + strconv.Itoa(i+1) + " " + pad(info.name, 13) + " " + info.gist
		line = truncate(line, max(1, s.w-2))
		if i == s.choice {
			line = s.st.Selected.Render(line)
		}
		out = append(out, " "+line)
	}
	return out
}

func (s *decideScreen) inputView(title, prompt string, in textinput.Model) []string {
	var out []string
	out = append(out, " "+s.st.Title.Render(title), "")
	s.para(&out, prompt, nil)
	out = append(out, " "+in.View())
	return out
}

// next says, in plain words, what the decision does to the record and to
// the retries that come after it.
func (s *decideScreen) next() (change, retries string) {
	from := stateText(s.rec.State)
	switch s.decision() {
	case reconcile.Completed:
		ref := Clean(s.typedRef())
		return from + " → " + stateText(storeview.StateCompleted) + " with result reference " + ref,
			"Retries of this key will replay result reference " + ref + ": the effect does not run again."
	case reconcile.NotExecuted:
		again := "the effect runs again"
		switch normalEffect(s.rec.Effect) {
		case "external_unknown":
			again = "the provider is called again, so if it did act the first time it acts twice"
		case "external_idempotent":
			again = "the provider is called again with the same key, which it deduplicates"
		}
		return from + " → " + stateText(storeview.StateReleased),
			"The next retry with the same intent executes again (" + again + "); a retry with a different intent is still refused as a conflict."
	case reconcile.Failed:
		return from + " → " + stateText(storeview.StateRejected),
			"Retries get the rejection: the effect does not run again."
	case reconcile.Defer:
		until := s.snoozeUntil()
		meanwhile := "Meanwhile retries are refused: they wait for a person's decision."
		switch {
		case s.live():
			meanwhile = "Meanwhile " + orDash(Clean(s.rec.Owner)) + " keeps its live lease and may still complete it."
		case normalEffect(s.rec.Effect) == "external_idempotent":
			meanwhile = "Meanwhile the next retry with the same key may take it over: the provider deduplicates by key."
		}
		return "nothing changes: the record stays " + from,
			"Nothing changes; a reminder until " + stamp(until, s.rec.DBTime) + " UTC (" + Relative(s.snoozeD) + "). " + meanwhile
	}
	return "", ""
}

func (s *decideScreen) consequenceView() []string {
	var out []string
	info := decisionInfo[s.decision()]
	out = append(out, " "+s.st.Title.Render("What will happen next: "+info.name), "")
	change, retries := s.next()
	s.field(&out, "the record", change)
	s.field(&out, "retries", retries)
	if s.live() {
		note := "live: the decision is forced, and recorded as forced"
		if s.decision() == reconcile.Defer {
			note = "live: deferring needs no force"
		}
		s.field(&out, "lease", note)
	}
	if s.contradicts() {
		out = append(out, "")
		what := "says found, which contradicts \"" + info.name + "\""
		switch {
		case s.answer.Evidence.RefContradicts(s.decision(), s.typedRef()):
			what = "found reference " + Clean(s.answer.Evidence.Ref) + ", which contradicts the reference you confirm, " +
				Clean(s.typedRef()) + ": retries would replay a reference the provider does not know"
		case s.verdict() == reconcile.LookupNotFound:
			what = "says not found, which contradicts \"" + info.name + "\""
		case s.answer.ResultRef != "":
			what = "says found (reference " + Clean(s.answer.ResultRef) + "), which contradicts \"" + info.name + "\""
		}
		s.para(&out, "⚠ The provider's lookup "+what+". Deciding against it needs an explicit override, recorded in the audit trail.",
			s.st.Stuck.Render)
		box := "[ ]"
		if s.override {
			box = "[x]"
		}
		out = append(out, "", " "+s.st.Bold.Render(box)+" override the lookup's answer   "+s.st.Muted.Render("o toggles"))
	}
	return out
}

func (s *decideScreen) reasonView() []string {
	var out []string
	switch s.kind {
	case flowReconcile:
		out = append(out, " "+s.st.Title.Render("Reason for deciding "+decisionInfo[s.decision()].name), "")
	case flowAck:
		n := unreviewed(s.rec.Conflicts)
		out = append(out, " "+s.st.Title.Render(fmt.Sprintf("Acknowledge %d unreviewed conflicting attempt%s", n, plural(n))), "")
		s.para(&out, "They stay on record, marked reviewed by your role. Why are they no concern (a caller's bug, fixed)?", nil)
		out = append(out, "")
	case flowReveal, flowRevealIntent:
		out = append(out, " "+s.st.Title.Render("Why do you need to see the stored "+string(s.kind.field())+"?"), "")
		s.para(&out, "The reveal is audited before the value is shown: the audit record keeps your role and this reason. The value is hidden again when you leave.", nil)
		out = append(out, "")
	}
	s.para(&out, "Reason (required; kept in the audit trail with your role):", nil)
	out = append(out, " "+s.reason.View())
	return out
}

func (s *decideScreen) confirmView() []string {
	var out []string
	r := s.rec
	subject := "operation " + strconv.FormatInt(r.ID, 10) + ", version " + strconv.FormatInt(r.Version, 10) + " as you saw it"
	switch s.kind {
	case flowReconcile:
		info := decisionInfo[s.decision()]
		out = append(out, " "+s.st.Title.Render("Confirm: "+info.name+" on "+subject), "")
		change, retries := s.next()
		s.field(&out, "the record", change)
		s.field(&out, "retries", retries)
		s.field(&out, "reason", Clean(strings.TrimSpace(s.reason.Value())))
		evidence := Clean(s.evidence().Summary)
		if evidence == "" {
			evidence = "none"
		}
		s.field(&out, "evidence", evidence)
		p := s.params()
		var flags []string
		if p.Force {
			flags = append(flags, "forced (the lease is live)")
		}
		if p.Override {
			flags = append(flags, "overrides the lookup")
		}
		if len(flags) == 0 {
			flags = []string{"nothing more (not forced, no override)"}
		}
		s.field(&out, "recorded", strings.Join(flags, " · "))
	case flowReveal, flowRevealIntent:
		out = append(out, " "+s.st.Title.Render("Reveal the stored "+string(s.kind.field())+" of operation "+strconv.FormatInt(r.ID, 10)), "")
		s.field(&out, "reason", Clean(strings.TrimSpace(s.reason.Value())))
	case flowAck:
		n := unreviewed(r.Conflicts)
		out = append(out, " "+s.st.Title.Render("Confirm: acknowledge conflicts on "+subject), "")
		s.field(&out, "change", fmt.Sprintf("%d conflicting attempt%s marked reviewed by your role; the record itself does not change", n, plural(n)))
		s.field(&out, "reason", Clean(strings.TrimSpace(s.reason.Value())))
	}
	out = append(out, "")
	if s.step == stepApplying {
		out = append(out, " "+spinFrames[s.frame]+" asking the database…")
		return out
	}
	if s.typedConfirm() {
		s.para(&out, fmt.Sprintf("This releases an external effect whose outcome is unknown. To confirm, type the last %d characters of the key %s:",
			confirmChars, Clean(r.Key)), s.st.Stuck.Render)
		out = append(out, " "+s.typed.View())
		return out
	}
	out = append(out, " "+s.st.Bold.Render("Apply?")+" y yes · "+s.st.Bold.Render("N no")+s.st.Muted.Render(" (enter and esc are no)"))
	return out
}

func (s *decideScreen) resultView() []string {
	var out []string
	r := s.res
	var refused *reconcile.RefusedError
	switch {
	case s.err == nil:
		out = append(out, " "+s.st.Completed.Render("✓ Done: "+s.doneWhat()), "")
		if !s.kind.reveals() && r.State != "" {
			s.field(&out, "the record", "now "+stateText(storeview.State(r.State))+" · version "+strconv.FormatInt(r.Version, 10))
		}
		s.field(&out, "audit", "record "+Clean(r.AuditRef())+", committed")
		if s.kind == flowReconcile {
			_, retries := s.next()
			s.field(&out, "retries", retries)
		}
		if s.kind.reveals() {
			out = append(out, "", " "+s.st.Title.Render("Stored "+string(s.kind.field()))+s.st.Muted.Render("  (hidden again when you leave)"))
			room := s.revealRoom()
			s.revealed.clampScroll(room)
			out = append(out, strings.Split(s.revealed.scrollView(s.w, room, s.st), "\n")...)
		}
	case errors.As(s.err, &refused):
		s.para(&out, "✗ Refused: "+Clean(refused.Message), s.st.Error.Render)
		out = append(out, "")
		s.field(&out, "audit", "record "+Clean(r.AuditRef())+": the refusal is audited; this attempt changed nothing")
		if errors.Is(s.err, reconcile.ErrChanged) {
			out = append(out, "", " "+s.st.Title.Render("Changed since you looked"))
			out = append(out, s.changedLines()...)
		}
	default:
		out = append(out, " "+s.st.Error.Render("✗ The database did not answer the decision"), "")
		s.para(&out, Clean(s.err.Error()), s.st.Error.Render)
		out = append(out, "")
		s.para(&out, "It may or may not have been applied: the record is read again when you go back.", nil)
	}
	return out
}

func (s *decideScreen) doneWhat() string {
	switch s.kind {
	case flowAck:
		return "conflicting attempts acknowledged"
	case flowReveal, flowRevealIntent:
		return "revealed, audited first"
	}
	switch s.decision() {
	case reconcile.Completed:
		return "confirmed completed"
	case reconcile.NotExecuted:
		return "confirmed not executed: released"
	case reconcile.Failed:
		return "marked failed"
	}
	return "deferred"
}

// changedLines compare the record as the operator saw it with the
// record now.
func (s *decideScreen) changedLines() []string {
	var out []string
	switch {
	case s.refetching:
		return []string{" " + spinFrames[s.frame] + " reading the record again…"}
	case s.refetchErr != nil:
		return []string{" " + s.st.Error.Render(truncate("✗ could not read it again: "+Clean(s.refetchErr.Error()), s.w-2))}
	case s.nowRec == nil:
		return nil
	}
	was, now := s.rec, *s.nowRec
	s.field(&out, "state", stateText(was.State)+" → "+stateText(now.State))
	s.field(&out, "version", strconv.FormatInt(was.Version, 10)+" → "+strconv.FormatInt(now.Version, 10))
	if was.Owner != now.Owner || was.Attempt != now.Attempt {
		s.field(&out, "owner", orDash(Clean(was.Owner))+" (attempt "+strconv.Itoa(was.Attempt)+") → "+
			orDash(Clean(now.Owner))+" (attempt "+strconv.Itoa(now.Attempt)+")")
	}
	if was.ResultRef != now.ResultRef {
		s.field(&out, "result ref", orDash(Clean(was.ResultRef))+" → "+orDash(Clean(now.ResultRef)))
	}
	if n := len(now.Decisions); n > len(was.Decisions) {
		s.field(&out, "decided", decisionText(&now, now.Decisions[n-1]))
	}
	out = append(out, "")
	s.para(&out, "Go back to the record (enter) and decide again on what it is now.", s.st.Muted.Render)
	return out
}

// layOutRevealed lays the revealed value out for the screen's width.
func (s *decideScreen) layOutRevealed() {
	more := fmt.Sprintf("opsdesk ops reveal %d --field %s --reason … prints it whole.", s.rec.ID, s.kind.field())
	s.revealed.layOut(s.w, s.st, more)
}

// revealRoom is how many lines the revealed value has on the result
// step, below the title, the steps and what the reveal did.
func (s *decideScreen) revealRoom() int {
	head := 3 + 2                                                                      // the title, the steps, a blank line; done, a blank line
	head += len(wrap("record "+Clean(s.res.AuditRef())+", committed", max(1, s.w-15))) // the audit field
	head += 2                                                                          // a blank line, the value's title
	return max(1, s.h-head)
}

// abandonReveal gives up on a reveal still being fetched: its request is
// cancelled and the flow leaves at once. Its audit record may well have
// committed already (it commits before the value is read): the operator
// is told so.
func (s *decideScreen) abandonReveal() tea.Cmd {
	s.leave()
	s.step = stepReason
	s.goTo(navMsg{to: screenPrevious})
	return func() tea.Msg {
		return noteMsg("reveal cancelled, nothing shown; its audit record may be committed")
	}
}
