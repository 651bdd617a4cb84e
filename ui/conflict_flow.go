package ui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// screenConflict shows a conflicting attempt's request beside the
// record's original request, what differs marked.
const screenConflict screenID = "conflict"

// conflictKind is the conflict reveal; a record's detail opens it.
var conflictKind = screenKind{id: screenConflict, build: func(d deps, o Config) screen { return newConflictFlow(d, o.Decider, o.RevealKeys) }}

// stepChoose picks the conflicting attempt, when a record has several.
const stepChoose step = "choose"

// conflictFlow reveals one of a record's conflicting attempts beside its
// original request: which attempt (when there are several), a reason, a
// confirmation, then both requests side by side (stacked on a narrow
// terminal) with the fields that differ marked, forgotten when the
// operator leaves. The reveal is audited before anything is read.
type conflictFlow struct {
	stepMachine
	chosen   int              // the attempt to reveal: its index in rec.Conflicts
	sealKeys opsmodel.Keyring // the context's reveal_keys; nil when none
	shown    conflictShown
}

// conflictAnswer is what a reveal read, and both requests laid out one
// field a line (the work that grows with their size, done in the
// command, not in Update), handed over with its applyMsg.
type conflictAnswer struct {
	rev                 reconcile.ConflictReveal
	original, attempted []sideCell
}

func newConflictFlow(d deps, dec Decider, keys opsmodel.Keyring) *conflictFlow {
	s := &conflictFlow{stepMachine: newSteps(d, screenConflict, dec), sealKeys: keys}
	s.first = stepChoose
	s.reveals = true
	legacySync(s, &s.stepMachine)
	return s
}

func (s *conflictFlow) title() string { return s.recordTitle("Reveal a conflict on operation ") }

func (s *conflictFlow) page(st step) []string {
	switch st {
	case stepChoose:
		return s.chooseView()
	case stepReason:
		return s.reasonHead()
	case stepConfirm:
		c := s.conflict()
		out := append(s.heading(fmt.Sprintf("Confirm: reveal %s beside the original request of operation %d", s.attemptName(), s.rec.ID)), "")
		s.field(&out, "reveals", "the original request ("+termtext.Clean(s.rec.FingerprintTag)+") and the attempted one ("+
			termtext.Clean(c.FingerprintTag)+"), in full, with the fields that differ")
		s.field(&out, "audit", "an audit record (reveal:conflict, with your role and this reason) commits before anything is read; nothing changes")
		s.field(&out, "reason", termtext.Clean(s.typedReason()))
		return out
	case stepResult:
		return s.done()
	}
	return nil
}

func (s *conflictFlow) keysAt(st step, k *KeyMap) {
	switch st {
	case stepChoose:
		n := len(s.rec.Conflicts)
		k.Up.SetEnabled(n > 1)
		k.Down.SetEnabled(n > 1)
		k.Next.SetEnabled(n > 0)
		k.Cancel.SetEnabled(true)
		k.Cancel.SetHelp("esc", "cancel")
	case stepResult:
		if s.err == nil {
			s.shown.enableScroll(k, s.resultRoom())
		}
	}
}

func (s *conflictFlow) keyAt(st step, msg tea.KeyMsg) (tea.Cmd, bool) {
	k := s.KeyMap
	switch {
	case st == stepResult:
		return nil, s.shown.scrollKey(msg, k, s.resultRoom())
	case st != stepChoose:
		return nil, false
	case key.Matches(msg, k.Up):
		s.chosen = max(0, s.chosen-1)
	case key.Matches(msg, k.Down):
		s.chosen = min(len(s.rec.Conflicts)-1, s.chosen+1)
	case key.Matches(msg, k.Next):
		if len(s.rec.Conflicts) == 0 {
			return nil, true
		}
		return s.forward(stepReason), true
	default:
		return nil, false
	}
	return nil, true
}

func (s *conflictFlow) write() func(ctx context.Context) (applied, error) {
	dec, cid, reason, st, keys := s.dec, s.conflict().ID, s.typedReason(), s.st, s.sealKeys
	id := opsmodel.Identity{Tenant: s.rec.Tenant, Tool: s.rec.Tool, Key: s.rec.Key}
	more := fmt.Sprintf("opsdesk conflicts show %d --conflict %d --reveal --reason … -o json prints it whole.", s.rec.ID, cid)
	return func(ctx context.Context) (applied, error) {
		rev, r, err := dec.RevealConflict(ctx, cid, reason)
		if err != nil {
			return applied{res: r}, err
		}
		rev.OpenSealed(keys, id)
		return applied{res: r, value: conflictAnswer{rev: rev,
			original: sideCells(rev.Original, rev.Diffs, st, more), attempted: sideCells(rev.Attempted, rev.Diffs, st, more)}}, nil
	}
}

func (s *conflictFlow) done() []string {
	title := fmt.Sprintf("Attempt %d (conflict #%d) beside the original", s.chosen+1, s.conflict().ID)
	const hidden = "  (hidden again when you leave)"
	line := " " + s.st.Title.Render(truncate(title, max(1, s.w-2)))
	if len(title)+len(hidden)+2 <= s.w {
		line += s.st.Muted.Render(hidden)
	}
	out := append(s.doneLines("revealed, audited first", ""), "", line)
	room := s.resultRoom()
	s.shown.clampScroll(room)
	return append(out, strings.Split(s.shown.scrollView(s.w, room, s.st), "\n")...)
}

// applied keeps the requests, as the write answered.
func (s *conflictFlow) applied(v any) {
	if a, ok := v.(conflictAnswer); ok {
		s.shown.set(a.rev, a.original, a.attempted)
	}
	s.layOutShown()
}

// begin chooses the latest attempt nobody reviewed, else the latest:
// what the operator most likely came for.
func (s *conflictFlow) begin(flowNav) tea.Cmd {
	s.chosen = len(s.rec.Conflicts) - 1
	for i := len(s.rec.Conflicts) - 1; i >= 0; i-- {
		if !s.rec.Conflicts[i].Reviewed {
			s.chosen = i
			break
		}
	}
	s.crumbs = []crumb{{"reason", []step{stepReason}}, {"confirm", []step{stepConfirm, stepApplying}}, {"compare", []step{stepResult}}}
	if len(s.rec.Conflicts) == 1 {
		return s.enter(stepReason) // nothing to choose
	}
	s.crumbs = append([]crumb{{"attempt", []step{stepChoose}}}, s.crumbs...)
	return nil
}

// leave forgets the requests.
func (s *conflictFlow) leave() {
	s.stepMachine.leave()
	s.shown.forget()
}

func (s *conflictFlow) SetSize(w, h int) {
	s.w, s.h = w, h
	s.layOutShown()
	s.stepMachine.SetSize(w, h)
	legacySync(s, &s.stepMachine)
}

func (s *conflictFlow) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	return s, legacyUpdate(s, &s.stepMachine, msg)
}
func (s *conflictFlow) View() string          { return s.stepMachine.View() }
func (s *conflictFlow) back() (bool, tea.Cmd) { return legacyBack(s, &s.stepMachine) }
func (s *conflictFlow) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	return legacyOpen(s, &s.stepMachine, n, at)
}

// conflict is the attempt chosen.
func (s *conflictFlow) conflict() readmodel.Conflict {
	if s.chosen < 0 || s.chosen >= len(s.rec.Conflicts) {
		return readmodel.Conflict{}
	}
	return s.rec.Conflicts[s.chosen]
}

// attemptName names the chosen attempt as the record's detail numbers it
// (its timeline and table count a record's attempts from 1), with the
// conflict's id, which opsdesk conflicts show --conflict takes.
func (s *conflictFlow) attemptName() string {
	return fmt.Sprintf("conflicting attempt %d (conflict #%d)", s.chosen+1, s.conflict().ID)
}

// attemptText describes a conflicting attempt in a line.
func (s *conflictFlow) attemptText(i int) string {
	c := s.rec.Conflicts[i]
	reviewed := glyphConflicted + " unreviewed"
	if c.Reviewed {
		reviewed = "reviewed"
	}
	return fmt.Sprintf("#%d  %s · attempt %d at %s by %s · tool version %s · %s", c.ID, reviewed, i+1, stamp(c.AttemptedAt, s.rec.DBTime),
		orDash(termtext.Clean(c.Owner)), termtext.Clean(c.ToolVersion), termtext.Clean(c.FingerprintTag))
}

// chooseView lists the record's conflicting attempts, a window of them
// around the one chosen.
func (s *conflictFlow) chooseView() []string {
	n := len(s.rec.Conflicts)
	if n == 0 {
		out := s.heading("Operation " + strconv.FormatInt(s.rec.ID, 10) + " has no conflicting attempts: there is nothing to compare.")
		return append(out, "", " "+s.st.Muted.Render("esc goes back to the record."))
	}
	out := append(s.heading(fmt.Sprintf("Which of the %d conflicting attempts do you want to see beside the original request?", n)), "")
	s.para(&out, "Original: "+termtext.Clean(s.rec.FingerprintTag)+" (tool version "+termtext.Clean(s.rec.ToolVersion)+"). "+
		"The latest unreviewed attempt is chosen; ↑/↓ choose another, enter goes on.", s.st.Muted.Render)
	out = append(out, "")
	rows := max(3, s.h-14)
	from := min(max(0, s.chosen-rows/2), max(0, n-rows))
	for i := from; i < min(n, from+rows); i++ {
		line := "  " + truncate(s.attemptText(i), max(1, s.w-5))
		if i == s.chosen {
			line = "> " + truncate(s.attemptText(i), max(1, s.w-5))
			line = s.st.Selected.Render(line)
		}
		out = append(out, " "+line)
	}
	if n > rows {
		out = append(out, " "+s.st.Muted.Render(fmt.Sprintf("  %d of %d", s.chosen+1, n)))
	}
	return out
}

// reasonHead says what is revealed, and that it is audited, above the
// reason.
func (s *conflictFlow) reasonHead() []string {
	c := s.conflict()
	out := append(s.heading(fmt.Sprintf("Why do you need to see %s beside the original request?", s.attemptName())), "")
	s.para(&out, fmt.Sprintf("Both requests are shown in full: the record's original request (its stored intent, %s) and the request "+
		"of the attempt that reused the key at %s (%s, by %s), with the fields that differ marked.",
		termtext.Clean(s.rec.FingerprintTag), stamp(c.AttemptedAt, s.rec.DBTime), termtext.Clean(c.FingerprintTag), orDash(termtext.Clean(c.Owner))), nil)
	out = append(out, "")
	s.para(&out, "The reveal is audited before anything is read: the audit record keeps your role and this reason. "+
		"Both requests are hidden again when you leave.", nil)
	return append(out, "")
}

// layOutShown lays the revealed requests out for the screen's width.
func (s *conflictFlow) layOutShown() {
	c := s.conflict()
	s.shown.layOut(s.w, s.st,
		fmt.Sprintf("ORIGINAL request · operation %d · %s", s.rec.ID, termtext.Clean(s.rec.FingerprintTag)),
		fmt.Sprintf("ATTEMPTED request · attempt %d, conflict #%d · %s", s.chosen+1, c.ID, termtext.Clean(c.FingerprintTag)))
}
