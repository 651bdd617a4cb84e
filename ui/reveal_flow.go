package ui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// screenReveal shows a record's stored result or intent.
const screenReveal screenID = "reveal"

// revealKind is the reveal; a record's detail opens it.
var revealKind = screenKind{id: screenReveal, build: func(d deps, o Config) screen { return newReveal(d, o.Decider, o.RevealKeys) }}

// revealFlow shows a record's stored result or intent (the canonical
// request) once its audit record committed: a reason, then the value,
// scrolled, forgotten when the operator leaves.
type revealFlow struct {
	flow
	stored   reconcile.Field
	revealed revealedValue
	keys     opsmodel.Keyring // the context's reveal_keys; nil when none
}

func newReveal(d deps, dec Decider, keys opsmodel.Keyring) *revealFlow {
	s := &revealFlow{flow: newFlow(d, screenReveal, dec), stored: reconcile.FieldResult, keys: keys}
	s.first = stepReason
	s.what = func() string { return "Reveal the " + string(s.stored) + " of operation " }
	s.crumbs = []crumb{{"reason", []step{stepReason, stepApplying}}, {"result", []step{stepResult}}}
	s.commonSteps(s.apply, func() []string {
		out := append(s.heading("Why do you need to see the stored "+string(s.stored)+"?"), "")
		s.para(&out, "The reveal is audited before the value is shown: the audit record keeps your role and this reason. The value is hidden again when you leave.", nil)
		return append(out, "")
	}, "reveal (audited)")
	s.confirmHead = func() []string {
		out := append(s.heading("Reveal the stored "+string(s.stored)+" of operation "+strconv.FormatInt(s.rec.ID, 10)), "")
		s.field(&out, "reason", termtext.Clean(s.typedReason()))
		return out
	}
	s.reveals = true
	s.write = func() func(ctx context.Context) (applied, error) {
		dec, id, field, reason := s.dec, s.rec.ID, s.stored, s.typedReason()
		return func(ctx context.Context) (applied, error) {
			v, r, err := dec.RevealStart(ctx, id, field, reason, revealBytes)
			return applied{res: r, value: v}, err
		}
	}
	s.done = func() string { return "revealed, audited first" }
	s.doneMore = func() []string {
		out := []string{"", " " + s.st.Title.Render("Stored "+string(s.stored)) + s.st.Muted.Render("  (hidden again when you leave)")}
		room := s.resultRoom()
		s.revealed.clampScroll(room)
		return append(out, strings.Split(s.revealed.scrollView(s.w, room, s.st), "\n")...)
	}
	s.onApplied = func(v any) {
		if r, ok := v.(reconcile.Revealed); ok { // as its write answered
			s.revealed.set(r, s.keys, s.stored, opsmodel.Identity{Tenant: s.rec.Tenant, Tool: s.rec.Tool, Key: s.rec.Key})
		}
		s.layOutRevealed()
	}
	s.onLeave = s.revealed.forget
	s.resized = s.layOutRevealed
	s.scrollsResult(&s.revealed.scrollText, s.resultRoom)
	s.begin = func(fn flowNav) tea.Cmd {
		s.stored = fn.field
		return nil
	}
	s.self = s
	s.updateKeys()
	return s
}

// layOutRevealed lays the revealed value out for the screen's width.
func (s *revealFlow) layOutRevealed() {
	more := fmt.Sprintf("opsdesk ops reveal %d --field %s --reason … prints it whole.", s.rec.ID, s.stored)
	s.revealed.layOut(s.w, s.st, more)
}
