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
	onSteps
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
	s := &conflictFlow{onSteps: newOnSteps(d, screenConflict, dec), sealKeys: keys}
	s.sm.first = stepChoose
	s.sm.reveals = true
	s.act()
	return s
}

func (s *conflictFlow) title() string { return s.sm.recordTitle("Reveal a conflict on operation ") }

func (s *conflictFlow) page(st step) []string {
	switch st {
	case stepChoose:
		return s.chooseView()
	case stepReason:
		return s.reasonHead()
	case stepConfirm:
		c := s.conflict()
		out := append(s.sm.heading(fmt.Sprintf("Confirm: reveal %s beside the original request of operation %d", s.attemptName(), s.sm.rec.ID)), "")
		s.sm.field(&out, "reveals", "the original request ("+termtext.Clean(s.sm.rec.FingerprintTag)+") and the attempted one ("+
			termtext.Clean(c.FingerprintTag)+"), in full, with the fields that differ")
		s.sm.field(&out, "audit", "an audit record (reveal:conflict, with your role and this reason) commits before anything is read; nothing changes")
		s.sm.field(&out, "reason", termtext.Clean(s.sm.typedReason()))
		return out
	case stepResult:
		return s.compared()
	}
	return nil
}

// keysAt enables and words the keys of the flow's step, after the
// machine's.
func (s *conflictFlow) keysAt(st step) {
	k, mk := &s.keys, &s.sm.KeyMap
	switch st {
	case stepChoose:
		n := len(s.sm.rec.Conflicts)
		k.Up.SetEnabled(n > 1)
		k.Down.SetEnabled(n > 1)
		mk.Next.SetEnabled(n > 0)
		mk.Cancel.SetEnabled(true)
		mk.Cancel.SetHelp("esc", "cancel")
	case stepResult:
		if s.sm.err == nil {
			s.shown.enableScroll(k, s.sm.resultRoom())
		}
	}
}

func (s *conflictFlow) keyAt(st step, msg tea.KeyMsg) (tea.Cmd, bool) {
	k := s.keys
	switch {
	case st == stepResult:
		return nil, s.shown.scrollKey(msg, k, s.sm.resultRoom())
	case st != stepChoose:
		return nil, false
	case key.Matches(msg, k.Up):
		s.chosen = max(0, s.chosen-1)
	case key.Matches(msg, k.Down):
		s.chosen = min(len(s.sm.rec.Conflicts)-1, s.chosen+1)
	case key.Matches(msg, s.sm.KeyMap.Next):
		if len(s.sm.rec.Conflicts) == 0 {
			return nil, true
		}
		return s.sm.forward(stepReason), true
	default:
		return nil, false
	}
	return nil, true
}

func (s *conflictFlow) write() func(ctx context.Context) (applied, error) {
	dec, cid, reason, st, keys := s.sm.dec, s.conflict().ID, s.sm.typedReason(), s.sm.st, s.sealKeys
	id := opsmodel.Identity{Tenant: s.sm.rec.Tenant, Tool: s.sm.rec.Tool, Key: s.sm.rec.Key}
	more := fmt.Sprintf("opsdesk conflicts show %d --conflict %d --reveal --reason … -o json prints it whole.", s.sm.rec.ID, cid)
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

// compared is the result of a reveal that succeeded: both requests, side
// by side, scrolled.
func (s *conflictFlow) compared() []string {
	title := fmt.Sprintf("Attempt %d (conflict #%d) beside the original", s.chosen+1, s.conflict().ID)
	const hidden = "  (hidden again when you leave)"
	line := " " + s.sm.st.Title.Render(truncate(title, max(1, s.sm.w-2)))
	if len(title)+len(hidden)+2 <= s.sm.w {
		line += s.sm.st.Muted.Render(hidden)
	}
	out := append(s.sm.doneLines("revealed, audited first", ""), "", line)
	room := s.sm.resultRoom()
	s.shown.clampScroll(room)
	return append(out, strings.Split(s.shown.scrollView(s.sm.w, room, s.sm.st), "\n")...)
}

// act does what the machine reported: it chooses an attempt when the
// flow starts, runs the write once asked, keeps the requests as the write
// answered and forgets them when the machine starts over. Then it hands
// the page over.
func (s *conflictFlow) act() tea.Cmd {
	var cmd tea.Cmd
	for _, ev := range s.sm.takeEvents() {
		switch ev.kind {
		case evStarted:
			cmd = tea.Batch(cmd, s.begin())
		case evSubmit:
			cmd = tea.Batch(cmd, s.sm.apply(s.write()))
		case evApplied:
			if a, ok := ev.value.(conflictAnswer); ok {
				s.shown.set(a.rev, a.original, a.attempted)
			}
			s.layOutShown()
		case evLeft:
			s.shown.forget()
		}
	}
	s.wordKeys()
	s.keysAt(s.sm.step)
	s.sm.setPage(stepPage{title: s.title(), text: s.page(s.sm.pageStep())})
	return cmd
}

// begin chooses the latest attempt nobody reviewed, else the latest:
// what the operator most likely came for.
func (s *conflictFlow) begin() tea.Cmd {
	s.chosen = len(s.sm.rec.Conflicts) - 1
	for i := len(s.sm.rec.Conflicts) - 1; i >= 0; i-- {
		if !s.sm.rec.Conflicts[i].Reviewed {
			s.chosen = i
			break
		}
	}
	s.sm.crumbs = []crumb{{"reason", []step{stepReason}}, {"confirm", []step{stepConfirm, stepApplying}}, {"compare", []step{stepResult}}}
	if len(s.sm.rec.Conflicts) == 1 {
		return s.sm.enter(stepReason) // nothing to choose
	}
	s.sm.crumbs = append([]crumb{{"attempt", []step{stepChoose}}}, s.sm.crumbs...)
	return nil
}

// leave forgets the requests.
func (s *conflictFlow) leave() {
	s.sm.leave()
	s.shown.forget()
}

func (s *conflictFlow) SetSize(w, h int) {
	s.sm.SetSize(w, h)
	s.layOutShown()
	s.act()
}

// Update hands a key the step offers to the flow's own keys first.
func (s *conflictFlow) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if k, ok := msg.(tea.KeyMsg); ok && s.sm.offers(k) {
		if cmd, ok := s.keyAt(s.sm.step, k); ok {
			return s, tea.Batch(cmd, s.act())
		}
	}
	var cmd tea.Cmd
	s.sm, cmd = s.sm.Update(msg)
	return s, tea.Batch(cmd, s.act())
}

func (s *conflictFlow) back() (bool, tea.Cmd) { return flowBack(s) }

func (s *conflictFlow) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	return flowOpen(s, n, at)
}

// conflict is the attempt chosen.
func (s *conflictFlow) conflict() readmodel.Conflict {
	if s.chosen < 0 || s.chosen >= len(s.sm.rec.Conflicts) {
		return readmodel.Conflict{}
	}
	return s.sm.rec.Conflicts[s.chosen]
}

// attemptName names the chosen attempt as the record's detail numbers it
// (its timeline and table count a record's attempts from 1), with the
// conflict's id, which opsdesk conflicts show --conflict takes.
func (s *conflictFlow) attemptName() string {
	return fmt.Sprintf("conflicting attempt %d (conflict #%d)", s.chosen+1, s.conflict().ID)
}

// attemptText describes a conflicting attempt in a line.
func (s *conflictFlow) attemptText(i int) string {
	c := s.sm.rec.Conflicts[i]
	reviewed := glyphConflicted + " unreviewed"
	if c.Reviewed {
		reviewed = "reviewed"
	}
	return fmt.Sprintf("#%d  %s · attempt %d at %s by %s · tool version %s · %s", c.ID, reviewed, i+1, stamp(c.AttemptedAt, s.sm.rec.DBTime),
		orDash(termtext.Clean(c.Owner)), termtext.Clean(c.ToolVersion), termtext.Clean(c.FingerprintTag))
}

// chooseView lists the record's conflicting attempts, a window of them
// around the one chosen.
func (s *conflictFlow) chooseView() []string {
	n := len(s.sm.rec.Conflicts)
	if n == 0 {
		out := s.sm.heading("Operation " + strconv.FormatInt(s.sm.rec.ID, 10) + " has no conflicting attempts: there is nothing to compare.")
		return append(out, "", " "+s.sm.st.Muted.Render("esc goes back to the record."))
	}
	out := append(s.sm.heading(fmt.Sprintf("Which of the %d conflicting attempts do you want to see beside the original request?", n)), "")
	s.sm.para(&out, "Original: "+termtext.Clean(s.sm.rec.FingerprintTag)+" (tool version "+termtext.Clean(s.sm.rec.ToolVersion)+"). "+
		"The latest unreviewed attempt is chosen; ↑/↓ choose another, enter goes on.", s.sm.st.Muted.Render)
	out = append(out, "")
	rows := max(3, s.sm.h-14)
	from := min(max(0, s.chosen-rows/2), max(0, n-rows))
	for i := from; i < min(n, from+rows); i++ {
		line := "  " + truncate(s.attemptText(i), max(1, s.sm.w-5))
		if i == s.chosen {
			line = "> " + truncate(s.attemptText(i), max(1, s.sm.w-5))
			line = s.sm.st.Selected.Render(line)
		}
		out = append(out, " "+line)
	}
	if n > rows {
		out = append(out, " "+s.sm.st.Muted.Render(fmt.Sprintf("  %d of %d", s.chosen+1, n)))
	}
	return out
}

// reasonHead says what is revealed, and that it is audited, above the
// reason.
func (s *conflictFlow) reasonHead() []string {
	c := s.conflict()
	out := append(s.sm.heading(fmt.Sprintf("Why do you need to see %s beside the original request?", s.attemptName())), "")
	s.sm.para(&out, fmt.Sprintf("Both requests are shown in full: the record's original request (its stored intent, %s) and the request "+
		"of the attempt that reused the key at %s (%s, by %s), with the fields that differ marked.",
		termtext.Clean(s.sm.rec.FingerprintTag), stamp(c.AttemptedAt, s.sm.rec.DBTime), termtext.Clean(c.FingerprintTag), orDash(termtext.Clean(c.Owner))), nil)
	out = append(out, "")
	s.sm.para(&out, "The reveal is audited before anything is read: the audit record keeps your role and this reason. "+
		"Both requests are hidden again when you leave.", nil)
	return append(out, "")
}

// layOutShown lays the revealed requests out for the screen's width.
func (s *conflictFlow) layOutShown() {
	c := s.conflict()
	s.shown.layOut(s.sm.w, s.sm.st,
		fmt.Sprintf("ORIGINAL request · operation %d · %s", s.sm.rec.ID, termtext.Clean(s.sm.rec.FingerprintTag)),
		fmt.Sprintf("ATTEMPTED request · attempt %d, conflict #%d · %s", s.chosen+1, c.ID, termtext.Clean(c.FingerprintTag)))
}
