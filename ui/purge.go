package ui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/purgereport"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// Purger runs retention purges, one tool at a time. *retention.Purger
// satisfies it; the database refuses a role that is not an admin of every
// tenant.
type Purger interface {
	// Count is the dry run: how many of tool's records a purge takes now,
	// and its cut-off.
	Count(ctx context.Context, tool string) (purgereport.DryRun, error)
	// Purge deletes what the dry run counted (records of tool whose
	// retention ended before its cut-off, no more than its count), in
	// batches, calling progress after each, and writes the run's audit
	// record. Cancelled, it stops after a batch; a purge started again
	// resumes the run.
	Purge(ctx context.Context, tool string, dry purgereport.DryRun, reason string, progress func(purgereport.Progress)) (purgereport.Result, error)
}

// screenPurge purges one tool's expired records.
const screenPurge screenID = "purge"

// purgeNav opens a purge of a tool, as the review showed it.
type purgeNav struct{ tool readmodel.ToolReview }

func (purgeNav) target() screenID { return screenPurge }

// purgeKind is the purge; the review opens it, no command does.
var purgeKind = screenKind{id: screenPurge, build: func(d deps, o Config) screen { return newPurge(d, o.Purger) }}

// purgeStep is where the purge flow is.
type purgeStep int

const (
	purgeCounting purgeStep = iota
	purgeReason
	purgeConfirm
	purgeRunning
	purgeDone
)

type purgeCountMsg struct {
	seq int
	dry purgereport.DryRun
	err error
}

type purgeProgressMsg struct {
	seq int
	p   purgereport.Progress
	ch  <-chan tea.Msg
}

type purgeDoneMsg struct {
	seq int
	res purgereport.Result
	err error
}

// purgeScreen purges one tool's expired records from the retention review:
// the dry run's count first, what the purge means, a reason, a
// confirmation that defaults to No, then progress, stoppable, and the
// run's audit record.
type purgeScreen struct {
	deps
	navigator
	purger Purger
	w, h   int
	seq    int
	tool   readmodel.ToolReview
	step   purgeStep
	dry    purgereport.DryRun
	reason textinput.Model
	// inputErr says why the reason was not taken; declined, that the
	// confirmation was answered No (the reason is kept).
	inputErr string
	declined bool
	cancel   context.CancelFunc
	stopping bool
	progress purgereport.Progress
	res      purgereport.Result
	err      error
	started  time.Time
}

func newPurge(d deps, p Purger) *purgeScreen {
	s := &purgeScreen{deps: d, purger: p}
	s.reason = textInput(d.st, "why, for the audit trail", 2000)
	s.updateKeys()
	return s
}

func (s *purgeScreen) id() screenID         { return screenPurge }
func (s *purgeScreen) Init() tea.Cmd        { return nil }
func (s *purgeScreen) current(seq int) bool { return seq == s.seq }
func (s *purgeScreen) asOf() time.Time      { return time.Time{} }
func (s *purgeScreen) refresh() tea.Cmd     { return nil }

func (s *purgeScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	s.reason.Width = max(10, w-6)
}

// capturing: the reason takes every key, and a running purge answers esc
// itself (it stops after the batch under way).
func (s *purgeScreen) capturing() bool { return s.step == purgeReason || s.step == purgeRunning }

// leave stops a running purge: its run resumes when purged again.
func (s *purgeScreen) leave() {
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
}

// open starts a purge from the retention review, for a role that may
// purge.
func (s *purgeScreen) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	p, ok := n.(purgeNav)
	if !ok || s.purger == nil || !at.perms.purge || at.active().id() != screenReview {
		return nil, nil, false
	}
	return at.pushed(s), s.start(p.tool), true
}

// start opens the flow on a tool of the review and runs the dry run.
func (s *purgeScreen) start(t readmodel.ToolReview) tea.Cmd {
	s.leave()
	s.seq++
	*s = purgeScreen{deps: s.deps, purger: s.purger, w: s.w, h: s.h, seq: s.seq, tool: t, reason: s.reason}
	s.reason.Reset()
	s.reason.Blur()
	s.updateKeys()
	seq, tool := s.seq, t.Tool
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(s.f.ctx, s.f.timeout)
		defer cancel()
		dry, err := s.purger.Count(ctx, tool)
		return purgeCountMsg{seq: seq, dry: dry, err: err}
	}
}

func (s *purgeScreen) back() (bool, tea.Cmd) {
	switch s.step {
	case purgeRunning:
		s.stop()
		return true, nil
	case purgeConfirm:
		s.step = purgeReason
		s.updateKeys()
		return true, s.reason.Focus()
	}
	return false, nil
}

func (s *purgeScreen) stop() {
	if s.cancel != nil && !s.stopping {
		s.stopping = true
		s.cancel()
	}
}

func (s *purgeScreen) updateKeys() {
	k := &s.keys
	k.Next.SetEnabled(s.step == purgeReason)
	k.Next.SetHelp("enter", "next")
	k.Yes.SetEnabled(s.step == purgeConfirm)
	k.Yes.SetHelp("y", "yes, purge")
	k.No.SetEnabled(s.step == purgeConfirm)
	k.No.SetHelp("n/enter", "no")
	k.Cancel.SetEnabled(s.step == purgeReason || s.step == purgeRunning && !s.stopping)
	k.Cancel.SetHelp("esc", "cancel")
	if s.step == purgeRunning {
		k.Cancel.SetHelp("esc", "stop after this batch")
	}
}

// ShortHelp implements help.KeyMap.
func (s *purgeScreen) ShortHelp() []key.Binding {
	return []key.Binding{s.keys.Next, s.keys.Yes, s.keys.No, s.keys.Cancel}
}

// FullHelp implements help.KeyMap.
func (s *purgeScreen) FullHelp() [][]key.Binding { return [][]key.Binding{s.ShortHelp()} }

func (s *purgeScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case purgeCountMsg:
		if msg.seq != s.seq || s.step != purgeCounting {
			return s, nil
		}
		s.dry, s.err = msg.dry, msg.err
		switch {
		case msg.err != nil || msg.dry.Count == 0:
			s.step = purgeDone
		default:
			s.step = purgeReason
			cmd = s.reason.Focus()
		}
	case purgeProgressMsg:
		if msg.seq != s.seq {
			return s, nil
		}
		s.progress = msg.p
		cmd = wait(msg.ch)
	case purgeDoneMsg:
		if msg.seq != s.seq {
			return s, nil
		}
		s.step, s.res, s.err, s.cancel = purgeDone, msg.res, msg.err, nil
	case tea.KeyMsg:
		cmd = s.key(msg)
	default:
		if s.step == purgeReason {
			s.reason, cmd = s.reason.Update(msg)
		}
	}
	s.updateKeys()
	return s, cmd
}

func (s *purgeScreen) key(msg tea.KeyMsg) tea.Cmd {
	switch s.step {
	case purgeReason:
		switch {
		case key.Matches(msg, s.keys.Cancel):
			s.goTo(navBack{})
			return nil
		case key.Matches(msg, s.keys.Next):
			if strings.TrimSpace(s.reason.Value()) == "" {
				s.inputErr = "a reason is required: it goes into the audit trail"
				return nil
			}
			s.inputErr, s.declined = "", false
			s.reason.Blur()
			s.step = purgeConfirm
			return nil
		}
		var cmd tea.Cmd
		s.reason, cmd = s.reason.Update(msg)
		return cmd
	case purgeConfirm:
		switch {
		case key.Matches(msg, s.keys.Yes):
			return s.run()
		case key.Matches(msg, s.keys.No), msg.Type == tea.KeyEnter:
			// enter is No: the confirmation defaults to it. Back to the
			// reason, kept, with a word that nothing was purged.
			s.step, s.declined = purgeReason, true
			s.updateKeys()
			return s.reason.Focus()
		}
	case purgeRunning:
		if key.Matches(msg, s.keys.Cancel) {
			s.stop()
		}
	}
	return nil
}

// run starts the purge in the background; its progress and its end come
// back as messages through a channel, one at a time.
func (s *purgeScreen) run() tea.Cmd {
	ctx, cancel := context.WithCancel(s.f.ctx)
	s.cancel, s.step, s.started = cancel, purgeRunning, time.Now()
	seq, tool, dry, reason, purger := s.seq, s.tool.Tool, s.dry, strings.TrimSpace(s.reason.Value()), s.purger
	ch := make(chan tea.Msg, 1)
	go func() {
		defer cancel()
		res, err := purger.Purge(ctx, tool, dry, reason, func(p purgereport.Progress) {
			select {
			case ch <- purgeProgressMsg{seq: seq, p: p, ch: ch}:
			case <-ctx.Done():
			}
		})
		ch <- purgeDoneMsg{seq: seq, res: res, err: err}
	}()
	return wait(ch)
}

// wait delivers the next message of a running purge.
func wait(ch <-chan tea.Msg) tea.Cmd {
	return func() tea.Msg { return <-ch }
}

func (s *purgeScreen) View() string {
	w := max(1, s.w)
	t := s.tool
	lines := []string{s.st.Title.Render(truncate(" Purge expired records of "+termtext.Clean(t.Tool), w)), s.stepLine(w), ""}
	add := func(text string) {
		for _, l := range wrap(text, w-3) {
			lines = append(lines, "   "+l)
		}
	}
	// The review's retry window: the catalog's, else the retention, else
	// the library's default retention, as the purge's tombstones last.
	window := ShortDuration(t.RetryWindow)
	switch s.step {
	case purgeCounting:
		add("counting what a purge would take now…")
	case purgeReason, purgeConfirm:
		add(fmt.Sprintf("%s records would be purged: completed, retention ended before %s UTC, not held, no unreviewed conflicts.",
			count(s.dry.Count), clock(s.dry.Before)))
		if s.dry.Resumes != 0 {
			add(fmt.Sprintf("This resumes unfinished run %d.", s.dry.Resumes))
		}
		add("They are deleted for good. Each leaves a tombstone for " + window + " (the retry window), so a lookup says " +
			"it was purged; " + lateRetry(t) + " Pending, held and conflicted records stay.")
		lines = append(lines, "")
		if s.step == purgeReason {
			add("Reason (required, kept in the audit trail):")
			lines = append(lines, "   "+s.reason.View())
			switch {
			case s.inputErr != "":
				lines = append(lines, "   "+s.st.Error.Render(truncate("✗ "+s.inputErr, w-3)))
			case s.declined:
				lines = append(lines, "")
				for _, l := range wrap("Not purged: you answered no, and nothing was deleted. enter asks again; esc returns to the review.", w-3) {
					lines = append(lines, "   "+s.st.Muted.Render(l))
				}
			}
			break
		}
		add("Reason: " + termtext.Clean(strings.TrimSpace(s.reason.Value())))
		lines = append(lines, "")
		lines = append(lines, "   "+s.st.Bold.Render(truncate(fmt.Sprintf("Purge %s records of %s? [y/N]", count(s.dry.Count), termtext.Clean(t.Tool)), w-3)))
	case purgeRunning:
		lines = append(lines, "   "+s.bar(w-3))
		add(fmt.Sprintf("purged %s of %s, %d batches, %s", count(s.progress.Purged), count(s.dry.Count),
			s.progress.Batches, ShortDuration(time.Since(s.started))))
		if s.stopping {
			add("stopping after the batch under way; purge the tool again to resume the run")
		} else {
			add("esc stops after the batch under way; the run resumes when purged again")
		}
	case purgeDone:
		switch {
		case s.err != nil && !s.started.IsZero():
			lines = append(lines, "   "+s.st.Error.Render(truncate("✗ the purge stopped", w-3)))
			add(fmt.Sprintf("%s records were purged before it stopped: %s", count(s.progress.Purged), plainError(s.err)))
			add("Purge the tool again to resume the run: its start record is in the audit trail, its result record is " +
				"written when it finishes.")
		case s.err != nil:
			lines = append(lines, "   "+s.st.Error.Render(truncate("✗ could not count what a purge would take: "+plainError(s.err), w-3)))
			add("Nothing was purged.")
		case s.started.IsZero():
			add("Nothing to purge: no completed record of " + termtext.Clean(t.Tool) + " has an ended retention that a purge may take.")
		default:
			lines = append(lines, "   "+s.st.Completed.Render(truncate(fmt.Sprintf("✓ purged %s records", count(s.res.Purged)), w-3)))
			add(fmt.Sprintf("run %d, with %s expired tombstones; audit record %s#%d", s.res.Run,
				count(s.res.TombstonesExpired), chainName(s.res.AuditTenant), s.res.AuditSeq))
		}
		lines = append(lines, "")
		add("esc returns to the retention review")
	}
	return strings.Join(lines, "\n")
}

// purgeSteps name the purge's steps for its step line, by purgeStep.
var purgeSteps = []string{"count", "reason", "confirm", "purge", "done"}

// stepLine names the purge's steps, the current one marked, as the
// flows' step line does.
func (s *purgeScreen) stepLine(w int) string {
	parts := make([]string, len(purgeSteps))
	for i, name := range purgeSteps {
		parts[i] = name
		if purgeStep(i) == s.step {
			parts[i] = s.st.Bold.Render("[" + name + "]")
		}
	}
	line := " " + strings.Join(parts, " › ") + fmt.Sprintf("   step %d of %d", int(s.step)+1, len(purgeSteps))
	if width(line) > w {
		line = fmt.Sprintf(" step %d of %d: %s", int(s.step)+1, len(purgeSteps), purgeSteps[s.step])
	}
	return s.st.Muted.Render(truncate(line, w))
}

// lateRetry says what a retry of a purged identity gets, by the policy.
func lateRetry(t readmodel.ToolReview) string {
	if !t.InCatalog {
		return "the catalog does not know this tool's window or after_expiry: a late retry runs again as new work."
	}
	if t.AfterExpiry == "reject" {
		return "a late retry within it gets ErrExpired, later it runs again."
	}
	return "a late retry runs again as new work."
}

// bar is the purge's progress against the dry run's count.
func (s *purgeScreen) bar(w int) string { return progressBar(s.progress.Purged, s.dry.Count, w) }
