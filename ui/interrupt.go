package ui

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// interrupter is what ctrl+c stops in a flow. The first ctrl+c stops
// what is under way as esc does (a run starts no more decisions and lets
// those in flight finish; a reveal is given up) and shows what was done;
// a second ctrl+c, or q, quits. After the console quits, the terminal is
// told what a flow left half-done.
type interrupter interface {
	// interrupt stops what is under way, as esc would.
	interrupt() tea.Cmd
	// summary says, as of now, what the flow decided and what is still
	// under way.
	summary() string
	// report is what the terminal shows once the console quit: what was
	// decided, the batch and what was still under way; "" when there is
	// nothing to say. It waits at most wait for the work under way; its
	// lists are laid out for w columns.
	report(wait time.Duration, w int) string
}

// stopperOf is what ctrl+c stops on screen s; nil when s is no flow.
func stopperOf(s screen) interrupter {
	if i, ok := s.(interrupter); ok {
		return i
	}
	if f, ok := s.(flow); ok {
		return &flowStop{f: f, m: f.machine()}
	}
	return nil
}

// flowStop is the interrupter of a flow on one record.
type flowStop struct {
	f    flow
	m    *stepMachine
	note string // what interrupt did, when it did something
}

// interrupt gives up on a reveal under way, as esc does; a decision under
// way is waited for: its answer shows on the result step.
func (s *flowStop) interrupt() tea.Cmd {
	if s.m.step == stepApplying && s.m.reveals {
		s.note = "reveal cancelled, nothing shown; its audit record may be committed"
		s.f.leave()
		return s.m.abandon()
	}
	return nil
}

func (s *flowStop) summary() string {
	m := s.m
	op := "operation " + strconv.FormatInt(m.rec.ID, 10)
	switch {
	case s.note != "":
		return s.note
	case m.step == stepApplying:
		return "the decision on " + op + " is under way: its answer shows here"
	case m.step == stepResult && m.err == nil:
		return op + ": done, audit record " + termtext.Clean(m.res.AuditRef())
	case m.step == stepResult && m.reveals:
		return op + ": nothing was shown"
	case m.verdict() != "":
		return op + ": no answer, then read again: " + m.verdict()
	case m.ambiguous():
		return op + ": no answer, and not read again yet: it may or may not have been applied"
	case m.step == stepResult:
		return op + ": not applied, or no answer (see above)"
	case m.rec.ID == 0:
		return "nothing was decided"
	case m.reveals:
		return "nothing was revealed from " + op
	}
	return "nothing was decided on " + op
}

// report: a decision that had not answered when the console quit may
// or may not have been applied.
func (s *flowStop) report(time.Duration, int) string {
	m := s.m
	id := strconv.FormatInt(m.rec.ID, 10)
	if m.ambiguous() && m.verdict() == "" {
		return "opsdesk: the database did not answer the decision on operation " + id + " and the record could not " +
			"be read again: it may or may not have been applied; opsdesk ops show " + id + " says which."
	}
	if m.step != stepApplying || m.reveals {
		return ""
	}
	return "opsdesk: the console quit while a decision on operation " + id + " was under way: it may or may not " +
		"have been applied; opsdesk ops show " + id + " says which."
}

// onInterrupt handles ctrl+c: in a flow the first stops it and shows what
// was done; otherwise, or the second time, the console quits.
func (m *Model) onInterrupt() tea.Cmd {
	st := stopperOf(m.active())
	if m.armed != nil || st == nil || !m.connected || m.tooSmall() {
		return tea.Quit
	}
	m.cmd.close()
	m.showHelp = false
	m.armed = st
	cmd := st.interrupt()
	if n, ok := m.active().follow(); ok {
		cmd = tea.Batch(cmd, m.open(n, false))
	}
	return cmd
}

// armedLine is the message line after a first ctrl+c.
func (m *Model) armedLine() string {
	text := "⚠ ctrl+c again or q quits · " + m.armed.summary()
	return " " + m.st.Stuck.Render(truncate(text, m.w-2))
}

// exitReport is what the terminal shows once the console quit, for each
// flow still open that left something half-done; wait bounds the wait
// for what was under way (the decisions in flight finish).
func (m *Model) exitReport(wait time.Duration) string {
	var out []string
	seen := map[screen]bool{}
	for _, s := range m.stack {
		if st := stopperOf(s); st != nil && !seen[s] {
			seen[s] = true
			if r := st.report(wait, reportWidth(m.w)); r != "" {
				out = append(out, r)
			}
		}
	}
	return strings.Join(out, "\n")
}

// reportWidth is the width the exit report is laid out for: the
// terminal's, so that its id lists do not break mid-line at 80 columns,
// within bounds that keep a list readable.
func reportWidth(w int) int {
	if w <= 0 {
		return 96
	}
	return min(max(w, 40), 120)
}

// idList is ids as one line each of at most width characters.
func idList(ids []int64, width int) []string {
	var lines []string
	line := ""
	for _, id := range ids {
		w := strconv.FormatInt(id, 10)
		if line != "" && len(line)+2+len(w) > width {
			lines = append(lines, line+",")
			line = ""
		}
		if line != "" {
			line += ", "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// decisionName words a decision for the terminal.
func decisionName(d reconcile.Decision) string {
	if n := decisionInfo[d].name; n != "" {
		return n
	}
	return fmt.Sprint(d)
}

// interrupt stops the run under way as esc does: no lookup or decision
// starts, those in flight finish, and the run's end shows what was done.
func (s *bulkFlow) interrupt() tea.Cmd {
	if s.running() {
		s.interrupted = true
		s.halt()
		s.act()
	}
	return nil
}

// results are the groups decided so far: each accepted group's result,
// else its last acceptance stopped before all its records' turn.
func (s *bulkFlow) results() map[bulk.Verdict]bulk.GroupResult {
	out := map[bulk.Verdict]bulk.GroupResult{}
	maps.Copy(out, s.tried)
	maps.Copy(out, s.accepted)
	return out
}

// decidedSoFar counts the records the flow decided.
func decidedSoFar(results map[bulk.Verdict]bulk.GroupResult) int {
	n := 0
	for _, r := range results {
		n += r.Counts[bulk.Decided]
	}
	return n
}

func (s *bulkFlow) batch() string {
	if s.plan == nil {
		return ""
	}
	return termtext.Clean(s.plan.BatchID)
}

func (s *bulkFlow) summary() string {
	decided := decidedSoFar(s.results())
	batch := ""
	if b := s.batch(); b != "" {
		batch = " (batch " + b + ")"
	}
	switch {
	case s.running() && s.sm.step == stepDeciding:
		return fmt.Sprintf("stopping: %s of %s done, the decisions under way finish%s", count(int64(s.progress.Done)),
			count(int64(max(s.progress.Total, s.group().Count()))), batch)
	case s.running():
		return "stopping the lookups: nothing was decided"
	case decided > 0:
		return fmt.Sprintf("%s decided by this run%s, each with its own audit record", count(int64(decided)), batch)
	}
	return "nothing was decided" + batch
}

// report says, once the console quit, what the run decided, what it did
// not, and its batch. A run under way is stopped and its end waited for,
// at most wait.
func (s *bulkFlow) report(wait time.Duration, w int) string {
	if s.plan == nil && !s.running() {
		return "" // refused, or nothing listed: nothing started
	}
	results := s.results()
	var late []string
	if s.running() {
		s.halt()
		t := s.tail
		select {
		case <-t.done:
		case <-time.After(wait):
		}
		last, p := t.get()
		switch m := last.(type) {
		case bulkAcceptMsg:
			if m.res.Items != nil {
				results[s.verdict] = carried(s.tried[s.verdict], m.res)
			}
		case bulkPlanMsg:
			if s.plan == nil && m.plan != nil {
				s.plan = m.plan
			}
		case nil:
			if s.sm.step == stepDeciding {
				late = append(late, fmt.Sprintf("  %s group: %d of %d had answered when the console quit (%s); the others "+
					"had not answered within %s: each record's history says whether it took effect", s.verdict.Label(), p.Done,
					p.Total, countsText(p.Counts, outcomeKeys()[:4]), wait))
			} else {
				late = append(late, "  the lookups had not ended: nothing was decided")
			}
		}
	}
	head := "opsdesk: the console quit during the bulk reconciliation of " + termtext.Clean(s.filter.String())
	if b := s.batch(); b != "" {
		head += ", batch " + b + " (in each decision's audit record)"
	}
	out := wrap(head, w)
	for _, v := range bulk.Verdicts {
		r, ok := results[v]
		if !ok {
			continue
		}
		out = append(out, fmt.Sprintf("  %s → %s: %s", v.Label(), decisionName(r.Decision), outcomesText(r)))
		for _, o := range bulk.ItemOutcomes {
			var ids []int64
			for _, it := range r.Only(o) {
				ids = append(ids, it.ID)
			}
			if len(ids) == 0 {
				continue
			}
			name := o.Label()
			if o == bulk.NotAttempted {
				name += " (still stuck)"
			}
			out = append(out, "    "+name+":")
			for _, l := range idList(ids, w-6) {
				out = append(out, "      "+l)
			}
		}
	}
	out = append(out, late...)
	if len(results) == 0 && len(late) == 0 {
		out = append(out, "  nothing was decided")
	}
	return strings.Join(out, "\n")
}
