package ui

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile"
)

// The smallest terminal the console lays out in.
const (
	minWidth  = 60
	minHeight = 20
)

// refreshSteps are the intervals + and - step through.
var refreshSteps = []time.Duration{
	500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute,
}

// refresher is the polling state: the interval, pause, and the freeze
// that holds refresh while the operator moves through a list.
type refresher struct {
	every  time.Duration
	paused bool
	frozen bool
	// due records a refresh skipped while frozen, to run at the thaw.
	due bool
	// gen numbers the tick chain; a pause or a new interval starts a new
	// one and the old chain's ticks are ignored.
	gen int
	// moves numbers the operator's movements; only the last one thaws.
	moves int
}

// Model is the console's root model. It handles global keys, the window
// size, refresh and navigation, and forwards everything else to the
// active screen.
type Model struct {
	opts  Config
	keys  KeyMap
	st    Styles
	f     fetcher
	after func(time.Duration, tea.Msg) tea.Cmd

	w, h int

	connected   bool
	info        readmodel.Info
	dbTime      time.Time
	lastErr     error
	unreachable bool
	downSince   time.Time
	probeSeq    int
	probing     bool
	note        string
	// pending is the start command (Config.Goto), parsed, waiting for
	// the first connection.
	pending tea.Msg

	// caps are what the connected role may do, asked once connected
	// (again only while unknown) when the console may write at all.
	caps       reconcile.Capabilities
	capsKnown  bool
	capsAsking bool
	capsSeq    int

	refresh  refresher
	showHelp bool
	// showErr shows the last error whole (E) in place of the screen.
	showErr bool
	cmd     cmdline
	help    help.Model

	// connect is shown until the database first answers; screens are
	// the others (screenKinds), by id.
	connect *connectScreen
	screens map[screenID]screen
	stack   []screen
	// hist is where the operator jumped away from, for esc and -.
	hist history
	// left is the place esc last left, while nothing else moved since: -
	// returns to it, as k9s's - returns to the last view.
	left *place
	// armed is the flow a first ctrl+c stopped: a second ctrl+c, or q,
	// quits; any other key carries on.
	armed interrupter
}

// New returns the console's model over src.
func New(src Source, opts Config) tea.Model {
	return newModel(context.Background(), src, opts, nil)
}

// newModel builds the model; a nil renderer means one on stdout that
// honours NO_COLOR.
func newModel(ctx context.Context, src Source, opts Config, r *lipgloss.Renderer) *Model {
	opts = opts.withDefaults()
	if r == nil {
		r = lipgloss.NewRenderer(os.Stdout)
	}
	if opts.NoColor {
		r.SetColorProfile(termenv.Ascii)
	}
	st := NewStyles(r)
	keys := DefaultKeyMap()
	var m *Model
	d := deps{keys: keys, st: st, f: fetcher{src: src, ctx: ctx, timeout: opts.Timeout},
		after: func(dur time.Duration, msg tea.Msg) tea.Cmd { return m.after(dur, msg) }}
	h := help.New()
	h.ShortSeparator = " · "
	h.Styles = help.Styles{
		ShortKey: st.HelpKey, ShortDesc: st.HelpDesc, ShortSeparator: st.HelpSep, Ellipsis: st.HelpSep,
		FullKey: st.HelpKey, FullDesc: st.HelpDesc, FullSeparator: st.HelpSep,
	}
	m = &Model{
		opts: opts, keys: keys, st: st, f: d.f,
		after:   func(d time.Duration, msg tea.Msg) tea.Cmd { return tea.Tick(d, func(time.Time) tea.Msg { return msg }) },
		refresh: refresher{every: opts.Refresh},
		cmd:     newCmdline(keys, st),
		help:    h,
		connect: newConnect(d, opts.Context),
		screens: make(map[screenID]screen, len(screenKinds)),
	}
	for _, k := range screenKinds {
		m.screens[k.id] = k.build(d, opts)
	}
	m.connect.every = opts.Refresh
	m.stack = []screen{m.connect}
	m.syncKeys()
	return m
}

// Init connects, starts the refresh clock and hands over the start
// command, if any.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.connect.fetch(), m.tick()}
	if line := m.opts.Goto; line != "" {
		cmds = append(cmds, func() tea.Msg { return gotoMsg{line: line} })
	}
	return tea.Batch(cmds...)
}

// gotoMsg carries the start command (Config.Goto).
type gotoMsg struct{ line string }

// onGoto runs the start command as if typed on the : line; before the
// database answers it waits for the connection instead of being refused
// as a typed one is.
func (m *Model) onGoto(msg gotoMsg) tea.Cmd {
	out, err := parseCommand(msg.line)
	switch {
	case err != nil:
		m.note = "--goto: " + err.Error()
		return nil
	case out == nil:
		return nil
	}
	if _, ok := out.(navMsg); ok && !m.connected {
		m.pending = out
		return nil
	}
	return m.command(out)
}

// Update is a short dispatch; the work is in the handlers.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		cmd = m.resize(msg.Width, msg.Height)
	case tea.KeyMsg:
		cmd = m.handleKey(msg)
	case tickMsg:
		cmd = m.onTick(msg)
	case thawMsg:
		cmd = m.onThaw(msg)
	case connectMsg:
		cmd = m.onConnect(msg)
	case probeMsg:
		cmd = m.onProbe(msg)
	case capsMsg:
		m.onCaps(msg)
	case noteMsg:
		m.note = string(msg)
	case gotoMsg:
		cmd = m.onGoto(msg)
	case result:
		cmd = m.deliver(msg)
	default:
		cmd = tea.Batch(m.answered(msg), m.forward(m.active(), msg))
	}
	m.syncKeys()
	return m, cmd
}

func (m *Model) active() screen { return m.stack[len(m.stack)-1] }

func (m *Model) bodyHeight() int { return max(1, m.h-3) }

func (m *Model) resize(w, h int) tea.Cmd {
	m.w, m.h = w, h
	m.help.Width = max(1, w-1)
	m.connect.SetSize(w, m.bodyHeight())
	for _, s := range m.screens {
		s.SetSize(w, m.bodyHeight())
	}
	if m.connected {
		return m.active().refresh()
	}
	return nil
}

// handleKey: ctrl+c quits, but in a flow first stops it (onInterrupt); an
// open command line or filter bar takes every other key; then the global
// keys; the rest goes to the screen.
func (m *Model) handleKey(msg tea.KeyMsg) tea.Cmd {
	m.note = ""
	if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
		// Keys typed quickly arrive together (":ops", "jjj"): take them
		// one at a time, as they were typed.
		cmds := make([]tea.Cmd, 0, len(msg.Runes))
		for _, r := range msg.Runes {
			cmds = append(cmds, m.handleKey(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}))
			m.syncKeys()
		}
		return tea.Batch(cmds...)
	}
	if key.Matches(msg, m.keys.ForceQuit) {
		return m.onInterrupt()
	}
	if m.armed != nil {
		armed := m.armed
		m.armed = nil
		if key.Matches(msg, m.keys.Quit) && !m.cmd.active && !m.active().capturing() {
			m.armed = armed
			return tea.Quit
		}
	}
	if m.cmd.active {
		out, cmd := m.cmd.update(msg)
		return tea.Batch(cmd, m.command(out))
	}
	if m.tooSmall() {
		// Nothing on screen to act on: q does not quit here (the
		// operator may be mid-flow and only resized); ctrl+c does.
		return nil
	}
	if m.showHelp {
		if key.Matches(msg, m.keys.Help, m.keys.Back, m.keys.Quit) {
			m.showHelp = false
		}
		return nil
	}
	if m.showErr {
		if key.Matches(msg, m.keys.ErrorDetail, m.keys.Back, m.keys.Quit) {
			m.showErr = false
		}
		return nil
	}
	s := m.active()
	if s.capturing() {
		return m.forward(s, msg)
	}
	switch {
	case key.Matches(msg, m.keys.Quit):
		// q quits from the overview only; elsewhere it goes back.
		if s.id() == screenOverview {
			return tea.Quit
		}
		return m.goBack()
	case key.Matches(msg, m.keys.Back):
		if handled, cmd := s.back(); handled {
			return cmd
		}
		return m.goBack()
	case key.Matches(msg, m.keys.Help):
		m.showHelp = true
		return nil
	case key.Matches(msg, m.keys.ErrorDetail) && m.lastErr != nil:
		m.showErr = true
		return nil
	case key.Matches(msg, m.keys.Toggle):
		return m.toggle()
	case key.Matches(msg, m.keys.Command):
		return m.cmd.open()
	case key.Matches(msg, m.keys.Pause):
		return m.togglePause()
	case key.Matches(msg, m.keys.Faster):
		return m.step(-1)
	case key.Matches(msg, m.keys.Slower):
		return m.step(+1)
	case key.Matches(msg, m.keys.Retry):
		return m.connect.fetch()
	case m.moving(msg):
		return tea.Batch(m.forward(s, msg), m.freeze())
	}
	return m.forward(s, msg)
}

// forward hands a message to a screen and goes where the screen asks.
func (m *Model) forward(s screen, msg tea.Msg) tea.Cmd {
	_, cmd := s.Update(msg)
	if n, ok := s.follow(); ok {
		return tea.Batch(cmd, m.open(n, false))
	}
	return cmd
}

// moving tells whether a key moves the cursor (which freezes refresh).
func (m *Model) moving(msg tea.KeyMsg) bool {
	k := m.keys
	return key.Matches(msg, k.Up, k.Down, k.Left, k.Right, k.Top, k.Bottom)
}

// command acts on an entered command line.
func (m *Model) command(out tea.Msg) tea.Cmd {
	switch out := out.(type) {
	case nil:
		return nil
	case tea.QuitMsg:
		return tea.Quit
	case noteMsg:
		m.note = string(out)
		return nil
	case navMsg:
		if !m.connected {
			m.note = "not connected yet: the command runs once the database answers"
			return nil
		}
		return m.open(out, true)
	}
	return nil
}

// navigate shows the screen a navigation message is for; the screen
// says where on the stack it goes.
func (m *Model) navigate(n navMsg) tea.Cmd { return m.open(n, false) }

// open shows the screen n is for. Where the operator was goes into the
// history when they jump (a : command, jump) or the screen opens off the
// stack rather than on top of it or back down it.
func (m *Model) open(n navMsg, jump bool) tea.Cmd {
	if !m.connected {
		return nil
	}
	m.showHelp, m.showErr = false, false
	if _, ok := n.(navBack); ok {
		return m.goBack()
	}
	s, ok := m.screens[n.target()]
	if !ok {
		return nil
	}
	m.left = nil
	was := placeOf(m.stack)
	stack, cmd, ok := s.open(n, opening{home: m.screens[screenOverview], stack: m.stack, perms: m.perms()})
	if !ok {
		return nil
	}
	back := len(stack) <= len(m.stack) && slices.Equal(m.stack[:len(stack)], stack)
	if m.stack[0] != m.connect && (jump || !was.extends(stack) && !back) && !was.same(placeOf(stack)) {
		was.landed = len(stack)
		m.hist.push(was)
	}
	m.setStack(stack...)
	return cmd
}

// setStack shows the screens given; a screen that is no longer on the
// stack forgets what it must not keep (a revealed value).
func (m *Model) setStack(stack ...screen) {
	for _, s := range m.stack {
		if l, ok := s.(leaver); ok && !slices.Contains(stack, s) {
			l.leave()
		}
	}
	m.stack = append([]screen(nil), stack...)
}

// goBack leaves the active screen: from the screen the last jump landed
// on, back to where the operator jumped from, as it was; from a screen
// drilled into, down the stack to the one it was opened from; with no
// history, to the overview. It never quits.
func (m *Model) goBack() tea.Cmd {
	_, inFlow := m.active().(flow)
	m.left = nil
	if p, ok := m.hist.top(); ok && !inFlow && len(m.stack) <= p.landed {
		here := placeOf(m.stack)
		m.hist.pop()
		cmd := m.restore(p)
		m.left = here.unlessFlow()
		return cmd
	}
	if len(m.stack) <= 1 {
		return nil
	}
	if !inFlow {
		here := placeOf(m.stack)
		defer func() { m.left = here.unlessFlow() }()
	}
	m.setStack(m.stack[:len(m.stack)-1]...)
	return m.active().refresh()
}

// toggle swaps where the operator is with the place before it (k9s's -):
// pressed again, it swaps back.
func (m *Model) toggle() tea.Cmd {
	if l := m.left; l != nil {
		// Back to the place esc left; - again returns here.
		m.left = nil
		here := placeOf(m.stack)
		here.landed = len(l.stack)
		m.hist.push(here)
		return m.restore(*l)
	}
	p, ok := m.hist.pop()
	if !ok {
		m.note = "no previous screen yet: - switches between the last two screens"
		return nil
	}
	here := placeOf(m.stack)
	here.landed = len(p.stack)
	m.hist.push(here)
	return m.restore(p)
}

// restore shows a place again, each screen as it was marked, read afresh.
func (m *Model) restore(p place) tea.Cmd {
	m.showHelp = false
	var cmds []tea.Cmd
	for i, s := range p.stack {
		if mk, ok := s.(marker); ok && p.marks[i] != nil {
			cmds = append(cmds, mk.restore(p.marks[i]))
		}
	}
	m.setStack(p.stack...)
	if _, ok := m.active().(marker); !ok {
		cmds = append(cmds, m.active().refresh())
	}
	return tea.Batch(cmds...)
}

// perms are what the console offers the role now.
func (m *Model) perms() permits { return permits{decide: m.canDecide(), purge: m.canPurge()} }

// canDecide tells whether the console offers writes: a Decider, not
// read-only, and a role the database lets decide.
func (m *Model) canDecide() bool {
	return m.opts.writable() && m.capsKnown && m.caps.Decide
}

// canPurge tells whether the console offers purges: a Purger, not
// read-only, and a role the database lets purge.
func (m *Model) canPurge() bool {
	return m.opts.Purger != nil && m.opts.writable() && m.capsKnown && m.caps.Purge
}

// askCaps asks the database once what the role may do; nil when the
// console offers no writes, the answer is known or a question is out.
func (m *Model) askCaps() tea.Cmd {
	if !m.opts.writable() || m.capsKnown || m.capsAsking || !m.connected {
		return nil
	}
	m.capsAsking = true
	m.capsSeq++
	seq, dec := m.capsSeq, m.opts.Decider
	return run(m.f, dec.Capabilities, func(c reconcile.Capabilities, err error) tea.Msg {
		return capsMsg{seq: seq, caps: c, err: err}
	})
}

// onCaps keeps the role's capabilities; a failure is asked again at the
// next refresh, and writes stay hidden until then.
func (m *Model) onCaps(msg capsMsg) {
	if msg.seq != m.capsSeq {
		return
	}
	m.capsAsking = false
	if msg.err != nil {
		m.note = "cannot tell what your role may do yet (" + termtext.Clean(msg.err.Error()) + "): decisions stay hidden"
		return
	}
	m.caps, m.capsKnown = msg.caps, true
	for _, s := range m.screens {
		if p, ok := s.(permitted); ok {
			p.allow(m.perms())
		}
	}
}

// deliver hands an answer to the screen that asked, if it is that
// screen's latest request, and keeps the status (database time, last
// error, reachability) from it.
func (m *Model) deliver(r result) tea.Cmd {
	s, ok := m.screens[r.owner()]
	if !ok || !s.current(r.sequence()) {
		return nil // stale: a newer request is on its way
	}
	_, cmd := s.Update(r)
	switch err := r.failure(); {
	case err == nil:
		if t := r.asOf(); t.After(m.dbTime) {
			m.dbTime = t
		}
		m.lastErr = nil
		m.unreachable = false
	case errNoRecord(err):
		// The screen explains it; the database answered.
		m.unreachable = false
	default:
		m.lastErr = err
		return tea.Batch(cmd, m.probe())
	}
	return cmd
}

// answered keeps the status from a flow's query as deliver does from a
// poll's (a flow does not poll): one that succeeds clears the unreachable
// banner and the last error at once, and one the database did not answer
// is probed, so that the banner says so and clears when it answers again.
func (m *Model) answered(msg tea.Msg) tea.Cmd {
	a, ok := msg.(dbAnswer)
	if !ok {
		return nil
	}
	if err := a.dbErr(); err != nil {
		m.lastErr = err
		return m.probe()
	}
	return m.reachable()
}

// dbAnswer is a flow's message that carries a database answer (a record
// read, a write's answer): dbErr is nil when the database answered.
type dbAnswer interface{ dbErr() error }

// reachable is the database answering again: the banner and the last
// error go, and a flow waiting on the database to find something out (was
// a write it did not answer applied?) asks again.
func (m *Model) reachable() tea.Cmd {
	was := m.unreachable || m.lastErr != nil
	m.unreachable, m.lastErr = false, nil
	if was && m.inFlow() {
		return m.forward(m.active(), dbBackMsg{})
	}
	return nil
}

// inFlow tells whether the active screen is a flow, which does not poll,
// or a bulk plan's group, the bulk flow's records as of its listing, or a
// purge, which reads nothing between its count and its run (its status
// bar said "⟳ 1s" over a clock that had stopped).
func (m *Model) inFlow() bool {
	switch m.active().(type) {
	case flow, *bulkGroupScreen, *purgeScreen:
		return true
	}
	return false
}

// probe asks for the server info after a failed poll, to tell an
// unreachable database from a failing query.
func (m *Model) probe() tea.Cmd {
	if m.probing {
		return nil
	}
	m.probing = true
	m.probeSeq++
	return m.f.probe(m.probeSeq)
}

func (m *Model) onProbe(msg probeMsg) tea.Cmd {
	if msg.seq != m.probeSeq {
		return nil
	}
	m.probing = false
	if msg.reachable() {
		if msg.err == nil {
			m.info = msg.info
		}
		if m.inFlow() && msg.err == nil {
			// A flow does not poll: the probe is the query that says
			// the database answers again.
			return m.reachable()
		}
		m.unreachable = false
		return nil
	}
	if !m.unreachable {
		m.unreachable = true
		m.downSince = m.dbTime
	}
	m.lastErr = msg.err
	return nil
}

func (m *Model) onConnect(msg connectMsg) tea.Cmd {
	if !m.connect.current(msg.seq) {
		return nil
	}
	m.connect.Update(msg)
	if !msg.reachable() || m.connected {
		return nil
	}
	m.connected = true
	m.info = msg.info
	m.dbTime = msg.info.DBTime
	m.lastErr = msg.err // an old schema, say: reachable but worth saying
	// The overview is always below; a start command goes on from there.
	cmds := []tea.Cmd{m.navigate(overviewNav{}), m.askCaps()}
	if m.pending != nil {
		cmds = append(cmds, m.command(m.pending))
		m.pending = nil
	}
	return tea.Batch(cmds...)
}

// tick schedules the next refresh of the current chain.
func (m *Model) tick() tea.Cmd {
	return m.after(m.refresh.every, tickMsg{gen: m.refresh.gen})
}

func (m *Model) onTick(msg tickMsg) tea.Cmd {
	if msg.gen != m.refresh.gen || m.refresh.paused {
		return nil
	}
	next := tea.Batch(m.tick(), m.askCaps())
	if m.refresh.frozen {
		m.refresh.due = true
		return next
	}
	return tea.Batch(next, m.poll())
}

// poll refreshes what is on screen. A flow works on the record as the
// operator saw it and reads nothing: while the database is away (or the
// last query failed) it is probed, so the message line clears the moment
// the database answers again.
func (m *Model) poll() tea.Cmd {
	if !m.connected {
		return m.connect.refresh()
	}
	if m.inFlow() && (m.unreachable || m.lastErr != nil) {
		return tea.Batch(m.active().refresh(), m.probe())
	}
	return m.active().refresh()
}

// freeze holds refresh for a moment after the operator moved, so rows do
// not jump under the cursor.
func (m *Model) freeze() tea.Cmd {
	m.refresh.moves++
	m.refresh.frozen = true
	return m.after(freezeFor, thawMsg{seq: m.refresh.moves})
}

func (m *Model) onThaw(msg thawMsg) tea.Cmd {
	if msg.seq != m.refresh.moves {
		return nil // the operator moved again since
	}
	m.refresh.frozen = false
	if m.refresh.due && !m.refresh.paused {
		m.refresh.due = false
		return m.poll()
	}
	return nil
}

func (m *Model) togglePause() tea.Cmd {
	m.refresh.paused = !m.refresh.paused
	m.refresh.gen++
	m.connect.paused = m.refresh.paused
	if m.refresh.paused {
		return nil
	}
	m.refresh.due = false
	return tea.Batch(m.tick(), m.poll())
}

// step makes refresh faster (-1) or slower (+1), within 500ms..60s.
func (m *Model) step(dir int) tea.Cmd {
	cur := m.refresh.every
	next := cur
	if dir < 0 {
		for i := len(refreshSteps) - 1; i >= 0; i-- {
			if refreshSteps[i] < cur {
				next = refreshSteps[i]
				break
			}
		}
	} else {
		for _, s := range refreshSteps {
			if s > cur {
				next = s
				break
			}
		}
	}
	if next == cur {
		m.note = "refresh stays every " + interval(cur) + " (between " + interval(MinRefresh) + " and " + interval(MaxRefresh) + ")"
		return nil
	}
	m.refresh.every = next
	m.connect.every = next
	m.note = "refresh every " + interval(next)
	m.refresh.gen++
	if m.refresh.paused {
		return nil
	}
	return m.tick()
}

// syncKeys enables the global bindings that apply where the operator is,
// and words them for it.
func (m *Model) syncKeys() {
	top := len(m.stack) == 1
	s := m.active()
	// h and l move across the overview's tiles only: elsewhere they are
	// free for the screen (h opens a record's audit history).
	side, _ := s.(sideways)
	m.keys.Left.SetEnabled(side != nil && side.movesSideways())
	m.keys.Right.SetEnabled(side != nil && side.movesSideways())
	switch {
	case m.showHelp:
		m.keys.Back.SetEnabled(true)
		m.keys.Back.SetHelp("esc", "close help")
	case m.showErr:
		m.keys.Back.SetEnabled(true)
		m.keys.Back.SetHelp("esc", "close the details")
	default:
		m.keys.Back.SetEnabled(!top || !m.hist.empty())
		m.keys.Back.SetHelp("esc", "back")
	}
	// q quits from the overview only, and does nothing on the screen
	// shown before the database first answers.
	m.keys.Quit.SetEnabled(!top || s.id() == screenOverview)
	if top {
		m.keys.Quit.SetHelp("q", "quit")
	} else {
		m.keys.Quit.SetHelp("q", "back")
	}
	if l, ok := s.(labeller); ok {
		esc, q := l.backLabels()
		if esc != "" && !m.showHelp {
			m.keys.Back.SetEnabled(true)
			m.keys.Back.SetHelp("esc", esc)
		}
		if q != "" {
			m.keys.Quit.SetHelp("q", q)
		}
	}
	if m.armed != nil {
		m.keys.Quit.SetEnabled(true)
		m.keys.Quit.SetHelp("q", "quit")
	}
	if m.refresh.paused {
		m.keys.Pause.SetHelp("space", "resume")
	} else {
		m.keys.Pause.SetHelp("space", "pause")
	}
	m.keys.Command.SetEnabled(m.connected)
	// - swaps screens, never out of a flow (a decision is left by its
	// own keys).
	_, inFlow := s.(flow)
	m.keys.Toggle.SetEnabled(m.connected && !inFlow)
	m.keys.Retry.SetEnabled(!m.connected && m.connect.err != nil)
	m.keys.ErrorDetail.SetEnabled(m.lastErr != nil || m.showErr)
}

// View renders the status bar, the active screen, the message line and
// the footer. It only reads state.
func (m *Model) View() string {
	if m.w <= 0 || m.h <= 0 {
		return ""
	}
	if m.tooSmall() {
		return m.tooSmallView()
	}
	var b strings.Builder
	b.Grow(m.w * m.h * 2)
	b.WriteString(m.statusBar())
	b.WriteByte('\n')
	var body string
	switch {
	case m.showHelp:
		body = m.helpView()
	case m.showErr:
		body = m.errorView()
	default:
		body = m.active().View()
	}
	bh := m.bodyHeight()
	n := 0
	for line := range strings.SplitSeq(body, "\n") {
		if n == bh {
			break
		}
		b.WriteString(line)
		b.WriteByte('\n')
		n++
	}
	for ; n < bh; n++ {
		b.WriteByte('\n')
	}
	b.WriteString(m.messageLine())
	b.WriteByte('\n')
	// help truncates with an ellipsis, but adds an item anyway when even
	// the ellipsis does not fit: cut the line to the width.
	b.WriteString(truncate(" "+m.help.ShortHelpView(m.footerKeys()), m.w))
	return b.String()
}

func (m *Model) tooSmall() bool { return m.w < minWidth || m.h < minHeight }

func (m *Model) tooSmallView() string {
	lines := []string{
		"terminal too small",
		"need " + strconv.Itoa(minWidth) + "x" + strconv.Itoa(minHeight) + ", have " + strconv.Itoa(m.w) + "x" + strconv.Itoa(m.h),
		"widen the terminal to go on · ctrl+c quits",
	}
	// Wrapped, not cut: the notice is read on the narrowest terminals.
	var wrapped []string
	for _, l := range lines {
		wrapped = append(wrapped, wrap(l, max(1, m.w))...)
	}
	wrapped = wrapped[:min(len(wrapped), max(1, m.h))]
	var out []string
	top := max(0, (m.h-len(wrapped))/2)
	for range top {
		out = append(out, "")
	}
	for _, l := range wrapped {
		l = truncate(l, m.w)
		out = append(out, strings.Repeat(" ", max(0, (m.w-width(l))/2))+l)
	}
	return strings.Join(out, "\n")
}

// statusBar: context, server and database, role, database time, refresh.
func (m *Model) statusBar() string {
	head := " " + m.st.Brand.Render("opsdesk") + "  "
	if m.opts.Context != "" {
		head += termtext.Clean(m.opts.Context) + " · "
	}
	role, server, who := "", "", ""
	if m.connected {
		server = termtext.Clean(m.info.Server) + "/" + termtext.Clean(m.info.Database)
		who = " · you: " + termtext.Clean(m.info.Role)
		if m.capsKnown {
			role = " (" + roleLabel(m.caps) + ")"
		}
	} else {
		who = "not connected"
	}
	if m.opts.ReadOnly {
		who += " · " + m.st.ReadOnly.Render("read-only")
	}
	left := head + server + who
	// A flow shows the time of its own read, which may be older than the
	// last poll's: it is named for what it is ("as of", the flow's
	// record), so the database's clock never seems to go backwards.
	asOf, at := m.active().asOf(), "as of "
	if asOf.IsZero() || !m.inFlow() {
		at = "db "
	}
	if asOf.IsZero() {
		asOf = m.dbTime
	}
	right := func(long bool) string {
		if !m.connected {
			return m.refreshLabel(long) + " "
		}
		return at + clock(asOf) + " UTC · " + m.refreshLabel(long) + " "
	}
	r := right(true)
	if width(left)+width(role)+width(r)+1 > m.w {
		r = right(false)
	}
	if m.connected && width(left)+width(r)+1 > m.w {
		// Narrower still: the time alone, so that who you are stays on
		// the line (in a flow at 80 columns it did not).
		r = clock(asOf) + " · " + m.refreshLabel(false) + " "
	}
	if m.connected && width(left)+width(r)+1 > m.w {
		// A long server name (the demo's socket path) gives way, cut in
		// its middle, before who you are: "you: y…" told nothing.
		room := m.w - width(head) - width(who) - width(r) - 1
		left = head + truncateMiddle(server, max(8, room)) + who
	}
	if width(left)+width(role)+width(r)+1 <= m.w {
		left += role // what the role may do, when it fits
	}
	return spread(left, r, m.w)
}

// refreshLabel says what refresh does; long for wide terminals.
func (m *Model) refreshLabel(long bool) string {
	switch {
	case m.refresh.paused:
		return "⏸ paused"
	case m.connected && m.inFlow() && long:
		// A flow works on the record as the operator saw it.
		return "⟳ paused in this flow"
	case m.connected && m.inFlow():
		return "⟳ paused"
	case m.refresh.frozen && long:
		return "⟳ frozen while moving"
	case m.refresh.frozen:
		return "⟳ frozen"
	}
	return "⟳ " + interval(m.refresh.every)
}

// messageLine: the command line, else the unreachable banner, else the
// last error, else a note.
func (m *Model) messageLine() string {
	switch {
	case m.cmd.active:
		return m.cmd.View(m.w)
	case m.armed != nil:
		return m.armedLine()
	case m.unreachable:
		text := "⚠ database unreachable since " + clock(m.downSince) + " UTC (last answer) · "
		if m.refresh.paused {
			text += "refresh paused, space resumes"
		} else {
			text += "retrying every " + interval(m.refresh.every)
		}
		if m.lastErr != nil {
			text += " · " + plainError(m.lastErr) + " (E: details)"
		}
		return m.st.Banner.Render(pad(" "+truncate(text, m.w-1), m.w))
	case m.lastErr != nil && m.connected:
		return " " + m.st.Error.Render(truncate("✗ last error: "+plainError(m.lastErr)+" (E: details)", m.w-2))
	case m.note != "":
		return " " + m.st.Muted.Render(truncate(m.note, m.w-2))
	}
	return ""
}

// footerKeys are the screen's bindings and the global ones that apply.
func (m *Model) footerKeys() []key.Binding {
	if m.showHelp {
		return []key.Binding{m.keys.Back, m.keys.ForceQuit}
	}
	if m.cmd.active {
		return []key.Binding{m.keys.Accept, m.keys.Cancel}
	}
	s := m.active()
	if s.capturing() {
		return s.ShortHelp()
	}
	keys := append([]key.Binding{m.keys.Help}, s.ShortHelp()...)
	back, quit := m.keys.Back, m.keys.Quit
	if back.Enabled() && quit.Enabled() && back.Help().Desc == quit.Help().Desc {
		// esc and q do the same here: one entry says so.
		back = combined("esc/q", back.Help().Desc, m.keys.Back, m.keys.Quit)
		quit.SetEnabled(false)
	}
	return append(keys, m.keys.Retry, back, quit, m.keys.Command, m.keys.Pause, m.keys.ErrorDetail)
}

// errorView is the last error whole (E): the line the screens show, and
// every word of the error under it.
func (m *Model) errorView() string {
	lines := []string{" " + m.st.Title.Render("Error details"), ""}
	if m.lastErr == nil {
		lines = append(lines, " "+m.st.Muted.Render("The database answers again: nothing to show."))
		return strings.Join(lines, "\n")
	}
	lines = append(lines, " "+m.st.Error.Render(truncate("✗ "+plainError(m.lastErr), m.w-2)), "")
	for _, l := range strings.Split(errorDetail(m.lastErr), "\n") {
		for _, w := range wrap(l, max(1, m.w-2)) {
			lines = append(lines, " "+w)
		}
	}
	return strings.Join(lines, "\n")
}

// screenBack is esc as the screen behind the help words it ("back", or
// the screen's own word): the help lists what esc does there, not that it
// closes the help (the footer says that), so that back and - show side by
// side.
func (m *Model) screenBack() key.Binding {
	b := key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back"))
	b.SetEnabled(len(m.stack) > 1 || !m.hist.empty())
	if l, ok := m.active().(labeller); ok {
		if esc, _ := l.backLabels(); esc != "" {
			b.SetEnabled(true)
			b.SetHelp("esc", esc)
		}
	}
	return b
}

// helpView is the full help: the active screen's keys and the global ones,
// the commands, the filter language and the glyphs.
func (m *Model) helpView() string {
	s := m.active()
	groups := append([][]key.Binding{}, s.FullHelp()...)
	groups = append(groups,
		[]key.Binding{m.screenBack(), m.keys.Toggle, m.keys.Command, m.keys.Help, m.keys.Quit, m.keys.ForceQuit, m.keys.Retry, m.keys.ErrorDetail},
		[]key.Binding{m.keys.Pause, m.keys.Faster, m.keys.Slower},
	)
	hm := m.help
	hm.ShowAll = true
	var blocks [][]string
	blocks = append(blocks, prefixed(strings.Split(hm.FullHelpView(groups), "\n")))
	section := func(name string, text ...string) []string {
		out := []string{" " + m.st.Title.Render(name)}
		for _, t := range text {
			for _, l := range wrap(t, m.w-2) {
				out = append(out, " "+l)
			}
		}
		return out
	}
	blocks = append(blocks, section("States", "◷ pending (live lease) · ⚠ stuck (lease expired) · ⏲ deferred (out of the queue until its reminder, then ⚠ due) · ✓ completed · ✗ rejected · ≠ conflicted · ○ released"))
	if f, ok := s.(filterLanguage); ok {
		blocks = append(blocks, section("Filter (/)", strings.Split(f.language(), "\n")...))
	}
	goTo := []string{" " + m.st.Title.Render("Go to (:)")}
	var usages []string
	for _, c := range commands() {
		goTo = append(goTo, " "+truncate(pad(c.usage, 22)+" "+c.help, m.w-2))
		usages = append(usages, c.usage)
	}
	blocks = append(blocks, goTo)
	// Blank lines between the blocks when they fit.
	n := len(blocks) - 1
	for _, b := range blocks {
		n += len(b)
	}
	if n-len(blocks)+1 > m.bodyHeight() {
		// Too tall even without them: the commands without their words,
		// so that none is cut off the bottom.
		short := section("Go to (:)", strings.Join(usages, " · "))
		n += len(short) - len(goTo)
		blocks[len(blocks)-1] = short
	}
	var lines []string
	for i, b := range blocks {
		if i > 0 && n <= m.bodyHeight() {
			lines = append(lines, "")
		}
		lines = append(lines, b...)
	}
	return strings.Join(lines, "\n")
}

func prefixed(lines []string) []string {
	for i, l := range lines {
		lines[i] = " " + l
	}
	return lines
}
