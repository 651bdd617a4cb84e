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

	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
)

// screenReconcile decides the outcome of a pending record.
const screenReconcile screenID = "reconcile"

// reconcileKind is the reconciliation; a record's detail opens it.
var reconcileKind = screenKind{id: screenReconcile, build: func(d deps, o Options) screen { return newReconcile(d, o.Decider) }}

// The reconciliation's own steps.
const (
	stepContext     step = "context"
	stepEvidence    step = "evidence"
	stepDecision    step = "decision"
	stepReference   step = "reference" // completed: the provider's reference
	stepSnooze      step = "snooze"    // defer: how long until a reminder
	stepConsequence step = "consequence"
)

// askTimeout bounds a lookup; the lookup's own timeout (the catalog's,
// 5s by default) is usually shorter.
const askTimeout = 30 * time.Second

// decisionInfo says what each decision is, in the operator's words.
var decisionInfo = map[reconcile.Decision]struct{ name, gist string }{
	reconcile.Completed:   {"completed", "the effect happened: retries replay its result reference"},
	reconcile.NotExecuted: {"not executed", "it did not happen: release it; the next retry executes again"},
	reconcile.Failed:      {"failed", "it failed for good: retries get the rejection"},
	reconcile.Defer:       {"defer", "not decidable yet: a note and a reminder, nothing changes"},
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
	flow
	// now is this machine's clock, for when the provider was asked.
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
	ref      textinput.Model
	snooze   textinput.Model
	snoozeD  time.Duration
	override bool
}

func newReconcile(d deps, dec Decider) *reconcileFlow {
	s := &reconcileFlow{flow: newFlow(d, screenReconcile, dec), now: time.Now}
	s.ref = textInput(d.st, "reference", 200)
	s.snooze = textInput(d.st, "such as 30m, 2h, 1d", 20)
	s.inputs = append(s.inputs, &s.ref, &s.snooze)
	s.first = stepContext
	s.what = func() string { return "Reconcile operation " }
	s.crumbs = []crumb{{"context", []step{stepContext}}, {"evidence", []step{stepEvidence}},
		{"decision", []step{stepDecision, stepReference, stepSnooze}}, {"what happens", []step{stepConsequence}},
		{"reason", []step{stepReason}}, {"confirm", []step{stepConfirm, stepApplying}}, {"done", []step{stepResult}}}
	s.commonSteps(func() tea.Cmd { return s.forward(stepConfirm) }, func() []string {
		return []string{" " + s.st.Title.Render("Reason for deciding "+decisionInfo[s.decision()].name), ""}
	}, "next")
	s.steps[stepContext] = &flowStep{
		view: s.contextView,
		keys: func(k *KeyMap) {
			k.Next.SetEnabled(true)
			k.Next.SetHelp("enter", "next: evidence")
		},
		submit: func() tea.Cmd { return s.forward(stepEvidence) },
	}
	s.steps[stepEvidence] = &flowStep{
		view: s.evidenceView,
		keys: func(k *KeyMap) {
			k.Next.SetEnabled(!s.asking)
			k.Next.SetHelp("enter", "next: decide")
			k.AskAgain.SetEnabled(!s.asking && !s.noLookup && s.dec != nil)
		},
		key: func(msg tea.KeyMsg) (tea.Cmd, bool) {
			switch {
			case msg.Type == tea.KeyEnter && s.asking:
				s.inputErr = "waiting for the provider's answer"
				return nil, true
			case key.Matches(msg, s.keys.AskAgain):
				return s.ask(), true
			}
			return nil, false
		},
		submit: func() tea.Cmd {
			if s.asking {
				return nil
			}
			return s.forward(stepDecision)
		},
	}
	s.steps[stepDecision] = &flowStep{
		view: s.decisionView,
		keys: func(k *KeyMap) {
			k.Up.SetEnabled(true)
			k.Down.SetEnabled(true)
			k.Choose.SetEnabled(true)
			k.Next.SetEnabled(true)
		},
		key: func(msg tea.KeyMsg) (tea.Cmd, bool) {
			n := len(reconcile.Decisions)
			switch {
			case key.Matches(msg, s.keys.Up):
				s.choice = (s.choice + n - 1) % n
			case key.Matches(msg, s.keys.Down):
				s.choice = (s.choice + 1) % n
			case key.Matches(msg, s.keys.Choose):
				c, _ := strconv.Atoi(msg.String())
				s.choice = c - 1
				return s.submit(), true
			default:
				return nil, false
			}
			return nil, true
		},
		submit: func() tea.Cmd {
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
		},
	}
	s.steps[stepReference] = &flowStep{
		input: func() *textinput.Model { return &s.ref },
		view: func() []string {
			return s.inputView("Decision: completed", "The provider's result reference, which retries will replay"+s.refSource()+":", s.ref)
		},
		keys: func(k *KeyMap) { s.inputKeys(k, "next") },
		submit: func() tea.Cmd {
			if s.typedRef() == "" {
				s.inputErr = "confirming completed needs the provider's result reference: retries will replay it"
				return nil
			}
			return s.forward(stepConsequence)
		},
	}
	s.steps[stepSnooze] = &flowStep{
		input: func() *textinput.Model { return &s.snooze },
		view:  s.snoozeView,
		keys:  func(k *KeyMap) { s.inputKeys(k, "next") },
		submit: func() tea.Cmd {
			d, err := parseSnooze(s.snooze.Value())
			if err != nil {
				s.inputErr = err.Error()
				return nil
			}
			s.snoozeD = d
			return s.forward(stepConsequence)
		},
	}
	s.steps[stepConsequence] = &flowStep{
		view: s.consequenceView,
		keys: func(k *KeyMap) {
			k.Next.SetEnabled(!s.contradicts() || s.override)
			k.Override.SetEnabled(s.contradicts())
			if s.override {
				k.Override.SetHelp("o", "keep the lookup's answer")
			} else {
				k.Override.SetHelp("o", "override the lookup")
			}
		},
		key: func(msg tea.KeyMsg) (tea.Cmd, bool) {
			switch {
			case msg.Type == tea.KeyEnter:
				// Refused while the decision contradicts the lookup
				// without the override: submit says why.
				return s.submit(), true
			case key.Matches(msg, s.keys.Override):
				s.override = !s.override
				return nil, true
			}
			return nil, false
		},
		submit: func() tea.Cmd {
			if s.contradicts() && !s.override {
				s.inputErr = "the decision contradicts the lookup: set the override (o) or go back (esc) and decide otherwise"
				return nil
			}
			return s.forward(stepReason)
		},
	}
	s.confirmHead = s.confirmLines
	s.typedNeeded = s.releasesUnknown
	s.typedWant = s.keyTail
	s.typedPrompt = func() string {
		return fmt.Sprintf("This releases an external effect whose outcome is unknown. To confirm, type the last %d characters of the key %s:",
			confirmChars, Clean(s.rec.Key))
	}
	s.typedWrong = func() string {
		return fmt.Sprintf("that is not the key's last %d characters: nothing was done", confirmChars)
	}
	s.write = func() func(ctx context.Context) (applied, error) {
		dec, tool, p := s.dec, s.rec.Tool, s.params()
		return func(ctx context.Context) (applied, error) {
			r, err := dec.Decide(ctx, tool, p)
			return applied{res: r}, err
		}
	}
	s.done = s.doneWhat
	s.stateLine = true
	s.resultState = func() string {
		if s.decision() == reconcile.Defer {
			// The database's state is stuck; the queue's is deferred.
			return stateText(storeview.StateDeferred) + " until " + stamp(s.snoozeUntil(), s.rec.DBTime) + " UTC"
		}
		return stateText(storeview.State(s.res.State))
	}
	s.doneMore = func() []string {
		var out []string
		_, retries := s.next()
		s.field(&out, "retries", retries)
		return out
	}
	s.busyMore = func() bool { return s.asking }
	s.begin, s.self = s.beginFlow, s
	s.onMsg = func(msg tea.Msg) (tea.Cmd, bool) {
		if a, ok := msg.(askMsg); ok {
			s.onAsk(a)
			return nil, true
		}
		return nil, false
	}
	s.updateKeys()
	return s
}

// begin starts the reconciliation: it asks the provider at once, so the
// answer is usually there when the operator reaches the evidence.
func (s *reconcileFlow) beginFlow(fn flowNav) tea.Cmd {
	s.answer, s.noLookup, s.askErr, s.asking = nil, false, nil, false
	s.choice, s.override, s.snoozeD = len(reconcile.Decisions)-1, false, 0
	s.snooze.SetValue("2h")
	s.runbook = ""
	if s.dec != nil {
		s.runbook = s.dec.Runbook(fn.rec.Tool)
	}
	return s.ask()
}

// ask runs the tool's lookup in a command.
func (s *reconcileFlow) ask() tea.Cmd {
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
		if s.step == stepContext || s.step == stepEvidence {
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

// decision is the decision chosen.
func (s *reconcileFlow) decision() reconcile.Decision { return reconcile.Decisions[s.choice] }

// live tells whether the record's lease had not expired when it was read.
func (s *reconcileFlow) live() bool { return s.rec.LeaseLive() }

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
func (s *reconcileFlow) typedRef() string { return strings.TrimSpace(s.ref.Value()) }

// evidence is what the decision records as its evidence: the lookup's
// answer, or that none was gathered.
func (s *reconcileFlow) evidence() reconcile.Evidence {
	switch {
	case s.answer != nil:
		return s.answer.Evidence
	case s.noLookup:
		return reconcile.NoLookupEvidence(s.rec.Tool)
	}
	return reconcile.Evidence{}
}

// releasesUnknown tells whether confirming is typed: releasing an
// external effect whose outcome is unknown may repeat it.
func (s *reconcileFlow) releasesUnknown() bool {
	return s.decision() == reconcile.NotExecuted && effectUnknown(s.rec.Effect)
}

// keyTail is what the typed confirmation must match.
func (s *reconcileFlow) keyTail() string {
	r := []rune(s.rec.Key)
	return string(r[max(0, len(r)-confirmChars):])
}

func effectUnknown(e string) bool { return normalEffect(e) == ops.EffectUnknownOutcome }

// normalEffect reads a stored effect kind as the library names it
// (external-unknown, as some catalogs write it, is external_unknown).
func normalEffect(e string) ops.Effect { return ops.Effect(strings.ReplaceAll(e, "-", "_")) }

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
		OperationID: s.rec.ID, Decision: d, ExpectVersion: s.rec.Version,
		Reason:   s.typedReason(),
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
func (s *reconcileFlow) snoozeUntil() time.Time { return s.rec.DBTime.Add(s.snoozeD) }

func (s *reconcileFlow) inputView(title, prompt string, in textinput.Model) []string {
	var out []string
	out = append(out, " "+s.st.Title.Render(title), "")
	s.para(&out, prompt, nil)
	out = append(out, " "+in.View())
	return out
}

func (s *reconcileFlow) snoozeView() []string {
	out := s.inputView("Decision: defer", "Remind again in (on the database clock; such as 30m, 2h, 1d):", s.snooze)
	if d, err := parseSnooze(s.snooze.Value()); err == nil {
		out = append(out, "", " "+s.st.Muted.Render("until "+stamp(s.rec.DBTime.Add(d), s.rec.DBTime)+" UTC ("+Relative(d)+")"))
	}
	return out
}

func (s *reconcileFlow) refSource() string {
	if s.answer != nil && s.answer.ResultRef != "" {
		return " (from the lookup; edit it if the provider shows another)"
	}
	return ""
}

// effectWords says what a tool's effect kind means for a decision.
func effectWords(e string) (kind, risk string) {
	switch normalEffect(e) {
	case ops.EffectLocal:
		return "local: written in the same transaction as the record",
			"Low: a record still pending did not commit its effect."
	case ops.EffectIdempotentProvider:
		return "external, idempotent: the provider deduplicates by the operation's key",
			"Low: a retry with the same key cannot make the provider act twice."
	case ops.EffectUnknownOutcome:
		return "external, outcome unknown: the provider may have acted though nobody saw its answer",
			"High: releasing a record whose effect happened makes the next retry act again; confirming one that never happened loses it. Check the provider before deciding."
	}
	return orDash(Clean(e)), "Unknown effect kind: check the catalog and the provider before deciding."
}

func (s *reconcileFlow) contextView() []string {
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

func (s *reconcileFlow) evidenceView() []string {
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
func (s *reconcileFlow) lookupLines() []string {
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

func (s *reconcileFlow) decisionView() []string {
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

// next says, in plain words, what the decision does to the record and to
// the retries that come after it.
func (s *reconcileFlow) next() (change, retries string) {
	from := stateText(s.rec.State)
	switch s.decision() {
	case reconcile.Completed:
		ref := Clean(s.typedRef())
		return from + " → " + stateText(storeview.StateCompleted) + " with result reference " + ref,
			"Retries of this key will replay result reference " + ref + ": the effect does not run again."
	case reconcile.NotExecuted:
		again := "the effect runs again"
		switch normalEffect(s.rec.Effect) {
		case ops.EffectUnknownOutcome:
			again = "the provider is called again, so if it did act the first time it acts twice"
		case ops.EffectIdempotentProvider:
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
		case normalEffect(s.rec.Effect) == ops.EffectIdempotentProvider:
			meanwhile = "Meanwhile the next retry with the same key may take it over: the provider deduplicates by key."
		}
		return "nothing changes: the record stays " + from,
			"Nothing changes; a reminder until " + stamp(until, s.rec.DBTime) + " UTC (" + Relative(s.snoozeD) + "). " + meanwhile
	}
	return "", ""
}

func (s *reconcileFlow) consequenceView() []string {
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

// confirmLines are the confirmation's body: the decision, what it does,
// the reason, the evidence and what is recorded besides.
func (s *reconcileFlow) confirmLines() []string {
	var out []string
	info := decisionInfo[s.decision()]
	out = append(out, " "+s.st.Title.Render("Confirm: "+info.name+" on "+s.subject()), "")
	change, retries := s.next()
	s.field(&out, "the record", change)
	s.field(&out, "retries", retries)
	s.field(&out, "reason", Clean(s.typedReason()))
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
	return out
}

func (s *reconcileFlow) doneWhat() string {
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
