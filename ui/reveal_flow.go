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
	stepMachine
	stored   reconcile.Field
	revealed revealedValue
	keys     opsmodel.Keyring // the context's reveal_keys; nil when none
}

func newReveal(d deps, dec Decider, keys opsmodel.Keyring) *revealFlow {
	s := &revealFlow{stepMachine: newSteps(d, screenReveal, dec), stored: reconcile.FieldResult, keys: keys}
	s.first = stepReason
	s.crumbs = []crumb{{"reason", []step{stepReason, stepApplying}}, {"result", []step{stepResult}}}
	s.confirms, s.reasonAccept = false, "reveal (audited)"
	s.reveals = true
	legacySync(s, &s.stepMachine)
	return s
}

func (s *revealFlow) title() string {
	return s.recordTitle("Reveal the " + string(s.stored) + " of operation ")
}

func (s *revealFlow) page(st step) []string {
	switch st {
	case stepReason:
		out := append(s.heading("Why do you need to see the stored "+string(s.stored)+"?"), "")
		s.para(&out, "The reveal is audited before the value is shown: the audit record keeps your role and this reason. The value is hidden again when you leave.", nil)
		return append(out, "")
	case stepConfirm:
		out := append(s.heading("Reveal the stored "+string(s.stored)+" of operation "+strconv.FormatInt(s.rec.ID, 10)), "")
		s.field(&out, "reason", termtext.Clean(s.typedReason()))
		return out
	case stepResult:
		return s.done()
	}
	return nil
}

func (s *revealFlow) write() func(ctx context.Context) (applied, error) {
	dec, id, field, reason := s.dec, s.rec.ID, s.stored, s.typedReason()
	return func(ctx context.Context) (applied, error) {
		v, r, err := dec.RevealStart(ctx, id, field, reason, revealBytes)
		return applied{res: r, value: v}, err
	}
}

func (s *revealFlow) done() []string {
	out := append(s.doneLines("revealed, audited first", ""),
		"", " "+s.st.Title.Render("Stored "+string(s.stored))+s.st.Muted.Render("  (hidden again when you leave)"))
	room := s.resultRoom()
	s.revealed.clampScroll(room)
	return append(out, strings.Split(s.revealed.scrollView(s.w, room, s.st), "\n")...)
}

// begin takes the field to reveal.
func (s *revealFlow) begin(fn flowNav) tea.Cmd {
	s.stored = fn.field
	return nil
}

// applied keeps the value, as its write answered.
func (s *revealFlow) applied(v any) {
	if r, ok := v.(reconcile.Revealed); ok {
		s.revealed.set(r, s.keys, s.stored, opsmodel.Identity{Tenant: s.rec.Tenant, Tool: s.rec.Tool, Key: s.rec.Key})
	}
	s.layOutRevealed()
}

// keysAt and keyAt scroll the value once it is shown.
func (s *revealFlow) keysAt(st step, k *KeyMap) {
	if st == stepResult && s.err == nil {
		s.revealed.enableScroll(k, s.resultRoom())
	}
}

func (s *revealFlow) keyAt(st step, msg tea.KeyMsg) (tea.Cmd, bool) {
	return nil, st == stepResult && s.revealed.scrollKey(msg, s.KeyMap, s.resultRoom())
}

// leave forgets the value.
func (s *revealFlow) leave() {
	s.stepMachine.leave()
	s.revealed.forget()
}

func (s *revealFlow) SetSize(w, h int) {
	s.w, s.h = w, h
	s.layOutRevealed()
	s.stepMachine.SetSize(w, h)
	legacySync(s, &s.stepMachine)
}

// layOutRevealed lays the revealed value out for the screen's width.
func (s *revealFlow) layOutRevealed() {
	more := fmt.Sprintf("opsdesk ops reveal %d --field %s --reason … prints it whole.", s.rec.ID, s.stored)
	s.revealed.layOut(s.w, s.st, more)
}

func (s *revealFlow) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	return s, legacyUpdate(s, &s.stepMachine, msg)
}
func (s *revealFlow) View() string          { return s.stepMachine.View() }
func (s *revealFlow) back() (bool, tea.Cmd) { return legacyBack(s, &s.stepMachine) }
func (s *revealFlow) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	return legacyOpen(s, &s.stepMachine, n, at)
}
