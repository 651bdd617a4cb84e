package ui

import (
	"context"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// screenAck acknowledges a record's unreviewed conflicting attempts.
const screenAck screenID = "ack"

// ackKind is the acknowledgement; a record's detail opens it.
var ackKind = screenKind{id: screenAck, build: func(d deps, o Config) screen { return newAck(d, o.Decider) }}

// ackFlow acknowledges the conflicting attempts the operator was shown:
// a reason, a confirmation, the result.
type ackFlow struct{ onSteps }

func newAck(d deps, dec Decider) *ackFlow {
	s := &ackFlow{newOnSteps(d, screenAck, dec)}
	s.sm.first = stepReason
	s.sm.crumbs = []crumb{{"reason", []step{stepReason}}, {"confirm", []step{stepConfirm, stepApplying}}, {"done", []step{stepResult}}}
	s.act()
	return s
}

func (s *ackFlow) title() string { return s.sm.recordTitle("Acknowledge conflicts on operation ") }

func (s *ackFlow) page(st step) []string {
	m := &s.sm
	n := unreviewed(m.rec.Conflicts)
	switch st {
	case stepReason:
		out := append(m.heading(fmt.Sprintf("Acknowledge %d unreviewed conflicting attempt%s", n, plural(n))), "")
		m.para(&out, "They stay on record, marked reviewed by your role. Why are they no concern (a caller's bug, fixed)?", nil)
		return append(out, "")
	case stepConfirm:
		out := append(m.heading("Confirm: acknowledge conflicts on "+m.subject()), "")
		m.field(&out, "change", fmt.Sprintf("%d conflicting attempt%s marked reviewed by your role; the record itself does not change", n, plural(n)))
		m.field(&out, "reason", termtext.Clean(m.typedReason()))
		return out
	case stepResult:
		return m.doneLines("conflicting attempts acknowledged", stateText(readmodel.State(m.res.State)))
	}
	return nil
}

func (s *ackFlow) write() func(ctx context.Context) (applied, error) {
	// Only the conflicts the operator was shown: any that arrived since
	// stay unreviewed.
	var seen []int64
	for _, c := range s.sm.rec.Conflicts {
		if !c.Reviewed {
			seen = append(seen, c.ID)
		}
	}
	dec, id, reason := s.sm.dec, s.sm.rec.ID, s.sm.typedReason()
	return func(ctx context.Context) (applied, error) {
		r, err := dec.AckConflicts(ctx, id, seen, reason)
		return applied{res: r}, err
	}
}

// act runs the write once the operator confirmed, and hands the page
// over.
func (s *ackFlow) act() tea.Cmd {
	var cmd tea.Cmd
	for _, ev := range s.sm.takeEvents() {
		if ev.kind == evSubmit {
			cmd = s.sm.apply(s.write())
		}
	}
	s.wordKeys()
	s.sm.setPage(stepPage{title: s.title(), text: s.page(s.sm.pageStep())})
	return cmd
}

func (s *ackFlow) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	s.sm, cmd = s.sm.Update(msg)
	return s, tea.Batch(cmd, s.act())
}

func (s *ackFlow) SetSize(w, h int) { flowResize(s, w, h) }

func (s *ackFlow) back() (bool, tea.Cmd) { return flowBack(s) }

func (s *ackFlow) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) { return flowOpen(s, n, at) }
