package ui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// Verifier checks every audit chain the connected role may see, as
// opsdesk audit verify does: each record's hash recomputed, each link,
// no gaps. It reports its progress as it reads. The command's verifier
// over the console's read pool satisfies it.
type Verifier interface {
	Verify(ctx context.Context, progress func(auditreport.Progress)) (*auditreport.Report, error)
}

// screenVerify is the audit chains' verification.
const screenVerify screenID = "verify"

// verifyNav starts a verification.
type verifyNav struct{}

func (verifyNav) target() screenID { return screenVerify }

func (verifyNav) describe() string { return "audit chain verification" }

// verifyKind is the verification and :verify.
var verifyKind = screenKind{
	id:    screenVerify,
	build: func(d deps, o Config) screen { return newVerify(d, o.Verifier) },
	commands: []command{{names: []string{"verify"}, usage: ":verify",
		help: "verify every audit chain you may see, as opsdesk audit verify does", try: "verify", suggest: "verify",
		parse: noArgs("verify", verifyNav{})}},
}

// Verification messages, numbered by run: a stopped run's are dropped.
type (
	verifyProgressMsg struct {
		run int
		p   auditreport.Progress
		ch  <-chan tea.Msg
	}
	verifyDoneMsg struct {
		run int
		rep *auditreport.Report
		err error
	}
	// verifyTickMsg redraws a run under way (its time), even while the
	// database has not sent a record yet.
	verifyTickMsg struct{ run int }
)

// verifyScreen runs the chain verification with its progress, esc
// stopping it, then shows each chain and where the first one breaks;
// enter opens a broken chain's first broken record.
type verifyScreen struct {
	deps
	navigator
	verifier Verifier
	w, h     int
	run      int
	running  bool
	cancel   context.CancelFunc
	started  time.Time
	took     time.Duration
	progress auditreport.Progress
	rep      *auditreport.Report
	err      error
	sel      int
}

func newVerify(d deps, v Verifier) *verifyScreen {
	s := &verifyScreen{deps: d, verifier: v}
	s.updateKeys()
	return s
}

func (s *verifyScreen) id() screenID          { return screenVerify }
func (s *verifyScreen) Init() tea.Cmd         { return nil }
func (s *verifyScreen) SetSize(w, h int)      { s.w, s.h = w, h }
func (s *verifyScreen) current(seq int) bool  { return seq == s.run }
func (s *verifyScreen) refresh() tea.Cmd      { return nil }
func (s *verifyScreen) back() (bool, tea.Cmd) { return s.stop(), nil }

// capturing: a verification under way answers esc itself (it stops).
func (s *verifyScreen) capturing() bool { return s.running }

func (s *verifyScreen) asOf() time.Time {
	if s.rep == nil {
		return time.Time{}
	}
	return s.rep.At
}

// open starts a verification right above the overview.
func (s *verifyScreen) open(_ navMsg, at opening) ([]screen, tea.Cmd, bool) {
	return at.rooted(s), s.start(), true
}

// leave stops a verification under way.
func (s *verifyScreen) leave() { s.stop() }

// stop cancels a verification under way and reports whether there was
// one.
func (s *verifyScreen) stop() bool {
	if !s.running {
		return false
	}
	s.cancel()
	s.running, s.err = false, context.Canceled
	s.took = time.Since(s.started)
	s.updateKeys()
	return true
}

// start runs the verification in the background; its progress and its
// end come back as messages through a channel, one at a time.
func (s *verifyScreen) start() tea.Cmd {
	s.stop()
	s.run++
	s.rep, s.err, s.progress, s.sel = nil, nil, auditreport.Progress{}, 0
	if s.verifier == nil {
		s.err = fmt.Errorf("this console has no verifier: run opsdesk audit verify")
		s.updateKeys()
		return nil
	}
	ctx, cancel := context.WithCancel(s.f.ctx)
	s.cancel, s.running, s.started = cancel, true, time.Now()
	run, v := s.run, s.verifier
	ch := make(chan tea.Msg, 1)
	go func() {
		rep, err := v.Verify(ctx, func(p auditreport.Progress) {
			select {
			case ch <- verifyProgressMsg{run: run, p: p, ch: ch}:
			case <-ctx.Done():
			default: // the screen has not taken the last one yet: skip this one
			}
		})
		// A stopped run's end is read by nobody: it does not wait.
		select {
		case ch <- verifyDoneMsg{run: run, rep: rep, err: err}:
		case <-ctx.Done():
		}
		cancel()
	}()
	s.updateKeys()
	return tea.Batch(wait(ch), s.tick())
}

// tick schedules the next redraw of the run under way.
func (s *verifyScreen) tick() tea.Cmd {
	if s.deps.after == nil {
		return nil
	}
	return s.deps.after(time.Second, verifyTickMsg{run: s.run})
}

// broken are the chains that break, in the report's order.
func (s *verifyScreen) broken() []auditreport.Chain {
	var out []auditreport.Chain
	if s.rep != nil {
		for _, c := range s.rep.Chains {
			if c.Break != nil {
				out = append(out, c)
			}
		}
	}
	return out
}

func (s *verifyScreen) updateKeys() {
	k := &s.keys
	n := len(s.broken())
	for _, b := range []*key.Binding{&k.Up, &k.Down} {
		b.SetEnabled(n > 1)
	}
	k.Open.SetEnabled(n > 0)
	k.Open.SetHelp("enter", "open the first broken record")
	k.AskAgain.SetEnabled(!s.running)
	k.AskAgain.SetHelp("r", "verify again")
	k.Cancel.SetEnabled(s.running)
	k.Cancel.SetHelp("esc", "stop")
}

// ShortHelp implements help.KeyMap.
func (s *verifyScreen) ShortHelp() []key.Binding {
	return []key.Binding{combined("↑/↓", "select", s.keys.Up, s.keys.Down), s.keys.Open, s.keys.AskAgain, s.keys.Cancel}
}

// FullHelp implements help.KeyMap.
func (s *verifyScreen) FullHelp() [][]key.Binding { return [][]key.Binding{s.ShortHelp()} }

func (s *verifyScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case verifyProgressMsg:
		if msg.run != s.run || !s.running {
			return s, nil
		}
		s.progress = msg.p
		cmd = wait(msg.ch)
	case verifyTickMsg:
		if msg.run == s.run && s.running {
			cmd = s.tick()
		}
	case verifyDoneMsg:
		if msg.run != s.run || !s.running {
			return s, nil
		}
		s.running, s.rep, s.err, s.took = false, msg.rep, msg.err, time.Since(s.started)
		if msg.rep != nil && len(msg.rep.Chains) > 0 {
			last := msg.rep.Chains[len(msg.rep.Chains)-1]
			s.progress.Records = s.progress.Total
			s.progress.Chains, s.progress.Tenant = len(msg.rep.Chains), last.Tenant
		}
	case tea.KeyMsg:
		cmd = s.key(msg)
	}
	s.updateKeys()
	return s, cmd
}

func (s *verifyScreen) key(msg tea.KeyMsg) tea.Cmd {
	broken := s.broken()
	switch {
	case key.Matches(msg, s.keys.Cancel):
		s.stop()
	case key.Matches(msg, s.keys.Up):
		s.sel = max(0, s.sel-1)
	case key.Matches(msg, s.keys.Down):
		s.sel = min(len(broken)-1, s.sel+1)
	case key.Matches(msg, s.keys.AskAgain):
		return s.start()
	case key.Matches(msg, s.keys.Open):
		if s.sel < len(broken) {
			b := broken[s.sel].Break
			s.goTo(auditRecordNav{ref: auditRef{Tenant: b.Tenant, Seq: b.Seq}})
		}
	}
	return nil
}

func (s *verifyScreen) View() string {
	w := max(1, s.w)
	var lines []string
	add := func(text string, style func(...string) string) {
		lines = append(lines, indented(text, w-3, "   ", style)...)
	}
	lines = append(lines, s.st.Title.Render(truncate(" Audit chain verification", w)), "")
	p := s.progress
	switch {
	case s.running:
		lines = append(lines, "   "+progressBar(p.Records, p.Total, w-3))
		where := "reading the chains' heads…"
		switch {
		case p.Chains > 0:
			where = "chain " + chainName(p.Tenant) + " (" + count(int64(p.Chains)) + " begun)"
		case p.Total > 0:
			where = "waiting for the first records…"
		}
		add(fmt.Sprintf("%s of %s records · %s · %s", count(p.Records), count(p.Total), where,
			ShortDuration(time.Since(s.started))), nil)
		add("Each record's hash is recomputed and each link checked, as opsdesk audit verify does. esc stops.", s.st.Muted.Render)
	case s.rep == nil && s.err != nil:
		what := "✗ the verification did not finish: " + termtext.Clean(s.err.Error())
		if s.err == context.Canceled {
			what = fmt.Sprintf("stopped after %s of %s records: nothing was concluded", count(p.Records), count(p.Total))
		}
		add(what, s.st.Error.Render)
		add("r verifies again.", s.st.Muted.Render)
	case s.rep != nil:
		lines = append(lines, s.reportLines(w)...)
	default:
		add("starting…", nil)
	}
	return strings.Join(lines, "\n")
}

// reportLines are the verification's verdict, each chain, and what the
// console's check does not cover.
func (s *verifyScreen) reportLines(w int) []string {
	rep := s.rep
	var out []string
	add := func(text string, style func(...string) string) {
		out = append(out, indented(text, w-3, "   ", style)...)
	}
	var records int64
	for _, c := range rep.Chains {
		records += c.Records
	}
	summary := fmt.Sprintf("%d chain%s, %s records, as of db time %s UTC, as %s, in %s", len(rep.Chains), plural(len(rep.Chains)),
		count(records), clock(rep.At), termtext.Clean(rep.Role), ShortDuration(s.took))
	switch {
	case rep.OK:
		add("✓ every chain verifies: "+summary, s.st.Completed.Render)
	case rep.Break != nil:
		add("✗ "+termtext.Clean(rep.Break.Error())+" · "+summary, s.st.Error.Render)
	default:
		add("✗ "+termtext.Clean(rep.Problem)+" · "+summary, s.st.Error.Render)
	}
	out = append(out, "")
	out = append(out, s.st.Header.Render("   "+pad("CHAIN", 16)+"  "+padLeft("RECORDS", 9)+"  "+padLeft("HEAD", 8)+"  STATUS"))
	broken := s.broken()
	room := max(1, s.h-len(out)-5)
	for i, c := range rep.Chains {
		if i == room {
			add(fmt.Sprintf("… %d more chains: opsdesk audit verify lists them all", len(rep.Chains)-i), s.st.Muted.Render)
			break
		}
		status := s.st.Completed.Render("✓ verifies")
		mark := "   "
		if c.Break != nil {
			status = s.st.Error.Render(glyphBroken + " " + truncate(termtext.Clean(c.Break.Reason), max(10, w-46)))
			if s.sel < len(broken) && broken[s.sel].Tenant == c.Tenant {
				mark = " ▸ "
			}
		}
		out = append(out, mark+pad(chainName(c.Tenant), 16)+"  "+padLeft(count(c.Records), 9)+"  "+
			padLeft("#"+strconv.FormatInt(c.HeadSeq, 10), 8)+"  "+status)
	}
	out = append(out, "")
	add("This checks every chain you may see as it is now; opsdesk audit verify --checkpoint FILE also checks that no "+
		"chain lost its tail since a signed checkpoint.", s.st.Muted.Render)
	return out
}

// progressBar is done of total as a bar w cells wide at most.
func progressBar(done, total int64, w int) string {
	w = max(10, min(w, 60))
	frac := 0.0
	if total > 0 {
		frac = min(1, float64(done)/float64(total))
	}
	fill := int(frac * float64(w-2))
	return "[" + strings.Repeat("#", fill) + strings.Repeat(".", w-2-fill) + "] " + fmt.Sprintf("%3.0f%%", frac*100)
}
