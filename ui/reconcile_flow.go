package ui

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// screenReconcile decides the outcome of a pending record.
const screenReconcile screenID = "reconcile"

// reconcileKind is the reconciliation; a record's detail opens it.
var reconcileKind = screenKind{id: screenReconcile, build: func(d deps, o Config) screen { return newReconcile(d, o.Decider) }}

// The reconciliation's own steps: one screen to decide on, with the
// record, the evidence, the choice and what it does, and the inputs a
// choice may need.
const (
	stepDecide    step = "decide"
	stepReference step = "reference" // completed: the provider's reference
	stepSnooze    step = "snooze"    // defer: how long until a reminder
)

// defaultSnooze is how long a deferral lasts unless the operator says.
const defaultSnooze = 2 * time.Hour

// askTimeout bounds a lookup; the lookup's own timeout (the catalog's,
// 5s by default) is usually shorter.
const askTimeout = 30 * time.Second

// decisionInfo says what each decision is, in the operator's words
// (reconcile.Kinds' wording).
var decisionInfo = func() map[reconcile.Decision]struct{ name, gist string } {
	out := map[reconcile.Decision]struct{ name, gist string }{}
	for _, k := range reconcile.Kinds {
		out[k.Decision] = struct{ name, gist string }{k.Words.Name, k.Words.Gist}
	}
	return out
}()

// kind is the chosen decision's row in reconcile.Kinds.
func (s *reconcileFlow) kind() reconcile.Kind {
	k, _ := reconcile.KindOf(s.decision())
	return k
}

// askMsg answers the lookup; an answer to an earlier ask is dropped.
type askMsg struct {
	seq    int
	answer reconcile.Answer
	ok     bool
	err    error // the lookup panicked
}

// reconcileFlow is the guided reconciliation of one record: context and
// risk, the provider's lookup and the runbook, the decision, what happens
// next, a reason, a confirmation, the result and its audit record.
type reconcileFlow struct {
	onSteps
	// now is the local clock, for when the provider was asked.
	now     func() time.Time
	runbook string

	// Evidence.
	askSeq   int
	asking   bool
	answer   *reconcile.Answer
	noLookup bool
	askErr   error
	askedAt  time.Time

	// Decision.
	choice   int // in reconcile.Decisions
	snoozeD  time.Duration
	override bool
}

func newReconcile(d deps, dec Decider) *reconcileFlow {
	s := &reconcileFlow{onSteps: newOnSteps(d, screenReconcile, dec), now: time.Now}
	s.sm.addInput(stepReference, textInput(d.st, "reference", 200))
	s.sm.addInput(stepSnooze, textInput(d.st, "such as 30m, 2h, 1d", 20))
	s.sm.first = stepDecide
	s.sm.needsPending = true
	s.sm.crumbs = []crumb{{"decide", []step{stepLoading, stepDecide, stepReference, stepSnooze}},
		{"reason", []step{stepReason}}, {"confirm", []step{stepConfirm, stepApplying}}, {"done", []step{stepResult}}}
	s.act()
	return s
}

func (s *reconcileFlow) title() string { return s.sm.recordTitle("Reconcile operation ") }

func (s *reconcileFlow) page(st step) []string {
	var out []string
	switch st {
	case stepDecide:
		return s.decideView()
	case stepReference:
		out = append(out, " "+s.sm.st.Title.Render("Decision: completed"), "")
		from := ""
		if s.answer != nil && s.answer.ResultRef != "" {
			from = " (the lookup's; edit it if the provider shows another)"
		}
		s.sm.para(&out, "The provider's result reference, which retries will replay"+from+":", nil)
	case stepSnooze:
		out = append(out, " "+s.sm.st.Title.Render("Decision: defer"), "")
		s.sm.para(&out, "Remind again in (on the database clock; such as 30m, 2h, 1d):", nil)
	case stepReason:
		out = []string{" " + s.sm.st.Title.Render("Reason for deciding "+decisionInfo[s.decision()].name), ""}
		change, _ := s.next()
		s.sm.field(&out, "the record", change)
		out = append(out, "")
	case stepConfirm:
		return s.confirmLines()
	case stepResult:
		return s.done()
	}
	return out
}

// ref and snooze are the inputs of the reference and the snooze.
func (s *reconcileFlow) ref() *textinput.Model    { return s.sm.inputAt(stepReference) }
func (s *reconcileFlow) snooze() *textinput.Model { return s.sm.inputAt(stepSnooze) }

func (s *reconcileFlow) pinAt(st step) []string {
	switch st {
	case stepReference:
		return []string{" " + s.ref().View()}
	case stepSnooze:
		out := []string{" " + s.snooze().View()}
		if d, err := parseSnooze(s.snooze().Value()); err == nil {
			out = append(out, "", " "+s.sm.st.Muted.Render(ShortDuration(d)+" from the decision, about "+stamp(s.sm.rec.DBTime.Add(d), s.sm.rec.DBTime)+" UTC"))
		}
		return out
	}
	return nil
}

// keysAt enables and words the keys of the flow's step, after the
// machine's.
func (s *reconcileFlow) keysAt(st step) {
	k := &s.keys
	switch st {
	case stepDecide:
		k.Up.SetEnabled(true)
		k.Down.SetEnabled(true)
		k.Choose.SetEnabled(true)
		s.sm.KeyMap.Next.SetEnabled(!s.asking)
		s.sm.KeyMap.Next.SetHelp("enter", "next: "+decisionInfo[s.decision()].name)
		k.AskAgain.SetEnabled(!s.asking && !s.noLookup && s.sm.dec != nil)
		k.EditRef.SetEnabled(s.kind().NeedsRef)
		k.Override.SetEnabled(s.contradicts())
		if s.override {
			k.Override.SetHelp("o", "keep the lookup's answer")
		} else {
			k.Override.SetHelp("o", "override the lookup")
		}
	case stepReference, stepSnooze:
		s.sm.inputKeys(&s.sm.KeyMap, "next")
	}
}

func (s *reconcileFlow) keyAt(st step, msg tea.KeyMsg) (tea.Cmd, bool) {
	switch st {
	case stepDecide:
		return s.decideKey(msg)
	case stepReference:
		return s.submitRef(), true
	case stepSnooze:
		return s.submitSnooze(), true
	}
	return nil, false
}

// decideKey handles the keys of the decision.
func (s *reconcileFlow) decideKey(msg tea.KeyMsg) (tea.Cmd, bool) {
	n := len(reconcile.Decisions)
	switch {
	case msg.Type == tea.KeyEnter:
		// Refused while the provider is asked, or while the decision
		// contradicts it without the override: submitDecision says why.
		return s.submitDecision(), true
	case key.Matches(msg, s.keys.Up):
		s.choice = (s.choice + n - 1) % n
	case key.Matches(msg, s.keys.Down):
		s.choice = (s.choice + 1) % n
	case key.Matches(msg, s.keys.Choose):
		c, _ := strconv.Atoi(msg.String())
		s.choice = c - 1
	case key.Matches(msg, s.keys.AskAgain):
		return s.ask(), true
	case key.Matches(msg, s.keys.Override):
		s.override = !s.override
	case key.Matches(msg, s.keys.EditRef):
		return s.sm.forward(stepReference), true
	default:
		return nil, false
	}
	s.sm.inputErr = ""
	return nil, true
}

// submitDecision goes on from the decision to what it needs.
func (s *reconcileFlow) submitDecision() tea.Cmd {
	switch {
	case s.asking:
		s.sm.inputErr = "waiting for the provider's answer"
		return nil
	case s.contradicts() && !s.override:
		s.sm.inputErr = "the decision contradicts the lookup: set the override (o) or decide otherwise"
		return nil
	}
	switch k := s.kind(); {
	case k.NeedsRef:
		if s.typedRef() == "" {
			return s.sm.forward(stepReference)
		}
	case k.NeedsUntil:
		return s.sm.forward(stepSnooze)
	}
	return s.sm.forward(stepReason)
}

// submitRef goes on from the reference, once it is one to record.
func (s *reconcileFlow) submitRef() tea.Cmd {
	switch {
	case s.typedRef() == "":
		s.sm.inputErr = "confirming completed needs the provider's result reference: retries will replay it"
		return nil
	case s.contradicts() && !s.override:
		s.sm.inputErr = "the lookup found reference " + termtext.Clean(s.answer.Evidence.Ref) + ", not " + termtext.Clean(s.typedRef()) +
			": go back (esc) and set the override (o) to record another"
		return nil
	}
	return s.sm.forward(stepReason)
}

// submitSnooze goes on from the snooze, once it is a duration.
func (s *reconcileFlow) submitSnooze() tea.Cmd {
	d, err := parseSnooze(s.snooze().Value())
	if err != nil {
		s.sm.inputErr = err.Error()
		return nil
	}
	s.snoozeD = d
	return s.sm.forward(stepReason)
}

// typedPrompt asks for the record's id: releasing an unknown external
// effect is confirmed by typing it (releasesUnbacked).
func (s *reconcileFlow) typedPrompt() string {
	return "This releases an external effect whose outcome is unknown, and the lookup does not say the provider has " +
		"none: if it did act, the next retry acts twice. To confirm, type this record's operation id (in the title):"
}

func (s *reconcileFlow) write() func(ctx context.Context) (applied, error) {
	dec, tool, p := s.sm.dec, s.sm.rec.Tool, s.params()
	return func(ctx context.Context) (applied, error) {
		r, err := dec.Decide(ctx, tool, p)
		return applied{res: r}, err
	}
}

func (s *reconcileFlow) done() []string {
	now := stateText(readmodel.State(s.sm.res.State))
	if s.decision() == reconcile.Defer {
		// The database's state is stuck; the queue's is deferred.
		now = stateText(readmodel.StateDeferred) + " for " + ShortDuration(s.snoozeD) + " from the decision (about " + stamp(s.snoozeUntil(), s.sm.rec.DBTime) + " UTC)"
	}
	out := s.sm.doneLines(s.doneWhat(), now)
	_, retries := s.next()
	s.sm.field(&out, "retries", retries)
	return out
}

// act does what the machine reported: it asks the provider when the flow
// starts and runs the decision once confirmed. Then it words its keys and
// hands the page over: the decision's inputs, the typed confirmation of a
// release without evidence, and the wait for the provider.
func (s *reconcileFlow) act() tea.Cmd {
	var cmd tea.Cmd
	for _, ev := range s.sm.takeEvents() {
		switch ev.kind {
		case evStarted:
			cmd = tea.Batch(cmd, s.begin())
		case evSubmit:
			cmd = tea.Batch(cmd, s.sm.apply(s.write()))
		}
	}
	s.wordKeys()
	s.keysAt(s.sm.step)
	p := stepPage{title: s.title(), text: s.page(s.sm.pageStep()), pin: s.pinAt(s.sm.step), waiting: s.asking}
	if s.releasesUnbacked() {
		p.typed = s.typedPrompt()
	}
	s.sm.setPage(p)
	return cmd
}

// Update takes the provider's answer, and hands a key the step offers to
// the flow's own keys first.
func (s *reconcileFlow) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case askMsg:
		s.onAsk(msg)
		return s, s.act()
	case tea.KeyMsg:
		if !s.sm.offers(msg) {
			break
		}
		if cmd, ok := s.keyAt(s.sm.step, msg); ok {
			return s, tea.Batch(cmd, s.act())
		}
	}
	var cmd tea.Cmd
	s.sm, cmd = s.sm.Update(msg)
	return s, tea.Batch(cmd, s.act())
}

func (s *reconcileFlow) SetSize(w, h int) { flowResize(s, w, h) }

// ShortHelp is a flow's, with the decision's own keys after y and n.
func (s *reconcileFlow) ShortHelp() []key.Binding {
	k := s.keys
	return flowShortHelp(&s.sm, k, k.Override, k.AskAgain, k.EditRef)
}

// FullHelp is a flow's, with choosing by number beside ↑/↓ and the
// decision's own keys beside y and n.
func (s *reconcileFlow) FullHelp() [][]key.Binding {
	k := s.keys
	h := flowFullHelp(&s.sm, k)
	h[0] = append(h[0], k.Choose)
	h[1] = append(h[1], k.Override, k.AskAgain, k.EditRef)
	return h
}

func (s *reconcileFlow) back() (bool, tea.Cmd) { return flowBack(s) }

func (s *reconcileFlow) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	return flowOpen(s, n, at)
}

// begin starts the reconciliation: it asks the provider at once, so the
// answer is usually there when the operator reaches the evidence.
func (s *reconcileFlow) begin() tea.Cmd {
	s.answer, s.noLookup, s.askErr, s.asking = nil, false, nil, false
	s.choice, s.override, s.snoozeD = len(reconcile.Decisions)-1, false, defaultSnooze
	s.snooze().SetValue(ShortDuration(defaultSnooze))
	s.runbook = ""
	if s.sm.dec != nil {
		s.runbook = s.sm.dec.Runbook(s.sm.rec.Tool)
	}
	return s.ask()
}

// ask runs the tool's lookup in a command.
func (s *reconcileFlow) ask() tea.Cmd {
	if s.sm.dec == nil {
		return nil
	}
	s.sm.seq++
	s.askSeq, s.asking = s.sm.seq, true
	s.answer, s.askErr, s.noLookup = nil, nil, false
	seq, dec, rec := s.sm.seq, s.sm.dec, s.sm.rec
	f := s.sm.f
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
	}), s.sm.spinner())
}

func (s *reconcileFlow) onAsk(msg askMsg) {
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
		if s.sm.step == stepDecide || s.sm.step == stepLoading {
			// The decision the evidence points at, to start from, with
			// the reference the provider gave.
			switch a.Evidence.Lookup {
			case reconcile.LookupFound:
				s.choice = 0
			case reconcile.LookupNotFound:
				s.choice = 1
			}
			if s.typedRef() == "" {
				s.ref().SetValue(a.ResultRef)
				s.ref().CursorEnd()
			}
		}
	}
}

// decision is the decision chosen.
func (s *reconcileFlow) decision() reconcile.Decision { return reconcile.Decisions[s.choice] }

// live tells whether the record's lease had not expired when it was read.
func (s *reconcileFlow) live() bool { return s.sm.rec.LeaseLive() }

// verdict is the lookup's definite answer, if any.
func (s *reconcileFlow) verdict() reconcile.Lookup {
	if s.answer == nil {
		return reconcile.LookupNone
	}
	return s.answer.Evidence.Lookup
}

// contradicts tells whether the decision goes against the lookup's
// definite answer, which needs an explicit override: the rule the
// command applies too (reconcile.Evidence.Contradicts), confirming under
// another reference than the one found included.
func (s *reconcileFlow) contradicts() bool {
	if s.answer == nil {
		return false
	}
	return s.answer.Evidence.Contradicts(s.decision(), s.typedRef())
}

// typedRef is the reference the operator confirms completed with.
func (s *reconcileFlow) typedRef() string { return strings.TrimSpace(s.ref().Value()) }

// evidence is what the decision records as its evidence: the lookup's
// answer, or that none was gathered.
func (s *reconcileFlow) evidence() reconcile.Evidence {
	switch {
	case s.answer != nil:
		return s.answer.Evidence
	case s.noLookup:
		return reconcile.NoLookupEvidence(s.sm.rec.Tool)
	}
	return reconcile.Evidence{}
}

// releasesUnbacked tells whether confirming is typed: releasing an
// external effect whose outcome is unknown may repeat it, unless the
// provider's lookup says it has no such effect (and the decision does
// not override it).
func (s *reconcileFlow) releasesUnbacked() bool {
	return s.kind().Risk == reconcile.RiskRepeat && effectUnknown(s.sm.rec.Effect) &&
		(s.verdict() != reconcile.LookupNotFound || s.contradicts())
}

func effectUnknown(e string) bool { return normalEffect(e) == opsmodel.EffectUnknownOutcome }

// normalEffect reads a stored effect kind as the library names it
// (external-unknown, as some catalogs write it, is external_unknown).
func normalEffect(e string) opsmodel.Effect { return opsmodel.Effect(strings.ReplaceAll(e, "-", "_")) }

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
func (s *reconcileFlow) params() reconcile.DecideParams {
	d := s.decision()
	p := reconcile.DecideParams{
		OperationID: s.sm.rec.ID, Decision: d, ExpectVersion: s.sm.rec.Version,
		Reason:   s.sm.typedReason(),
		Force:    s.live() && s.kind().Changes(),
		Override: s.override && s.contradicts(),
	}
	p.Evidence = s.evidence()
	if s.kind().NeedsRef {
		p.ResultRef = s.typedRef()
	}
	if s.kind().NeedsUntil {
		// From the decision's own time: the record was read when the flow
		// began, perhaps minutes ago.
		p.SnoozeFor = s.snoozeD
	}
	return p
}

// snoozeUntil is about when a deferred record wants attention again: the
// snooze from the database clock of the read. The decision snoozes from
// its own time (SnoozeFor), at least this late.
func (s *reconcileFlow) snoozeUntil() time.Time { return s.sm.rec.DBTime.Add(s.snoozeD) }

// refSource says where the reference came from, when the lookup gave it.
func (s *reconcileFlow) refSource() string {
	if s.answer != nil && s.answer.ResultRef != "" && s.typedRef() == s.answer.ResultRef {
		return " (from the lookup; e edits it)"
	}
	return ""
}

// effectWords says what a tool's effect kind means for a decision.
func effectWords(e string) (kind, risk string) {
	switch normalEffect(e) {
	case opsmodel.EffectLocal:
		return "local: written in the same transaction as the record",
			"Low: a record still pending did not commit its effect."
	case opsmodel.EffectIdempotentProvider:
		return "external, idempotent: the provider deduplicates by the operation's key",
			"Low: a retry with the same key cannot make the provider act twice."
	case opsmodel.EffectUnknownOutcome:
		return "external, outcome unknown: the provider may have acted though nobody saw its answer",
			"High: releasing a record whose effect happened makes the next retry act again; confirming one that never happened loses it. Check the provider before deciding."
	}
	return orDash(termtext.Clean(e)), "Unknown effect kind: check the catalog and the provider before deciding."
}

// decideView is the one screen a decision is made on: the record, the
// provider's answer, the choice and what it does to the record and its
// retries, then the risk, the rest of the record and the runbook. It
// scrolls (pgdn/pgup) at any size.
func (s *reconcileFlow) decideView() []string {
	r := s.sm.rec
	now := r.DBTime
	var out []string
	title := func(t, note string) {
		out = append(out, " "+s.sm.st.Title.Render(t)+s.sm.st.Muted.Render(note))
	}
	lease := "-"
	switch {
	case s.live():
		lease = "lease live: " + orDash(termtext.Clean(r.Owner)) + " holds it until " + stamp(r.LeaseExpiresAt, now) + " (" + since(r.LeaseExpiresAt, now) + ")"
	case !r.LeaseExpiresAt.IsZero():
		lease = "lease expired " + ShortDuration(now.Sub(r.LeaseExpiresAt)) + " ago"
	}
	s.sm.field(&out, "record", stateText(r.State)+" · "+lease+" · "+orDash(termtext.Clean(r.Owner))+", attempt "+strconv.Itoa(r.Attempt)+
		" · version "+strconv.FormatInt(r.Version, 10))
	if l := deferralLine(r.Row); l != "" {
		s.sm.field(&out, "deferral", l)
	}
	out = append(out, s.lookupLines()...)
	out = append(out, "")
	out = append(out, s.decisionLines()...)
	out = append(out, s.consequenceLines()...)
	out = append(out, "")
	kind, risk := effectWords(r.Effect)
	s.sm.field(&out, "effect", kind)
	s.sm.field(&out, "risk", risk)
	if s.live() {
		s.sm.para(&out, "⚠ The lease is live: deciding needs force, and the decision is recorded as forced. If "+
			orDash(termtext.Clean(r.Owner))+" is still working, its late completion will be refused.", s.sm.st.Stuck.Render)
	}
	s.sm.field(&out, "tool", termtext.Clean(r.Tool)+" · version "+termtext.Clean(r.ToolVersion)+" · created "+stamp(r.CreatedAt, now)+" ("+since(r.CreatedAt, now)+")")
	conflicts := "none"
	if n := len(r.Conflicts); n > 0 {
		conflicts = fmt.Sprintf("%d conflicting attempt%s (the key reused with another intent), %d unreviewed",
			n, plural(n), unreviewed(r.Conflicts))
	}
	s.sm.field(&out, "conflicts", conflicts)
	if n := len(r.Decisions); n > 0 {
		last := r.Decisions[n-1]
		s.sm.field(&out, "decided", decisionText(&r, last)+" ("+since(last.At, now)+")")
	}
	s.sm.field(&out, "intent", "hidden · "+orDash(termtext.Clean(r.FingerprintTag))+" · i on the record reveals it")
	if s.answer != nil && s.answer.Evidence.Digest != "" {
		// The audit trail keeps it whole; its start identifies it.
		s.sm.field(&out, "digest", truncate(termtext.Clean(s.answer.Evidence.Digest), len("sha256:")+16)+" (of the lookup's answer, kept in the audit)")
	}
	out = append(out, "")
	title("Runbook", " ("+termtext.Clean(r.Tool)+")")
	if strings.TrimSpace(s.runbook) == "" {
		return append(out, " "+s.sm.st.Muted.Render("no runbook for this tool in the catalog"))
	}
	for _, l := range strings.Split(strings.TrimRight(s.runbook, "\n"), "\n") {
		for _, wl := range wrap(termtext.Clean(l), max(1, s.sm.w-4)) {
			out = append(out, "   "+wl)
		}
	}
	return out
}

// lookupLines tell the lookup's state and answer: the verdict and when
// it was asked, then the answer in the provider's words.
func (s *reconcileFlow) lookupLines() []string {
	var out []string
	switch {
	case s.asking:
		s.sm.field(&out, "evidence", spinFrames[s.sm.frame]+" asking the provider…")
	case s.askErr != nil:
		s.sm.field(&out, "evidence", s.sm.st.Error.Render("✗ the lookup failed: "+termtext.Clean(s.askErr.Error())))
	case s.noLookup:
		// The same words as the audit record's evidence, and the command's.
		s.sm.field(&out, "evidence", s.sm.st.Stuck.Render("⚠ "+termtext.Clean(s.evidence().Summary)+"."))
		advice := "Check by hand, as the runbook says; the audit trail records that no evidence was gathered."
		if effectUnknown(s.sm.rec.Effect) {
			advice = "The effect is external and its outcome unknown: check the provider by hand, as the runbook says, " +
				"before deciding; the audit trail records that no evidence was gathered."
		}
		s.sm.field(&out, "", s.sm.st.Muted.Render(advice))
	case s.answer != nil:
		a := s.answer
		verdict := "no definite answer"
		switch a.Evidence.Lookup {
		case reconcile.LookupFound:
			verdict = "✓ found"
			if a.ResultRef != "" {
				verdict += " (reference " + termtext.Clean(a.ResultRef) + ")"
			}
		case reconcile.LookupNotFound:
			verdict = "○ not found: the provider has no such effect"
		}
		verdict += " · asked " + s.askedAt.UTC().Format("15:04:05") + " (local clock)"
		if s.keys.AskAgain.Enabled() {
			verdict += " · r asks again"
		}
		s.sm.field(&out, "evidence", verdict)
		s.sm.field(&out, "", termtext.Clean(a.Evidence.Summary))
		if a.Err != nil && !strings.Contains(a.Evidence.Summary, a.Err.Error()) {
			s.sm.field(&out, "why", termtext.Clean(a.Err.Error()))
		}
	}
	return out
}

// decisionLines are the choices, the one the evidence points at selected
// to start with.
func (s *reconcileFlow) decisionLines() []string {
	var out []string
	head := " " + s.sm.st.Title.Render("Decision")
	switch s.verdict() {
	case reconcile.LookupFound:
		head += s.sm.st.Muted.Render("  (the lookup says found)")
	case reconcile.LookupNotFound:
		head += s.sm.st.Muted.Render("  (the lookup says not found)")
	default:
		head += s.sm.st.Muted.Render("  (no definite answer from the lookup)")
	}
	out = append(out, head)
	width := 0
	for _, k := range reconcile.Kinds {
		width = max(width, len(k.Words.Name))
	}
	for i, d := range reconcile.Decisions {
		info := decisionInfo[d]
		mark := "  "
		if i == s.choice {
			mark = "> "
		}
		line := mark + strconv.Itoa(i+1) + " " + pad(info.name, width+1) + " " + info.gist
		line = truncate(line, max(1, s.sm.w-2))
		if i == s.choice {
			line = s.sm.st.Selected.Render(line)
		}
		out = append(out, " "+line)
	}
	return out
}

// next says, in plain words, what the decision does to the record and to
// the retries that come after it.
func (s *reconcileFlow) next() (change, retries string) {
	from := stateText(s.sm.rec.State)
	k := s.kind()
	switch s.decision() {
	case reconcile.Completed:
		ref := termtext.Clean(s.typedRef())
		return from + " → " + stateText(readmodel.StateCompleted) + " with result reference " + ref,
			"Retries of this key will replay result reference " + ref + ": the effect does not run again."
	case reconcile.NotExecuted:
		again := "the effect runs again"
		switch normalEffect(s.sm.rec.Effect) {
		case opsmodel.EffectUnknownOutcome:
			again = "the provider is called again, so if it did act the first time it acts twice"
		case opsmodel.EffectIdempotentProvider:
			again = "the provider is called again with the same key, which it deduplicates"
		}
		return from + " → " + stateText(readmodel.StateReleased),
			"The next retry with the same intent executes again (" + again + "); a retry with a different intent is still refused as a conflict."
	case reconcile.Defer:
		until := s.snoozeUntil()
		meanwhile := "Meanwhile retries are refused: they wait for a person's decision."
		switch {
		case s.live():
			meanwhile = "Meanwhile " + orDash(termtext.Clean(s.sm.rec.Owner)) + " keeps its live lease and may still complete it."
		case normalEffect(s.sm.rec.Effect) == opsmodel.EffectIdempotentProvider:
			meanwhile = "Meanwhile the next retry with the same key may take it over: the provider deduplicates by key."
		}
		return "stays " + from + ", " + stateText(readmodel.StateDeferred) + " for " + ShortDuration(s.snoozeD) +
				" from the decision (about " + stamp(until, s.sm.rec.DBTime) + " UTC): out of the queue until then",
			"Nothing changes; a reminder " + ShortDuration(s.snoozeD) + " after the decision. " + meanwhile
	}
	if !k.Changes() {
		return "nothing changes: the record stays " + from, k.Words.Retries
	}
	return from + " → " + stateText(k.To), k.Words.Retries
}

// consequenceLines say what the decision does: to the record, to the
// retries, and where it goes against the lookup, the override it needs.
func (s *reconcileFlow) consequenceLines() []string {
	var out []string
	info := decisionInfo[s.decision()]
	change, retries := s.next()
	if s.decision() == reconcile.Completed && s.refSource() != "" {
		change += s.refSource()
	}
	s.sm.field(&out, "what happens", change)
	s.sm.field(&out, "retries", retries)
	if s.live() {
		note := "live: the decision is forced, and recorded as forced"
		if s.decision() == reconcile.Defer {
			note = "live: deferring needs no force"
		}
		s.sm.field(&out, "lease", note)
	}
	if s.contradicts() {
		out = append(out, "")
		what := "says found, which contradicts \"" + info.name + "\""
		switch {
		case s.answer.Evidence.RefContradicts(s.decision(), s.typedRef()):
			what = "found reference " + termtext.Clean(s.answer.Evidence.Ref) + ", which contradicts the reference you confirm, " +
				termtext.Clean(s.typedRef()) + ": retries would replay a reference the provider does not know"
		case s.verdict() == reconcile.LookupNotFound:
			what = "says not found, which contradicts \"" + info.name + "\""
		case s.answer.ResultRef != "":
			what = "says found (reference " + termtext.Clean(s.answer.ResultRef) + "), which contradicts \"" + info.name + "\""
		}
		s.sm.para(&out, "⚠ The provider's lookup "+what+". Deciding against it needs an explicit override, recorded in the audit trail.",
			s.sm.st.Stuck.Render)
		box := "[ ]"
		if s.override {
			box = "[x]"
		}
		out = append(out, " "+s.sm.st.Bold.Render(box)+" override the lookup's answer   "+s.sm.st.Muted.Render("o toggles"))
	}
	return out
}

// confirmLines are the confirmation's body: the decision, what it does,
// the reason, the evidence and what is recorded besides.
func (s *reconcileFlow) confirmLines() []string {
	var out []string
	info := decisionInfo[s.decision()]
	out = append(s.sm.heading("Confirm: "+info.name+" on "+s.sm.subject()), "")
	change, _ := s.next()
	s.sm.field(&out, "the record", change)
	s.sm.field(&out, "reason", termtext.Clean(s.sm.typedReason()))
	evidence := termtext.Clean(s.evidence().Summary)
	if evidence == "" {
		evidence = "none"
	}
	s.sm.field(&out, "evidence", evidence)
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
	s.sm.field(&out, "recorded", strings.Join(flags, " · "))
	return out
}

func (s *reconcileFlow) doneWhat() string { return s.kind().Words.Done }
