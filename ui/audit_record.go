package ui

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// screenAuditRecord is one audit record.
const screenAuditRecord screenID = "audit-record"

// auditRecordNav opens one audit record.
type auditRecordNav struct{ ref auditRef }

func (auditRecordNav) target() screenID { return screenAuditRecord }

// auditRecordKind is one audit record; the trail opens it.
var auditRecordKind = screenKind{id: screenAuditRecord, build: func(d deps, _ Config) screen { return newAuditRecord(d) }}

// auditRecordScreen shows one audit record whole: who, what, when, why,
// the change, the evidence and flags, the details, and what the chain
// says of the record.
type auditRecordScreen struct {
	deps
	navigator
	w, h int

	ref      auditRef
	seq      int
	loading  bool
	d        *readmodel.AuditDetail
	notFound bool
	err      error

	scrollText
}

func newAuditRecord(d deps) *auditRecordScreen {
	s := &auditRecordScreen{deps: d}
	s.updateKeys()
	return s
}

func (s *auditRecordScreen) id() screenID          { return screenAuditRecord }
func (s *auditRecordScreen) Init() tea.Cmd         { return nil }
func (s *auditRecordScreen) current(seq int) bool  { return seq == s.seq }
func (s *auditRecordScreen) capturing() bool       { return false }
func (s *auditRecordScreen) back() (bool, tea.Cmd) { return false, nil }

func (s *auditRecordScreen) asOf() time.Time {
	if s.d == nil {
		return time.Time{}
	}
	return s.d.DBTime
}

func (s *auditRecordScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	s.render()
}

// open shows a record above the screen it was opened from.
func (s *auditRecordScreen) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	r, ok := n.(auditRecordNav)
	if !ok {
		return nil, nil, false
	}
	return at.pushed(s), s.show(r.ref), true
}

// show shows another record.
func (s *auditRecordScreen) show(ref auditRef) tea.Cmd {
	s.ref = ref
	s.d, s.err, s.notFound = nil, nil, false
	s.offset = 0
	s.render()
	return s.fetch()
}

func (s *auditRecordScreen) fetch() tea.Cmd {
	s.seq++
	s.loading = true
	return s.f.auditRecord(s.seq, s.ref)
}

// refresh reads the record again: it does not change, but the chain's
// head does.
func (s *auditRecordScreen) refresh() tea.Cmd {
	if s.loading {
		return nil
	}
	return s.fetch()
}

func (s *auditRecordScreen) updateKeys() {
	s.enableScroll(&s.keys, s.h)
	s.keys.Operation.SetEnabled(s.d != nil && s.d.OperationID != 0)
	if s.d != nil {
		s.keys.Operation.SetHelp("o/enter", "open operation "+strconv.FormatInt(s.d.OperationID, 10))
	}
}

// ShortHelp implements help.KeyMap.
func (s *auditRecordScreen) ShortHelp() []key.Binding {
	return []key.Binding{s.keys.Operation, combined("↑/↓", "scroll", s.keys.Up, s.keys.Down)}
}

// FullHelp implements help.KeyMap.
func (s *auditRecordScreen) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{s.keys.Up, s.keys.Down, s.keys.NextPage, s.keys.PrevPage, s.keys.Top, s.keys.Bottom},
		{s.keys.Operation},
	}
}

func (s *auditRecordScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case auditRecordMsg:
		if msg.seq != s.seq {
			return s, nil
		}
		s.loading = false
		switch {
		case errNoRecord(msg.err):
			s.d, s.notFound, s.err = nil, true, nil
		case msg.err != nil:
			s.err = msg.err
		default:
			d := msg.d
			s.d, s.notFound, s.err = &d, false, nil
		}
		s.render()
	case tea.KeyMsg:
		if s.scrollKey(msg, s.keys, s.h) {
			break
		}
		switch {
		case key.Matches(msg, s.keys.Operation):
			s.goTo(detailNav{id: s.d.OperationID})
		}
	}
	return s, nil
}

func (s *auditRecordScreen) View() string { return s.scrollView(s.w, s.h, s.st) }

func (s *auditRecordScreen) render() {
	s.lines = s.buildLines()
	s.clampScroll(s.h)
	s.updateKeys()
}

// detailsLines caps the details shown; the rest is said to be there.
const detailsLines = 40

func (s *auditRecordScreen) buildLines() []string {
	w := s.w
	if w <= 0 {
		return nil
	}
	var out []string
	add := func(l ...string) { out = append(out, l...) }
	title := func(t string) string { return " " + s.st.Title.Render(t) }
	para := func(text string, style func(...string) string) {
		for _, l := range wrap(text, w-2) {
			add(" " + style(l))
		}
	}
	plain := func(s ...string) string { return strings.Join(s, " ") }

	if s.d == nil {
		add(title("Audit record "+s.ref.String()), "")
		switch {
		case s.notFound:
			para("There is no audit record "+s.ref.String()+" that your role may see.", plain)
		case s.err != nil:
			para("✗ could not read the audit record: "+termtext.Clean(s.err.Error()), s.st.Error.Render)
		default:
			add(" loading the record…")
		}
		return out
	}

	d := s.d
	now := d.DBTime
	ref := auditRef{d.Tenant, d.Seq}
	add(title("Audit record "+ref.String()) + "  " + s.st.outcome(d.Outcome).Render(OutcomeText(d.Outcome)) +
		"  " + truncate(termtext.Clean(d.Action), max(1, w-width(ref.String())-30)))
	add("")

	const labelW = 12
	field := func(label, value string) {
		vw := max(1, w-labelW-2)
		for i, l := range wrap(value, vw) {
			if i == 0 {
				add(" " + s.st.Muted.Render(pad(label, labelW)) + " " + l)
			} else {
				add(" " + strings.Repeat(" ", labelW) + " " + l)
			}
		}
	}
	who := "role " + termtext.Clean(d.Role) + " (authenticated by the database)"
	if d.Machine {
		who = "opsdesk reconciler, by a tool's auto_reconcile · " + who
	}
	if d.DisplayName != "" {
		who += " · claims to be " + strconv.Quote(termtext.Clean(d.DisplayName)) + " (claimed, not proven)"
	}
	field("who", who)
	field("what", termtext.Clean(d.Action)+" · "+OutcomeText(d.Outcome))
	op := "none"
	if d.OperationID != 0 || d.Tool != "" || d.Key != "" {
		var parts []string
		if d.OperationID != 0 {
			parts = append(parts, "#"+strconv.FormatInt(d.OperationID, 10))
		}
		parts = append(parts, "tenant "+chainName(d.Tenant))
		if d.Tool != "" {
			parts = append(parts, "tool "+termtext.Clean(d.Tool))
		}
		if d.Key != "" {
			parts = append(parts, "key "+termtext.Clean(d.Key))
		}
		op = strings.Join(parts, " · ")
	}
	field("operation", op)
	field("when", stamp(d.At, now)+" UTC ("+since(d.At, now)+"), database time")
	field("why", orDash(termtext.Clean(d.Reason)))
	changes := d.Changes()
	if len(changes) == 0 {
		field("change", "none to the operation")
	}
	for i, c := range changes {
		label := ""
		if i == 0 {
			label = "change"
		}
		field(label, pad(c.Field, 8)+" "+termtext.Clean(c.Before)+" → "+termtext.Clean(c.After))
	}
	switch {
	case d.EvidenceSummary == "" && d.EvidenceDigest == "":
		field("evidence", "none recorded")
	default:
		field("evidence", orDash(termtext.Clean(d.EvidenceSummary)))
		if d.EvidenceDigest != "" {
			field("  digest", termtext.Clean(d.EvidenceDigest))
		}
	}
	flags := flagTexts(d.AuditRow)
	if len(flags) == 0 {
		flags = []string{"none (not forced, no override)"}
	}
	field("flags", strings.Join(flags, " · "))
	field("event", orDash(termtext.Clean(d.EventID)))

	add("", title("Chain")+"  "+chainName(d.Tenant))
	c := d.Check
	if c.Problem == "" && c.HashMatches && c.Linked {
		link := "starts the chain"
		if d.Seq > 1 {
			link = "linked to #" + strconv.FormatInt(d.Seq-1, 10)
		}
		para("✓ hash matches, "+link+"; chain head #"+strconv.FormatInt(c.HeadSeq, 10), s.st.Completed.Render)
	} else {
		problem := c.Problem
		if problem == "" {
			problem = "the record does not check"
		}
		para("✗ "+termtext.Clean(problem)+"; chain head #"+strconv.FormatInt(c.HeadSeq, 10), s.st.Error.Render)
	}
	field("  hash", short(d.Hash)+" · prev "+short(d.PrevHash)+" · hash version "+strconv.Itoa(int(d.HashVersion)))
	para("This checks one record and its link to the one before; opsdesk audit verify checks the whole chain "+
		"(gaps, a cut tail, checkpoints).", s.st.Muted.Render)
	if len(d.Details) > 0 && string(d.Details) != "null" {
		add("", title("Details")+s.st.Muted.Render("  (as stored)"))
		var buf bytes.Buffer
		text := string(d.Details)
		if json.Indent(&buf, d.Details, "", "  ") == nil {
			text = buf.String()
		}
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			if i == detailsLines {
				add("   " + s.st.Muted.Render(fmt.Sprintf("… and %d more lines", len(lines)-i)))
				break
			}
			add("   " + truncate(termtext.Clean(l), w-4))
		}
	}

	return out
}

// short writes a hash's first bytes in hex, "-" for none.
func short(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	h := hex.EncodeToString(b)
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}
