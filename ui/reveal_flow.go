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
	onSteps
	stored   reconcile.Field
	revealed revealedValue
	sealKeys opsmodel.Keyring // the context's reveal_keys; nil when none
}

func newReveal(d deps, dec Decider, keys opsmodel.Keyring) *revealFlow {
	s := &revealFlow{onSteps: newOnSteps(d, screenReveal, dec), stored: reconcile.FieldResult, sealKeys: keys}
	s.sm.first = stepReason
	s.sm.crumbs = []crumb{{"reason", []step{stepReason, stepApplying}}, {"result", []step{stepResult}}}
	s.sm.confirms, s.sm.reasonAccept = false, "reveal (audited)"
	s.sm.reveals = true
	s.act()
	return s
}

func (s *revealFlow) title() string {
	return s.sm.recordTitle("Reveal the " + string(s.stored) + " of operation ")
}

func (s *revealFlow) page(st step) []string {
	m := &s.sm
	switch st {
	case stepReason:
		out := append(m.heading("Why do you need to see the stored "+string(s.stored)+"?"), "")
		m.para(&out, "The reveal is audited before the value is shown: the audit record keeps your role and this reason. The value is hidden again when you leave.", nil)
		return append(out, "")
	case stepConfirm:
		out := append(m.heading("Reveal the stored "+string(s.stored)+" of operation "+strconv.FormatInt(m.rec.ID, 10)), "")
		m.field(&out, "reason", termtext.Clean(m.typedReason()))
		return out
	case stepResult:
		out := append(m.doneLines("revealed, audited first", ""),
			"", " "+m.st.Title.Render("Stored "+string(s.stored))+m.st.Muted.Render("  (hidden again when you leave)"))
		room := m.resultRoom()
		s.revealed.clampScroll(room)
		return append(out, strings.Split(s.revealed.scrollView(m.w, room, m.st), "\n")...)
	}
	return nil
}

func (s *revealFlow) write() func(ctx context.Context) (applied, error) {
	dec, id, field, reason := s.sm.dec, s.sm.rec.ID, s.stored, s.sm.typedReason()
	return func(ctx context.Context) (applied, error) {
		v, r, err := dec.RevealStart(ctx, id, field, reason, revealBytes)
		return applied{res: r, value: v}, err
	}
}

// act does what the machine reported: it takes the field to reveal when
// the flow starts, runs the write once asked, keeps the value as the
// write answered and forgets it when the machine starts over. Then it
// hands the page over, with the value's scrolling keys once it is shown.
func (s *revealFlow) act() tea.Cmd {
	var cmd tea.Cmd
	for _, ev := range s.sm.takeEvents() {
		switch ev.kind {
		case evStarted:
			s.stored = s.sm.nav.field
		case evSubmit:
			cmd = s.sm.apply(s.write())
		case evApplied:
			if r, ok := ev.value.(reconcile.Revealed); ok {
				s.revealed.set(r, s.sealKeys, s.stored, opsmodel.Identity{Tenant: s.sm.rec.Tenant, Tool: s.sm.rec.Tool, Key: s.sm.rec.Key})
			}
			s.layOutRevealed()
		case evLeft:
			s.revealed.forget()
		}
	}
	s.wordKeys()
	if s.sm.step == stepResult && s.sm.err == nil {
		s.revealed.enableScroll(&s.keys, s.sm.resultRoom())
	}
	s.sm.setPage(stepPage{title: s.title(), text: s.page(s.sm.pageStep())})
	return cmd
}

func (s *revealFlow) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if k, ok := msg.(tea.KeyMsg); ok && s.sm.offers(k) && s.sm.step == stepResult &&
		s.revealed.scrollKey(k, s.keys, s.sm.resultRoom()) {
		return s, s.act()
	}
	var cmd tea.Cmd
	s.sm, cmd = s.sm.Update(msg)
	return s, tea.Batch(cmd, s.act())
}

// leave forgets the value.
func (s *revealFlow) leave() {
	s.sm.leave()
	s.revealed.forget()
}

func (s *revealFlow) SetSize(w, h int) {
	s.sm.SetSize(w, h)
	s.layOutRevealed()
	s.act()
}

func (s *revealFlow) back() (bool, tea.Cmd) { return flowBack(s) }

func (s *revealFlow) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) { return flowOpen(s, n, at) }

// layOutRevealed lays the revealed value out for the screen's width.
func (s *revealFlow) layOutRevealed() {
	more := fmt.Sprintf("opsdesk ops reveal %d --field %s --reason … prints it whole.", s.sm.rec.ID, s.stored)
	s.revealed.layOut(s.sm.w, s.sm.st, more)
}
