package ui

import (
	"context"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/termtext"
)

// screenAck acknowledges a record's unreviewed conflicting attempts.
const screenAck screenID = "ack"

// ackKind is the acknowledgement; a record's detail opens it.
var ackKind = screenKind{id: screenAck, build: func(d deps, o Config) screen { return newAck(d, o.Decider) }}

// ackFlow acknowledges the conflicting attempts the operator was shown:
// a reason, a confirmation, the result.
type ackFlow struct{ flow }

func newAck(d deps, dec Decider) *ackFlow {
	s := &ackFlow{flow: newFlow(d, screenAck, dec)}
	s.first = stepReason
	s.what = func() string { return "Acknowledge conflicts on operation " }
	s.crumbs = []crumb{{"reason", []step{stepReason}}, {"confirm", []step{stepConfirm, stepApplying}}, {"done", []step{stepResult}}}
	s.commonSteps(func() tea.Cmd { return s.forward(stepConfirm) }, func() []string {
		n := unreviewed(s.rec.Conflicts)
		out := append(s.heading(fmt.Sprintf("Acknowledge %d unreviewed conflicting attempt%s", n, plural(n))), "")
		s.para(&out, "They stay on record, marked reviewed by your role. Why are they no concern (a caller's bug, fixed)?", nil)
		return append(out, "")
	}, "next")
	s.confirmHead = func() []string {
		n := unreviewed(s.rec.Conflicts)
		out := append(s.heading("Confirm: acknowledge conflicts on "+s.subject()), "")
		s.field(&out, "change", fmt.Sprintf("%d conflicting attempt%s marked reviewed by your role; the record itself does not change", n, plural(n)))
		s.field(&out, "reason", termtext.Clean(s.typedReason()))
		return out
	}
	s.write = func() func(ctx context.Context) (applied, error) {
		// Only the conflicts the operator was shown: any that arrived
		// since stay unreviewed.
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
	s.done = func() string { return "conflicting attempts acknowledged" }
	s.stateLine = true
	s.self = s
	s.updateKeys()
	return s
}
