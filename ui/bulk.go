package ui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// BulkReconciler is what the bulk reconciliation (R on a list) needs: one
// person's runs over the records a filter lists, each step a call of its
// own so the screen shows what happens between them. *bulk.Reconciler
// satisfies it; the database checks every decision as it checks one
// decision made by hand.
type BulkReconciler interface {
	// CheckFilter tells whether a list's filter can start a run, and if
	// not, why in words for the operator.
	CheckFilter(f readmodel.Filter) error
	// List returns the stuck records f matches, each at the version seen.
	List(ctx context.Context, f readmodel.Filter) ([]readmodel.Row, error)
	// Lookup starts a run that records filter (what the rows were listed
	// by), asks the provider about every row, a bounded number at once,
	// and groups the answers; cancelled, it keeps what was answered.
	Lookup(ctx context.Context, filter string, rows []readmodel.Row, progress func(bulk.Progress)) (*bulk.Plan, error)
	// Accept decides each record of a group by itself; cancelled, it
	// starts no more decisions and lets those under way finish.
	Accept(ctx context.Context, plan *bulk.Plan, v bulk.Verdict, p bulk.AcceptParams, progress func(bulk.Progress)) (bulk.GroupResult, error)
}

var _ BulkReconciler = (*bulk.Reconciler)(nil)

// screenBulk is the bulk reconciliation of a filtered list.
const screenBulk screenID = "bulk"

// bulkNav opens the bulk reconciliation on the list's filter.
type bulkNav struct{ filter readmodel.Filter }

func (bulkNav) target() screenID { return screenBulk }

// bulkKind is the bulk reconciliation; R on a list opens it.
var bulkKind = screenKind{id: screenBulk, build: func(d deps, o Config) screen { return newBulk(d, o.Bulk) }}

// The bulk reconciliation's own steps; the reason, the confirmation and
// the result are named with every flow's.
const (
	stepRefused  step = "refused"  // the filter cannot start a run
	stepLookups  step = "lookups"  // listing, then the lookups under way
	stepPlan     step = "plan"     // the groups by verdict
	stepDeciding step = "deciding" // an accepted group's decisions under way
)

// bulkSamples is how many records of each group the plan shows.
const bulkSamples = 3

// bulkListed is how many decided records a result names (the skipped,
// refused, failed and not attempted are all named).
const bulkListed = 5

// Bulk messages, numbered by run: a stopped or left run's are dropped.
type (
	bulkProgressMsg struct {
		run int
		p   bulk.Progress
		ch  <-chan tea.Msg
	}
	bulkPlanMsg struct {
		run  int
		plan *bulk.Plan
		err  error
		// listedAt is the database time the records were listed at.
		listedAt time.Time
	}
	bulkAcceptMsg struct {
		run int
		res bulk.GroupResult
		err error
	}
)

// bulkFlow reconciles the records of a filtered list by evidence: it runs
// every record's lookup with progress (esc stops), shows the records
// grouped by verdict with the decision each definite group's evidence
// supports, and decides a group the operator accepts with one reason and
// its count typed, each record by itself; then it says, record by record,
// what was decided, skipped, refused or failed. It runs on the step
// machine of the flows on one record.
type bulkFlow struct {
	onSteps
	bulk   BulkReconciler
	filter readmodel.Filter

	// refusal says why the filter cannot start a run.
	refusal error

	// The run under way (lookups or decisions): runID numbers it, ch
	// carries its messages, stop cancels its work (esc) and end what
	// waits to deliver its last message (leaving); end is set while a
	// run is under way (running).
	runID    int
	ch       <-chan tea.Msg
	stopping bool
	stop     context.CancelFunc
	end      context.CancelFunc
	progress bulk.Progress

	// Lookups.
	plan *bulk.Plan
	// keyCut is how the plan's keys are cut (keyCutOf: the plan it
	// measured).
	keyCut   keyFit
	keyCutOf *bulk.Plan
	// listedAt is the database time of the run's listing: what the status
	// bar shows while the flow is open, since every record, version and
	// count on it is as of then (the list's last poll may be older).
	listedAt  time.Time
	lookupErr error

	// Groups.
	sel       int // in plan.Groups
	accepted  map[bulk.Verdict]bulk.GroupResult
	verdict   bulk.Verdict // the group being accepted
	res       bulk.GroupResult
	acceptErr error

	// tried keeps a group stopped before all its records' turn: accepted
	// again, the records it decided read as changed, and are its.
	tried map[bulk.Verdict]bulk.GroupResult

	// interrupted: ctrl+c stopped the run under way (as esc does); tail is
	// the run's end as its goroutine left it, for the terminal once the
	// console quit before the end was delivered.
	interrupted bool
	tail        *runTail
}

// runTail is what a run's goroutine last reported, kept beside the
// messages so that the exit report can read it after the console quit.
type runTail struct {
	mu       sync.Mutex
	progress bulk.Progress
	last     tea.Msg
	done     chan struct{}
}

func (t *runTail) setProgress(p bulk.Progress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.progress = p
}

func (t *runTail) end(last tea.Msg) {
	t.mu.Lock()
	t.last = last
	t.mu.Unlock()
	close(t.done)
}

func (t *runTail) get() (tea.Msg, bulk.Progress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last, t.progress
}

func newBulk(d deps, b BulkReconciler) *bulkFlow {
	s := &bulkFlow{onSteps: newOnSteps(d, screenBulk, nil), bulk: b}
	s.sm.first = stepLookups
	s.sm.backTo = "the list"
	s.sm.crumbs = []crumb{{"lookups", []step{stepRefused, stepLookups}}, {"plan", []step{stepPlan}}, {"reason", []step{stepReason}},
		{"confirm", []step{stepConfirm, stepDeciding}}, {"done", []step{stepResult}}}
	s.sm.reason = textInput(d.st, "why, for each record's audit record", 2000)
	s.sm.reasonPrompt = "Reason (required; it goes into each record's audit record with your role):"
	s.act()
	return s
}

func (s *bulkFlow) page(st step) []string {
	switch st {
	case stepRefused:
		return s.refusedView()
	case stepLookups:
		return s.lookupsView()
	case stepPlan:
		return s.planView()
	case stepReason:
		return s.reasonView()
	case stepConfirm:
		return s.confirmView()
	case stepDeciding:
		return s.decidingView()
	case stepResult:
		return s.resultLines()
	}
	return nil
}

func (s *bulkFlow) keysAt(st step) {
	k, mk := &s.keys, &s.sm.KeyMap
	// ctrl+c stops a run as esc does; once stopped, or where nothing
	// runs, it quits (after showing what was done, in a flow).
	if s.running() && !s.interrupted {
		k.ForceQuit.SetHelp("ctrl+c", "stop")
	} else {
		k.ForceQuit.SetHelp("ctrl+c", "quit")
	}
	k.OpenGroup.SetEnabled(st == stepPlan && s.selected().Count() > 0)
	switch st {
	case stepLookups:
		mk.Cancel.SetEnabled(s.running() && !s.stopping)
		mk.Cancel.SetHelp("esc", "stop the lookups")
		k.AskAgain.SetEnabled(!s.running())
		k.AskAgain.SetHelp("r", "try again")
	case stepPlan:
		k.Up.SetEnabled(len(s.plan.Groups) > 1)
		k.Down.SetEnabled(len(s.plan.Groups) > 1)
		mk.Next.SetEnabled(s.acceptable() == nil)
		mk.Next.SetHelp("enter", "accept the "+s.selected().Verdict.Label()+" group")
		k.AskAgain.SetEnabled(s.stopped())
		k.AskAgain.SetHelp("r", "look up again")
	case stepDeciding:
		mk.Cancel.SetEnabled(!s.stopping)
		mk.Cancel.SetHelp("esc", "stop starting decisions")
	case stepResult:
		mk.Next.SetEnabled(true)
		mk.Next.SetHelp("enter", "back to the plan")
	}
}

func (s *bulkFlow) keyAt(st step, msg tea.KeyMsg) (tea.Cmd, bool) {
	switch st {
	case stepLookups:
		return s.runningKey(msg, s.lookUp)
	case stepPlan:
		return s.planKey(msg)
	case stepReason:
		if err := bulk.CheckReason(s.sm.reason.Value()); err != nil {
			s.sm.inputErr = termtext.Clean(err.Error())
			return nil, true
		}
		return s.sm.forward(stepConfirm), true
	case stepConfirm:
		n := s.group().Count()
		// The exact digits: " 12", "+12", "012" and "12\x00" are not
		// what was asked, and confirm nothing.
		if s.sm.typed.Value() != strconv.Itoa(n) {
			s.sm.inputErr = fmt.Sprintf("that is not %d, the number of records in the group: nothing was decided", n)
			s.sm.typed.SetValue("")
			return nil, true
		}
		return s.decide(n), true
	case stepDeciding:
		return s.runningKey(msg, nil)
	case stepResult:
		if !key.Matches(msg, s.sm.KeyMap.Next) {
			return nil, false
		}
		s.sm.trail = nil
		s.sel = s.firstAcceptable()
		return s.sm.enter(stepPlan), true
	}
	return nil, false
}

// planKey moves between the plan's groups and accepts one.
func (s *bulkFlow) planKey(msg tea.KeyMsg) (tea.Cmd, bool) {
	n := len(s.plan.Groups)
	switch {
	case msg.Type == tea.KeyEnter:
		// Refused where the group cannot be accepted: say why.
		if err := s.acceptable(); err != nil {
			s.sm.inputErr = err.Error()
			return nil, true
		}
		s.verdict = s.selected().Verdict
		s.sm.reason.SetValue("")
		return s.sm.forward(stepReason), true
	case key.Matches(msg, s.keys.Up):
		s.sel = (s.sel + n - 1) % n
	case key.Matches(msg, s.keys.Down):
		s.sel = (s.sel + 1) % n
	case key.Matches(msg, s.keys.AskAgain):
		return s.lookUp(), true
	case key.Matches(msg, s.keys.OpenGroup):
		if g := s.selected(); g.Count() > 0 {
			s.sm.goTo(bulkGroupNav{group: g, batch: s.plan.BatchID, fit: s.keyFit(), listedAt: s.listedAt})
		}
	default:
		return nil, false
	}
	s.sm.inputErr = ""
	return nil, true
}

// typedPrompt asks for the group's count: a group is accepted by typing
// it.
func (s *bulkFlow) typedPrompt() string {
	return fmt.Sprintf("To decide them, type %d, the number of records in the group; anything else, or nothing, "+
		"decides nothing:", s.group().Count())
}

// write is nil: each group is decided by the bulk reconciler (decide).
func (s *bulkFlow) write() func(ctx context.Context) (applied, error) { return nil }

// waiting: the records are being listed.
func (s *bulkFlow) waiting() bool { return s.running() && s.progress.Total == 0 }

// leave stops the run.
func (s *bulkFlow) leave() {
	s.sm.leave()
	s.abandon()
}

// act stops the run when the machine starts over, and hands the page
// over; the flow's own keys are worded first, since its pages name them.
func (s *bulkFlow) act() tea.Cmd {
	for _, ev := range s.sm.takeEvents() {
		if ev.kind == evLeft {
			s.abandon()
		}
	}
	s.wordKeys()
	s.keysAt(s.sm.step)
	s.sm.setPage(stepPage{title: s.title(), text: s.page(s.sm.pageStep()), typed: s.typedPrompt(), waiting: s.waiting()})
	return nil
}

func (s *bulkFlow) SetSize(w, h int) { flowResize(s, w, h) }

func (s *bulkFlow) back() (bool, tea.Cmd) { return flowBack(s) }

// open starts a run on the list's filter, for a role that may decide; a
// filter that cannot start one opens the flow on the reason why.
func (s *bulkFlow) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	bn, ok := n.(bulkNav)
	if !ok || s.bulk == nil || !at.perms.decide || at.active().id() != screenList {
		return nil, nil, false
	}
	s.sm.reset(readmodel.Detail{})
	s.act() // the run before is left
	s.filter, s.refusal, s.accepted, s.tried = bn.filter, nil, map[bulk.Verdict]bulk.GroupResult{}, map[bulk.Verdict]bulk.GroupResult{}
	if err := s.bulk.CheckFilter(bn.filter); err != nil {
		s.refusal = err
		s.sm.enter(stepRefused)
		s.act()
		return at.pushed(s), nil, true
	}
	cmd := s.lookUp()
	s.act()
	return at.pushed(s), cmd, true
}

// asOf is the database time of the run's listing, once listed.
func (s *bulkFlow) asOf() time.Time {
	if !s.listedAt.IsZero() {
		return s.listedAt
	}
	return s.sm.asOf()
}

// capturing: a run under way answers esc itself (it stops) and q does
// nothing, as do the inputs.
func (s *bulkFlow) capturing() bool { return s.running() || s.sm.capturing() }

// running tells whether a run (lookups or decisions) is under way.
func (s *bulkFlow) running() bool { return s.end != nil }

// stopped tells whether the plan's lookups were stopped: nothing is
// accepted from them.
func (s *bulkFlow) stopped() bool { return s.plan != nil && s.lookupErr != nil }

// backLabels: esc leaves for the list where nothing runs.
func (s *bulkFlow) backLabels() (esc, q string) {
	switch s.sm.step {
	case stepRefused, stepLookups, stepPlan, stepResult:
		return "back to the list", "back to the list"
	}
	return s.sm.backLabels()
}

// ShortHelp implements help.KeyMap.
func (s *bulkFlow) ShortHelp() []key.Binding {
	k, mk := s.keys, s.sm.KeyMap
	out := []key.Binding{combined("↑/↓", "choose a group", k.Up, k.Down), mk.Next, k.OpenGroup, mk.Accept, k.AskAgain, mk.Cancel,
		combined("pgdn/pgup", "scroll", mk.ScrollDown, mk.ScrollUp)}
	if s.capturing() {
		out = append(out, k.ForceQuit)
	}
	return out
}

// FullHelp implements help.KeyMap.
func (s *bulkFlow) FullHelp() [][]key.Binding {
	k, mk := s.keys, s.sm.KeyMap
	return [][]key.Binding{{k.Up, k.Down, mk.Next, k.OpenGroup, mk.Accept, k.AskAgain, mk.Cancel}, {mk.ScrollDown, mk.ScrollUp}}
}

// runningKey handles esc while a run is under way (it stops the run's
// work) and r where again is given and nothing runs.
func (s *bulkFlow) runningKey(msg tea.KeyMsg, again func() tea.Cmd) (tea.Cmd, bool) {
	switch {
	case s.running() && key.Matches(msg, s.sm.KeyMap.Cancel):
		s.halt()
		return nil, true
	case again != nil && !s.running() && key.Matches(msg, s.keys.AskAgain):
		return again(), true
	}
	return nil, s.running() // a run under way takes every key
}

// halt stops the run's work: no lookup and no decision starts, those
// under way finish, and the run's end still comes with what was done.
func (s *bulkFlow) halt() {
	if s.running() && !s.stopping {
		s.stopping = true
		s.stop()
	}
}

// abandon forgets the run when the operator leaves: its work stops and
// its end is not waited for.
func (s *bulkFlow) abandon() {
	if s.end != nil {
		s.stop()
		s.end()
		s.stop, s.end = nil, nil
	}
	s.runID++
	s.stopping = false
}

// finish ends a run whose end arrived.
func (s *bulkFlow) finish() {
	s.end()
	s.stop, s.end = nil, nil
	s.stopping = false
}

// launch runs work in the background: its progress and then its end come
// back as messages, one at a time and in order. esc cancels the work's
// context; leaving also gives up on delivering its end.
func (s *bulkFlow) launch(work func(ctx context.Context, progress func(bulk.Progress)) tea.Msg) tea.Cmd {
	s.abandon()
	s.runID++
	life, end := context.WithCancel(s.sm.f.ctx)
	ctx, stop := context.WithCancel(life)
	ch := make(chan tea.Msg, 1)
	s.ch, s.stop, s.end = ch, stop, end
	s.stopping, s.progress, s.interrupted = false, bulk.Progress{}, false
	runID := s.runID
	tail := &runTail{done: make(chan struct{})}
	s.tail = tail
	go func() {
		defer close(ch)
		defer stop()
		var last tea.Msg
		func() {
			defer func() {
				if r := recover(); r != nil {
					last = bulkPlanMsg{run: runID, err: fmt.Errorf("the bulk reconciliation panicked: %v", r)}
				}
			}()
			last = work(ctx, func(p bulk.Progress) {
				// The screen reads the counts while the work goes on.
				p.Counts = maps.Clone(p.Counts)
				tail.setProgress(p)
				select {
				case ch <- bulkProgressMsg{run: runID, p: p, ch: ch}:
				case <-ctx.Done():
				}
			})
		}()
		// The work does not know the run's number: its end gets it here.
		switch m := last.(type) {
		case bulkPlanMsg:
			m.run = runID
			last = m
		case bulkAcceptMsg:
			m.run = runID
			last = m
		}
		tail.end(last)
		select {
		case ch <- last:
		case <-life.Done():
		}
	}()
	return tea.Batch(wait(ch), s.sm.spinner())
}

// lookUp lists the filter's records and looks each up.
func (s *bulkFlow) lookUp() tea.Cmd {
	s.plan, s.lookupErr, s.sel = nil, nil, 0
	s.listedAt = time.Time{}
	s.sm.trail = nil
	b, f := s.bulk, s.filter
	cmd := s.launch(func(ctx context.Context, progress func(bulk.Progress)) tea.Msg {
		rows, err := b.List(ctx, f)
		if err != nil {
			return bulkPlanMsg{err: err}
		}
		var at time.Time
		for _, r := range rows {
			if r.DBTime.After(at) {
				at = r.DBTime
			}
		}
		plan, err := b.Lookup(ctx, f.String(), rows, progress)
		return bulkPlanMsg{plan: plan, err: err, listedAt: at}
	})
	s.sm.enter(stepLookups)
	return cmd
}

// decide accepts the chosen group, n records, with the reason given.
func (s *bulkFlow) decide(n int) tea.Cmd {
	s.res, s.acceptErr = bulk.GroupResult{}, nil
	b, plan, v, reason := s.bulk, s.plan, s.verdict, s.sm.reason.Value()
	cmd := s.launch(func(ctx context.Context, progress func(bulk.Progress)) tea.Msg {
		res, err := b.Accept(ctx, plan, v, bulk.AcceptParams{Reason: reason, Confirm: n}, progress)
		return bulkAcceptMsg{res: res, err: err}
	})
	s.sm.forward(stepDeciding)
	return cmd
}

// onBulkMsg takes the run's messages: progress, then its end.
func (s *bulkFlow) onBulkMsg(msg tea.Msg) (tea.Cmd, bool) {
	switch msg := msg.(type) {
	case bulkProgressMsg:
		if msg.run == s.runID && s.running() {
			s.progress = msg.p
			return wait(msg.ch), true
		}
		return nil, true
	case bulkPlanMsg:
		if msg.run != s.runID || !s.running() {
			return nil, true
		}
		s.finish()
		s.plan, s.lookupErr = msg.plan, msg.err
		if !msg.listedAt.IsZero() {
			s.listedAt = msg.listedAt
		}
		if msg.plan == nil {
			return nil, true // the records could not be listed: said on the step
		}
		s.sel = s.firstAcceptable()
		s.sm.trail = nil
		return s.sm.enter(stepPlan), true
	case bulkAcceptMsg:
		if msg.run != s.runID || !s.running() {
			return nil, true
		}
		s.finish()
		res := carried(s.tried[s.verdict], msg.res)
		s.res, s.acceptErr = res, msg.err
		// A group stopped before all its records' turn may be accepted
		// again: those it decided are then skipped as changed, and shown
		// as decided by this run.
		switch {
		case res.Items != nil && res.Counts[bulk.NotAttempted] == 0:
			s.accepted[s.verdict] = res
		case res.Items != nil:
			s.tried[s.verdict] = res
		}
		s.sm.reason.SetValue("")
		s.sm.typed.SetValue("")
		s.sm.trail = nil
		return s.sm.enter(stepResult), true
	}
	return nil, false
}

// carried is res, a group accepted again, with the records an earlier
// acceptance of it (prev) decided shown as decided: this time they were
// skipped as changed, changed by this run. Other records keep this
// acceptance's outcome.
func carried(prev, res bulk.GroupResult) bulk.GroupResult {
	if prev.Items == nil || len(prev.Items) != len(res.Items) {
		return res
	}
	items := slices.Clone(res.Items)
	counts := map[bulk.ItemOutcome]int{}
	for i, it := range items {
		if was := prev.Items[i]; it.Outcome == bulk.Skipped && was.ID == it.ID && was.Outcome == bulk.Decided {
			items[i] = was
		}
		counts[items[i].Outcome]++
	}
	res.Items, res.Counts = items, counts
	return res
}

// Update takes the run's messages, and only digits into the typed count: a paste or a key with
// anything else (a sign, a space, a NUL, another script's digits) is
// dropped whole and said, so that what confirms is what was asked.
func (s *bulkFlow) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if k, ok := msg.(tea.KeyMsg); ok && s.sm.step == stepConfirm && k.Type == tea.KeyRunes && !digits(k.Runes) {
		s.sm.inputErr = fmt.Sprintf("type the digits of %d only: nothing else is taken", s.group().Count())
		return s, nil
	}
	if cmd, ok := s.onBulkMsg(msg); ok {
		s.act()
		return s, cmd
	}
	if k, ok := msg.(tea.KeyMsg); ok && s.sm.offers(k) {
		if cmd, ok := s.keyAt(s.sm.step, k); ok {
			s.act()
			return s, cmd
		}
	}
	var cmd tea.Cmd
	s.sm, cmd = s.sm.Update(msg)
	s.act()
	return s, cmd
}

// digits tells whether rs are ASCII digits only.
func digits(rs []rune) bool {
	for _, r := range rs {
		if r < '0' || r > '9' {
			return false
		}
	}
	return len(rs) > 0
}

// selected is the group the cursor is on.
func (s *bulkFlow) selected() bulk.Group {
	if s.plan == nil || s.sel < 0 || s.sel >= len(s.plan.Groups) {
		return bulk.Group{}
	}
	return s.plan.Groups[s.sel]
}

// group is the group being accepted.
func (s *bulkFlow) group() bulk.Group {
	if s.plan == nil {
		return bulk.Group{}
	}
	if g := s.plan.Group(s.verdict); g != nil {
		return *g
	}
	return bulk.Group{}
}

// acceptable says why the selected group cannot be accepted, or nil.
func (s *bulkFlow) acceptable() error {
	if s.plan == nil {
		return errors.New("no plan yet")
	}
	return s.acceptableAt(s.sel)
}

// acceptableAt says why group i of the plan cannot be accepted, or nil.
func (s *bulkFlow) acceptableAt(i int) error {
	g := s.plan.Groups[i]
	_, done := s.accepted[g.Verdict]
	switch {
	case s.stopped():
		return errors.New("the lookups were stopped: nothing is decided from a partial run; r looks up again")
	case g.Count() == 0:
		return fmt.Errorf("the %s group is empty: nothing to decide", g.Verdict.Label())
	case g.Proposal == "":
		return fmt.Errorf("the %s records have no definite evidence: decide them one by one (r on a row of the list)", g.Verdict.Label())
	case done:
		return fmt.Errorf("the %s group is accepted already; its records were decided as shown", g.Verdict.Label())
	}
	return nil
}

// firstAcceptable is the first group that may be accepted, else the
// first.
func (s *bulkFlow) firstAcceptable() int {
	for i := range s.plan.Groups {
		if s.acceptableAt(i) == nil {
			return i
		}
	}
	return 0
}

func (s *bulkFlow) title() string {
	head := "Bulk reconciliation"
	return " " + s.sm.st.Title.Render(head) + "  " + truncate(termtext.Clean(s.filter.String()), max(1, s.sm.w-width(head)-4))
}

// verdictGlyph pairs each verdict with a glyph, so that it is never told
// by colour alone.
func verdictGlyph(v bulk.Verdict) string {
	switch {
	case v.Conflicted():
		return glyphConflicted
	}
	switch v {
	case bulk.Found:
		return "✓"
	case bulk.NotFound:
		return "○"
	case bulk.NoAnswer:
		return "?"
	}
	return "✗"
}

// countsText words a progress's counts in the order of keys.
func countsText(counts map[string]int, keys []string) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, strings.ReplaceAll(k, "_", " ")+" "+count(int64(counts[k])))
	}
	return strings.Join(parts, " · ")
}

func (s *bulkFlow) refusedView() []string {
	out := s.sm.heading("R cannot reconcile this list by lookup")
	out = append(out, "")
	s.sm.para(&out, "✗ "+termtext.Clean(s.refusal.Error()), s.sm.st.Error.Render)
	out = append(out, "")
	s.sm.para(&out, "Nothing was looked up or decided. esc goes back to the list; / edits its filter.", s.sm.st.Muted.Render)
	return out
}

func (s *bulkFlow) lookupsView() []string {
	var out []string
	p := s.progress
	switch {
	case s.running() && p.Total == 0:
		out = append(out, " "+spinFrames[s.sm.frame]+" listing the stuck records of "+truncate(termtext.Clean(s.filter.String()), max(1, s.sm.w-40))+"…")
	case s.running():
		out = append(out, s.sm.heading(fmt.Sprintf("Asking the provider about %s stuck record%s", count(int64(p.Total)), plural(p.Total)))...)
		out = append(out, "", " "+progressBar(int64(p.Done), int64(p.Total), s.sm.w-2), "")
		s.sm.para(&out, fmt.Sprintf("%s of %s answered · %s", count(int64(p.Done)), count(int64(p.Total)),
			countsText(p.Counts, verdictKeys())), nil)
		out = append(out, "")
		if s.stopping {
			s.sm.para(&out, "stopping: the lookups under way are cut short; what was answered is kept", s.sm.st.Stuck.Render)
		} else {
			s.sm.para(&out, "Nothing is decided while the provider is asked. esc stops: what was answered is kept.", s.sm.st.Muted.Render)
		}
	case errors.Is(s.lookupErr, context.Canceled):
		s.sm.para(&out, "Stopped before the records were listed: nothing was looked up or decided.", s.sm.st.Stuck.Render)
		out = append(out, "")
		s.sm.para(&out, "r starts again; esc goes back to the list.", s.sm.st.Muted.Render)
	case s.lookupErr != nil:
		s.sm.para(&out, "✗ could not list the records: "+termtext.Clean(s.lookupErr.Error()), s.sm.st.Error.Render)
		out = append(out, "")
		s.sm.para(&out, "Nothing was looked up or decided. r tries again; esc goes back to the list.", s.sm.st.Muted.Render)
	}
	return out
}

// sampled are the first of items, each with its note, and how many more
// there are.
func (s *bulkFlow) sampled(items []bulk.ItemResult, note func(bulk.ItemResult) string, more string) []string {
	var out []string
	for i, it := range items {
		if i == bulkListed {
			out = append(out, s.sm.st.Muted.Render(truncate(fmt.Sprintf("        … and %s more, %s", count(int64(len(items)-i)), more), s.sm.w)))
			break
		}
		out = append(out, s.itemLine(it.Item, note(it)))
	}
	return out
}

// tookText is how long a step took: milliseconds under a second, tenths
// of a second under a minute.
func tookText(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return ShortDuration(d)
}

// verdictKeys are the verdicts as progress counts name them.
func verdictKeys() []string {
	out := make([]string, len(bulk.Verdicts))
	for i, v := range bulk.Verdicts {
		out[i] = string(v)
	}
	return out
}

// outcomeKeys are the outcomes as progress counts name them.
func outcomeKeys() []string {
	out := make([]string, len(bulk.ItemOutcomes))
	for i, o := range bulk.ItemOutcomes {
		out[i] = string(o)
	}
	return out
}

func (s *bulkFlow) planView() []string {
	var out []string
	p := s.plan
	asked := p.Listed - len(p.NotAsked)
	switch {
	case p.Listed == 0:
		out = append(out, s.sm.heading("No stuck record you may see matches "+termtext.Clean(s.filter.String()))...)
		out = append(out, "")
		s.sm.para(&out, "Nothing to look up or decide. esc goes back to the list.", s.sm.st.Muted.Render)
		return out
	case s.stopped():
		out = append(out, s.sm.heading(fmt.Sprintf("Stopped: %s of %s records asked, %s not asked", count(int64(asked)),
			count(int64(p.Listed)), count(int64(len(p.NotAsked)))))...)
		s.sm.para(&out, "Nothing was decided. What was answered is shown; r looks every record up again.", s.sm.st.Stuck.Render)
	default:
		out = append(out, s.sm.heading(fmt.Sprintf("%s stuck record%s looked up in %s", count(int64(p.Listed)), plural(p.Listed), tookText(p.Took)))...)
	}
	s.sm.field(&out, "batch", termtext.Clean(p.BatchID)+" (each decision's audit record carries it)")
	out = append(out, "")
	// The labels' column is as wide as the widest label: a conflicted
	// group's is longer than the lookup verdicts'.
	labelW := 9
	for _, g := range p.Groups {
		labelW = max(labelW, width(g.Verdict.Label()))
	}
	for i, g := range p.Groups {
		mark := "  "
		if i == s.sel {
			mark = "▸ "
		}
		label := pad(g.Verdict.Label(), labelW)
		head := fmt.Sprintf("%s%s %s %6s  → %s", mark, verdictGlyph(g.Verdict), label, count(int64(g.Count())), g.Verdict.ProposalText())
		if r, ok := s.accepted[g.Verdict]; ok {
			head = fmt.Sprintf("%s%s %s %6s  ✓ accepted: %s", mark, verdictGlyph(g.Verdict), label, count(int64(g.Count())),
				outcomesText(r))
		}
		line := truncate(" "+head, s.sm.w)
		if i == s.sel {
			line = s.sm.st.Selected.Render(line)
		}
		out = append(out, line)
		if g.Verdict.Conflicted() {
			_, conflicts := g.Conflicted()
			out = append(out, s.sm.st.Conflict.Render(truncate(fmt.Sprintf("      %s unreviewed conflicting attempts (%s in all): accept knowingly",
				glyphConflicted, count(int64(conflicts))), s.sm.w)))
		}
		for _, item := range g.Samples(bulkSamples) {
			out = append(out, s.itemLine(item, sampleNote(item)))
		}
		if n := g.Count() - bulkSamples; n > 0 {
			more := fmt.Sprintf("        … and %s more", count(int64(n)))
			if i == s.sel {
				more += " · o shows them all"
			}
			out = append(out, s.sm.st.Muted.Render(truncate(more, s.sm.w)))
		}
	}
	out = append(out, "")
	if s.stopped() {
		s.sm.para(&out, "A stopped run's groups are not accepted: r looks every record up again, esc goes back to the list.",
			s.sm.st.Muted.Render)
		return out
	}
	s.sm.para(&out, "enter accepts the selected group with one reason and its count typed; each record is then decided "+
		"by itself at the version looked up, and one that changed since is skipped.", s.sm.st.Muted.Render)
	return out
}

// sampleNote is what a sample shows after its identity: the provider's
// reference of a found record, else what the lookup said.
func sampleNote(item bulk.Item) string {
	note := item.Note
	if item.Verdict.Lookup() == bulk.Found {
		note = "ref " + item.Ref
	}
	if item.Conflicted {
		note = fmt.Sprintf("%s %d conflicting · %s", glyphConflicted, item.ConflictCount, note)
	}
	return note
}

// groupNoun is what a group's records are called in its headings: a
// conflicted group's name their conflicts.
func groupNoun(g bulk.Group) string {
	noun := "record" + plural(g.Count())
	if g.Verdict.Conflicted() {
		noun += " with unreviewed conflicting attempts"
	}
	return noun
}

// conflictedText says what sets a conflicted group apart: its records'
// conflicting attempts nobody reviewed.
func conflictedText(g bulk.Group) string {
	records, conflicts := g.Conflicted()
	each := "each has"
	if records == 1 {
		each = "it has"
	}
	return fmt.Sprintf("%s %s conflicting attempts nobody reviewed (%s in all)", glyphConflicted, each, count(int64(conflicts)))
}

// keyFit is how the keys of the plan's records are cut: what they share
// gives way before what tells them apart. The plan's records are every
// record a sample or a result shows.
func (s *bulkFlow) keyFit() keyFit {
	if s.plan != s.keyCutOf {
		var keys []string
		if s.plan != nil {
			for _, g := range s.plan.Groups {
				for _, it := range g.Items {
					keys = append(keys, termtext.Clean(it.Key))
				}
			}
		}
		s.keyCut, s.keyCutOf = newKeyFit(keys), s.plan
	}
	return s.keyCut
}

// itemLine is one record: id, tenant, key and a note, cut to the width.
func (s *bulkFlow) itemLine(item bulk.Item, note string) string {
	return bulkItemLine(s.keyFit(), s.sm.w, item, note)
}

// bulkItemLine is one record of a plan at width w, its key cut by fit.
func bulkItemLine(fit keyFit, w int, item bulk.Item, note string) string {
	kw := min(24, max(12, w/5))
	line := "    " + padLeft(strconv.FormatInt(item.ID, 10), 7) + "  " + pad(truncate(termtext.Clean(item.Tenant), 10), 10) + "  " +
		fit.fit(termtext.Clean(item.Key), kw)
	if note != "" {
		line = pad(line, 4+7+2+10+2+kw) + "  " + termtext.Clean(note)
	}
	return truncate(line, w)
}

// outcomesText is a result's counts, every outcome that happened.
func outcomesText(r bulk.GroupResult) string {
	var parts []string
	for _, o := range bulk.ItemOutcomes {
		if n := r.Counts[o]; n > 0 || o == bulk.Decided {
			parts = append(parts, count(int64(n))+" "+o.Label())
		}
	}
	return strings.Join(parts, ", ")
}

// consequence says what the group's decision does to each record.
func consequence(g bulk.Group) string {
	if k, ok := reconcile.KindOf(g.Proposal); ok && k.Words.Each != "" {
		return k.Words.Each
	}
	return "-"
}

// groupLines are what accepting the group depends on, the reason too
// once given, and samples of its records last.
func (s *bulkFlow) groupLines(g bulk.Group, reason bool) []string {
	var out []string
	s.sm.field(&out, "group", fmt.Sprintf("%s %s: %s record%s (lookups of batch %s)", verdictGlyph(g.Verdict), g.Verdict.Label(),
		count(int64(g.Count())), plural(g.Count()), termtext.Clean(s.plan.BatchID)))
	s.sm.field(&out, "decision", consequence(g))
	if g.Verdict.Conflicted() {
		s.sm.field(&out, "conflicts", conflictedText(g)+
			": the key was reused with another intent; accepting decides the records anyway, and their attempts stay unreviewed "+
			"(:conflicts reviews them)")
	}
	if reason {
		s.sm.field(&out, "reason", termtext.Clean(strings.TrimSpace(s.sm.reason.Value())))
	}
	s.sm.field(&out, "each", "decided alone at the version looked up, with its own audit record; "+
		"one that changed since is skipped and listed; nothing else is touched")
	out = append(out, " "+s.sm.st.Muted.Render("e.g."))
	for _, item := range g.Samples(bulkSamples) {
		out = append(out, s.itemLine(item, sampleNote(item)))
	}
	return out
}

func (s *bulkFlow) reasonView() []string {
	g := s.group()
	out := s.sm.heading(fmt.Sprintf("Accept the %s group: %s %s → %s", g.Verdict.Label(), count(int64(g.Count())), groupNoun(g),
		decisionInfo[g.Proposal].name))
	out = append(out, "")
	out = append(out, s.groupLines(g, false)...)
	return append(out, "")
}

func (s *bulkFlow) confirmView() []string {
	g := s.group()
	out := s.sm.heading(fmt.Sprintf("Confirm: decide %s %s as %s", count(int64(g.Count())), groupNoun(g), decisionInfo[g.Proposal].name))
	out = append(out, "")
	return append(out, s.groupLines(g, true)...)
}

func (s *bulkFlow) decidingView() []string {
	g := s.group()
	p := s.progress
	total := max(p.Total, g.Count())
	out := s.sm.heading(fmt.Sprintf("Deciding %s record%s as %s", count(int64(total)), plural(total), decisionInfo[g.Proposal].name))
	out = append(out, "", " "+progressBar(int64(p.Done), int64(total), s.sm.w-2), "")
	s.sm.para(&out, fmt.Sprintf("%s of %s done · %s", count(int64(p.Done)), count(int64(total)),
		countsText(p.Counts, outcomeKeys()[:4])), nil)
	out = append(out, "")
	switch {
	case s.stopping && s.interrupted:
		s.sm.para(&out, "stopping at ctrl+c: no decision starts; those under way finish, so that each is known, and "+
			"then what was decided shows here. ctrl+c again quits at once; the terminal is then told what was decided.",
			s.sm.st.Stuck.Render)
	case s.stopping:
		s.sm.para(&out, "stopping: no decision starts; those under way finish, so that each is known", s.sm.st.Stuck.Render)
	default:
		s.sm.para(&out, "esc stops starting decisions; those under way finish.", s.sm.st.Muted.Render)
	}
	return out
}

func (s *bulkFlow) resultLines() []string {
	r := s.res
	var out []string
	head := fmt.Sprintf("%s → %s: %s", r.Verdict.Label(), decisionInfo[r.Decision].name, outcomesText(r))
	switch {
	case s.acceptErr != nil && r.Items == nil:
		s.sm.para(&out, "✗ nothing was decided: "+termtext.Clean(s.acceptErr.Error()), s.sm.st.Error.Render)
		out = append(out, "")
		s.sm.para(&out, "enter goes back to the plan; esc to the list.", s.sm.st.Muted.Render)
		return out
	case s.acceptErr != nil && r.Counts[bulk.NotAttempted] == len(r.Items):
		s.sm.para(&out, "✗ "+head+": stopped before the first decision, nothing was decided", s.sm.st.Error.Render)
		s.sm.para(&out, termtext.Clean(s.acceptErr.Error()), s.sm.st.Error.Render)
	case errors.Is(s.acceptErr, context.Canceled) && r.Counts[bulk.NotAttempted] == 0 && r.Items != nil:
		// The stop came once every decision had started: nothing was
		// left undone, and the headline does not say it failed.
		glyph, style := "⚠ ", s.sm.st.Stuck.Render
		if r.Counts[bulk.Decided] == len(r.Items) {
			glyph, style = "✓ ", s.sm.st.Completed.Render
		}
		s.sm.para(&out, glyph+head, style)
		key, then := "esc", ""
		if s.interrupted {
			key, then = "ctrl+c", " ctrl+c again or q quits (the terminal is told what was decided); enter goes back to the plan."
		}
		s.sm.para(&out, key+" came after every record's decision had started: each had its turn, none was left out."+then,
			s.sm.st.Muted.Render)
	case errors.Is(s.acceptErr, context.Canceled) && s.interrupted:
		s.sm.para(&out, "✗ "+head, s.sm.st.Error.Render)
		s.sm.para(&out, "stopped at ctrl+c: the decisions under way finished, no other started. ctrl+c again or q quits "+
			"(the terminal is told what was decided); enter goes back to the plan.", s.sm.st.Error.Render)
	case errors.Is(s.acceptErr, context.Canceled):
		s.sm.para(&out, "✗ "+head, s.sm.st.Error.Render)
		s.sm.para(&out, "stopped at esc: the decisions under way finished, no other started", s.sm.st.Error.Render)
	case s.acceptErr != nil:
		s.sm.para(&out, "✗ "+head, s.sm.st.Error.Render)
		s.sm.para(&out, termtext.Clean(s.acceptErr.Error()), s.sm.st.Error.Render)
	case r.Counts[bulk.Decided] == len(r.Items):
		s.sm.para(&out, "✓ "+head, s.sm.st.Completed.Render)
	default:
		s.sm.para(&out, "⚠ "+head, s.sm.st.Stuck.Render)
	}
	out = append(out, "")
	s.sm.field(&out, "batch", termtext.Clean(r.BatchID)+", in each decision's audit record")
	if r.Took > 0 {
		s.sm.field(&out, "took", tookText(r.Took))
	}
	sections := []struct {
		o    bulk.ItemOutcome
		name string
	}{
		{bulk.Skipped, "Skipped: changed since the lookup, not decided"},
		{bulk.Refused, "Refused by the database (each refusal audited)"},
		{bulk.Failed, "Failed: no answer (each record's history says whether it took effect)"},
	}
	for _, sec := range sections {
		items := r.Only(sec.o)
		if len(items) == 0 {
			continue
		}
		out = append(out, "", " "+s.sm.st.Title.Render(fmt.Sprintf("%s (%s)", sec.name, count(int64(len(items))))))
		for _, it := range items {
			// The reason is what the operator acts on: whole, wrapped.
			note := it.Message
			if it.Audit != "" {
				note += " · audit " + it.Audit
			}
			out = append(out, s.itemLine(it.Item, ""))
			if note == "" {
				continue
			}
			for _, l := range wrap(termtext.Clean(note), max(1, s.sm.w-10)) {
				out = append(out, "          "+l)
			}
		}
	}
	if left := r.Only(bulk.NotAttempted); len(left) > 0 {
		out = append(out, "", " "+s.sm.st.Title.Render(fmt.Sprintf("Not attempted: the group stopped before their turn (%s)",
			count(int64(len(left))))))
		out = append(out, s.sampled(left, func(it bulk.ItemResult) string { return "" },
			"still stuck; accept the group again to decide them")...)
	}
	if decided := r.Only(bulk.Decided); len(decided) > 0 {
		out = append(out, "", " "+s.sm.st.Title.Render(fmt.Sprintf("Decided (%s)", count(int64(len(decided))))))
		out = append(out, s.sampled(decided, func(it bulk.ItemResult) string {
			return stateText(readmodel.State(it.State)) + " · audit " + it.Audit
		}, "each with its own audit record")...)
	}
	out = append(out, "")
	s.sm.para(&out, "enter goes back to the plan to accept another group; esc goes back to the list, refreshed.", s.sm.st.Muted.Render)
	return out
}
