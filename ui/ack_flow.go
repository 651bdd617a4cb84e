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
type ackFlow struct{ stepMachine }

func newAck(d deps, dec Decider) *ackFlow {
	s := &ackFlow{stepMachine: newSteps(d, screenAck, dec)}
	s.first = stepReason
	s.crumbs = []crumb{{"reason", []step{stepReason}}, {"confirm", []step{stepConfirm, stepApplying}}, {"done", []step{stepResult}}}
	legacySync(s, &s.stepMachine)
	return s
}

func (s *ackFlow) title() string { return s.recordTitle("Acknowledge conflicts on operation ") }

func (s *ackFlow) page(st step) []string {
	n := unreviewed(s.rec.Conflicts)
	switch st {
	case stepReason:
		out := append(s.heading(fmt.Sprintf("Acknowledge %d unreviewed conflicting attempt%s", n, plural(n))), "")
		s.para(&out, "They stay on record, marked reviewed by your role. Why are they no concern (a caller's bug, fixed)?", nil)
		return append(out, "")
	case stepConfirm:
		out := append(s.heading("Confirm: acknowledge conflicts on "+s.subject()), "")
		s.field(&out, "change", fmt.Sprintf("%d conflicting attempt%s marked reviewed by your role; the record itself does not change", n, plural(n)))
		s.field(&out, "reason", termtext.Clean(s.typedReason()))
		return out
	}
	return nil
}

func (s *ackFlow) write() func(ctx context.Context) (applied, error) {
	// Only the conflicts the operator was shown: any that arrived since
	// stay unreviewed.
	var seen []int64
	for _, c := range s.rec.Conflicts {
		if !c.Reviewed {
			seen = append(seen, c.ID)
		}
	}
	dec, id, reason := s.dec, s.rec.ID, s.typedReason()
	return func(ctx context.Context) (applied, error) {
		r, err := dec.AckConflicts(ctx, id, seen, reason)
		return applied{res: r}, err
	}
}

func (s *ackFlow) done() []string {
	return s.doneLines("conflicting attempts acknowledged", stateText(readmodel.State(s.res.State)))
}

func (s *ackFlow) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	return s, legacyUpdate(s, &s.stepMachine, msg)
}
func (s *ackFlow) View() string          { return s.stepMachine.View() }
func (s *ackFlow) SetSize(w, h int)      { s.stepMachine.SetSize(w, h); legacySync(s, &s.stepMachine) }
func (s *ackFlow) back() (bool, tea.Cmd) { return legacyBack(s, &s.stepMachine) }
func (s *ackFlow) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	return legacyOpen(s, &s.stepMachine, n, at)
}
