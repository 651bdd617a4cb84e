package ui

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile"
)

// screenDetail is one record's detail.
const screenDetail screenID = "detail"

// detailNav opens a record's detail: by id, or by identity for :key.
type detailNav struct {
	id    int64
	ident *identity
}

func (detailNav) target() screenID { return screenDetail }

func (n detailNav) describe() string {
	if n.ident == nil {
		return "operation " + strconv.FormatInt(n.id, 10)
	}
	return "operation " + n.ident.Tenant + "/" + n.ident.Tool + "/" + n.ident.Key
}

// detailKind is a record's detail and :key, which looks one up.
var detailKind = screenKind{
	id:    screenDetail,
	build: func(d deps, _ Config) screen { return newDetail(d) },
	commands: []command{{names: []string{"key", "get"}, usage: ":key TENANT/TOOL/KEY", help: "look up one identity",
		try: "key TENANT/TOOL/KEY", suggest: "key ", parse: func(rest string) (tea.Msg, error) {
			id, err := parseIdentity(rest)
			if err != nil {
				return nil, err
			}
			return detailNav{ident: &id}, nil
		}}},
}

// detailScreen shows one record: every field, a timeline and its
// conflicting attempts. Its intent and result stay hidden.
type detailScreen struct {
	deps
	navigator
	w, h int

	// The record asked for: by id, or by identity for :key.
	recID int64
	ident *identity

	seq      int
	loading  bool
	d        *readmodel.Detail
	notFound bool
	purged   *readmodel.PurgedError // a looked-up identity whose record was purged
	absent   *readmodel.AbsentError // a looked-up identity with no record: which part to check
	err      error

	scrollText

	// writes tells whether the console offers writes to this role (set
	// by the root from the role's capabilities).
	writes bool
}

func newDetail(d deps) *detailScreen {
	s := &detailScreen{deps: d}
	s.updateKeys()
	return s
}

func (s *detailScreen) id() screenID          { return screenDetail }
func (s *detailScreen) Init() tea.Cmd         { return nil }
func (s *detailScreen) current(seq int) bool  { return seq == s.seq }
func (s *detailScreen) capturing() bool       { return false }
func (s *detailScreen) back() (bool, tea.Cmd) { return false, nil }

func (s *detailScreen) asOf() time.Time {
	if s.d == nil {
		return time.Time{}
	}
	return s.d.DBTime
}

func (s *detailScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	s.render()
}

// detailMark is the record the detail shows and how far it is scrolled.
type detailMark struct {
	id     int64
	ident  *identity
	offset int
}

func (m detailMark) markKey() string {
	if m.ident != nil {
		return fmt.Sprintf("%d %v", m.id, *m.ident)
	}
	return strconv.FormatInt(m.id, 10)
}

func (s *detailScreen) mark() any { return detailMark{id: s.recID, ident: s.ident, offset: s.offset} }

// restore shows a marked record again, read afresh, scrolled as it was.
func (s *detailScreen) restore(mark any) tea.Cmd {
	m, ok := mark.(detailMark)
	if !ok {
		return nil
	}
	cmd := s.show(m.id, m.ident)
	s.offset = m.offset
	return cmd
}

// open shows a record above the screen it was opened from, or goes back
// to the detail when it is on the stack already.
func (s *detailScreen) open(n navMsg, at opening) ([]screen, tea.Cmd, bool) {
	d, ok := n.(detailNav)
	if !ok {
		return nil, nil, false
	}
	return at.pushed(s), s.show(d.id, d.ident), true
}

// show shows another record.
func (s *detailScreen) show(id int64, ident *identity) tea.Cmd {
	s.recID, s.ident = id, ident
	s.d, s.err, s.notFound, s.purged = nil, nil, false, nil
	s.offset = 0
	s.render()
	return s.fetch()
}

func (s *detailScreen) fetch() tea.Cmd {
	s.seq++
	s.loading = true
	if s.recID == 0 && s.ident != nil {
		return s.f.identity(s.seq, *s.ident)
	}
	return s.f.get(s.seq, s.recID)
}

func (s *detailScreen) refresh() tea.Cmd {
	if s.loading {
		return nil
	}
	return s.fetch()
}

// allow offers (or withdraws) the writes: the root calls it once the
// role's capabilities are known.
func (s *detailScreen) allow(p permits) {
	s.writes = p.decide
	s.render()
}

func (s *detailScreen) updateKeys() {
	s.enableScroll(&s.keys, s.h)
	d := s.d
	s.keys.Reconcile.SetEnabled(s.writes && d != nil && d.Pending())
	s.keys.AckConflicts.SetEnabled(s.writes && d != nil && unreviewed(d.Conflicts) > 0)
	s.keys.Reveal.SetEnabled(s.writes && d != nil && d.HasResult)
	s.keys.RevealIntent.SetEnabled(s.writes && d != nil)
	s.keys.RevealConflict.SetEnabled(s.writes && d != nil && len(d.Conflicts) > 0)
	s.keys.History.SetEnabled(d != nil)
}

// ShortHelp implements help.KeyMap.
func (s *detailScreen) ShortHelp() []key.Binding {
	return []key.Binding{s.keys.Reconcile, s.keys.AckConflicts, s.keys.RevealConflict, s.keys.Reveal, s.keys.RevealIntent, s.keys.History, combined("↑/↓", "scroll", s.keys.Up, s.keys.Down)}
}

// FullHelp implements help.KeyMap.
func (s *detailScreen) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{s.keys.Up, s.keys.Down, s.keys.NextPage, s.keys.PrevPage, s.keys.Top, s.keys.Bottom},
		{s.keys.Reconcile, s.keys.AckConflicts, s.keys.RevealConflict, s.keys.Reveal, s.keys.RevealIntent, s.keys.History},
	}
}

func (s *detailScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case detailMsg:
		if msg.seq != s.seq {
			return s, nil // a stale answer
		}
		s.loading = false
		switch {
		case errors.Is(msg.err, readmodel.ErrNotFound):
			s.d, s.notFound, s.err = nil, true, nil
			s.purged, _ = errors.AsType[*readmodel.PurgedError](msg.err)
			s.absent, _ = errors.AsType[*readmodel.AbsentError](msg.err)
		case msg.err != nil:
			s.err = msg.err
		default:
			d := msg.d
			s.d, s.notFound, s.err = &d, false, nil
			s.recID = d.ID
		}
		s.render()
	case tea.KeyMsg:
		if s.scrollKey(msg, s.keys, s.h) {
			break
		}
		switch {
		case key.Matches(msg, s.keys.Reconcile):
			s.startFlow(screenReconcile, "")
		case key.Matches(msg, s.keys.AckConflicts):
			s.startFlow(screenAck, "")
		case key.Matches(msg, s.keys.Reveal):
			s.startFlow(screenReveal, reconcile.FieldResult)
		case key.Matches(msg, s.keys.RevealIntent):
			s.startFlow(screenReveal, reconcile.FieldIntent)
		case key.Matches(msg, s.keys.RevealConflict):
			s.startFlow(screenConflict, "")
		case key.Matches(msg, s.keys.History):
			// History is enabled only with a record shown.
			s.goTo(auditNav{filter: readmodel.OperationAuditFilter(s.d.Tenant, s.d.ID), history: true})
		}
	}
	return s, nil
}

// startFlow asks the root to open a flow on the record as shown: its
// version is the one the decision expects.
func (s *detailScreen) startFlow(to screenID, field reconcile.Field) {
	if s.d == nil {
		return
	}
	rec := *s.d
	s.goTo(flowNav{to: to, rec: &rec, field: field})
}

func (s *detailScreen) View() string { return s.scrollView(s.w, s.h, s.st) }

// render lays the record out in lines; the view scrolls through them.
func (s *detailScreen) render() {
	s.lines = s.buildLines()
	s.clampScroll(s.h)
	s.updateKeys()
}

func (s *detailScreen) buildLines() []string {
	w := s.w
	if w <= 0 {
		return nil
	}
	var out []string
	add := func(l ...string) { out = append(out, l...) }
	title := func(t string) string { return " " + s.st.Title.Render(t) }

	if s.d == nil {
		switch {
		case s.purged != nil && s.ident != nil:
			p := s.purged
			add(title("Look up "+truncate(s.ident.String(), w-10)), "")
			for _, l := range wrap("Record "+strconv.FormatInt(p.OperationID, 10)+" of this identity was purged "+
				since(p.PurgedAt, p.DBTime)+", at "+stamp(p.PurgedAt, p.DBTime)+".", w-2) {
				add(" " + s.st.Bold.Render(l))
			}
			add("")
			for _, l := range wrap("Its tombstone lasts until "+stamp(p.TombstoneUntil, p.DBTime)+". "+AfterPurge+".", w-2) {
				add(" " + s.st.Muted.Render(l))
			}
		case s.notFound && s.recID == 0 && s.ident != nil:
			add(title("Look up "+truncate(s.ident.String(), w-10)), "")
			for _, l := range wrap("No attempt was ever recorded for this identity.", w-2) {
				add(" " + s.st.Bold.Render(l))
			}
			add("")
			for _, l := range wrap("tenant "+termtext.Clean(s.ident.Tenant)+" · tool "+termtext.Clean(s.ident.Tool)+" · key "+termtext.Clean(s.ident.Key), w-2) {
				add(" " + l)
			}
			add("")
			check := "Check the tenant, the tool and the key for typos: the key must match exactly."
			if a := s.absent; a != nil {
				check = termtext.Clean(a.Check()) + "."
				check = strings.ToUpper(check[:1]) + check[1:]
			}
			for _, l := range wrap("A call with this identity would run as a first attempt. "+check, w-2) {
				add(" " + s.st.Muted.Render(l))
			}
		case s.notFound:
			add(title("Operation "+strconv.FormatInt(s.recID, 10)), "")
			for _, l := range wrap("There is no operation "+strconv.FormatInt(s.recID, 10)+" in the store any more.", w-2) {
				add(" " + l)
			}
		case s.err != nil:
			add(title("Operation"), "")
			for _, l := range wrap("✗ could not read the record: "+plainError(s.err), w-2) {
				add(" " + s.st.Error.Render(l))
			}
		default:
			add(" loading the record…")
		}
		return out
	}

	d := s.d
	now := d.DBTime
	head := "Operation " + strconv.FormatInt(d.ID, 10)
	add(title(head) + "  " + truncate(termtext.Clean(d.Tenant)+" / "+termtext.Clean(d.Tool)+" / "+termtext.Clean(d.Key), max(1, w-width(head)-4)))
	summary := s.st.state(d.State).Render(stateText(d.State))
	if n := brokenDecisions(d); n > 0 {
		summary += "  " + s.st.Error.Render(fmt.Sprintf("%s %d audit record%s changed after written (timeline)", glyphBroken, n, plural(n)))
	}
	switch n := unreviewed(d.Conflicts); {
	case n > 0:
		summary += "  " + s.st.Conflict.Render(fmt.Sprintf("%s %d unreviewed conflicting attempt%s", glyphConflicted, n, plural(n)))
	case len(d.Conflicts) > 0:
		summary += "  " + fmt.Sprintf("%s %d conflicting attempt%s, all reviewed", glyphConflicted, len(d.Conflicts), plural(len(d.Conflicts)))
	}
	add(" "+summary, "")

	const labelW = 14
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
	field("tenant", termtext.Clean(d.Tenant))
	field("tool", termtext.Clean(d.Tool)+" · version "+termtext.Clean(d.ToolVersion)+" · effect "+orDash(termtext.Clean(d.Effect)))
	field("key", termtext.Clean(d.Key))
	field("state", stateText(d.State)+stateNote(d.Row))
	field("owner", orDash(termtext.Clean(d.Owner))+" · attempt "+strconv.Itoa(d.Attempt)+" (its fencing token) · record version "+strconv.FormatInt(d.Version, 10))
	lease := "-"
	if !d.LeasedAt.IsZero() {
		lease = "taken " + stamp(d.LeasedAt, now) + " (" + since(d.LeasedAt, now) + ")"
		if !d.LeaseExpiresAt.IsZero() {
			verb := "expires "
			if readmodel.LeaseEnded(d.LeaseExpiresAt, now, 0) {
				verb = "expired "
			}
			lease += " · " + verb + stamp(d.LeaseExpiresAt, now) + " (" + since(d.LeaseExpiresAt, now) + ")"
		}
	}
	field("lease", lease)
	field("created", stamp(d.CreatedAt, now)+" ("+since(d.CreatedAt, now)+") · updated "+stamp(d.UpdatedAt, now)+" ("+since(d.UpdatedAt, now)+")")
	completed := "-"
	if !d.CompletedAt.IsZero() {
		completed = stamp(d.CompletedAt, now) + " (" + since(d.CompletedAt, now) + ")"
	}
	if d.Outcome != "" {
		completed += " · outcome " + termtext.Clean(d.Outcome)
	}
	if d.ResultRef != "" {
		completed += " · result ref " + termtext.Clean(d.ResultRef)
	}
	field("completed", completed)
	retention := "-"
	if !d.ExpiresAt.IsZero() {
		retention = "until " + stamp(d.ExpiresAt, now) + " (" + since(d.ExpiresAt, now) + ")"
	}
	if d.Held {
		retention += " · legal hold: never purged until released"
	}
	field("retention", retention)
	field("fingerprint", orDash(termtext.Clean(d.FingerprintTag))+" (keyed tag: equal tags, equal requests)")
	stored := "intent stored"
	if d.HasResult {
		stored = "intent and result stored"
	}
	switch {
	case s.writes && d.HasResult:
		field("intent/result", "hidden ("+stored+") · i reveals the intent, v the result, audited first")
	case s.writes:
		field("intent/result", "hidden ("+stored+") · i reveals it, audited first")
	default:
		field("intent/result", "hidden ("+stored+") · operators reveal them, audited")
	}

	add("", title("Timeline")+s.st.Muted.Render("  (database time, UTC)"))
	events := timeline(d)
	tw := 0
	for _, e := range events {
		tw = max(tw, width(stamp(e.at, now)))
	}
	for _, e := range events {
		for i, l := range wrap(e.what, max(1, w-tw-5)) {
			if i == 0 {
				add("   " + pad(stamp(e.at, now), tw) + "  " + l)
			} else {
				add("   " + strings.Repeat(" ", tw) + "  " + l)
			}
		}
	}

	if len(d.Conflicts) > 0 {
		hint := "  (side by side with the original)"
		if s.writes {
			hint = "  (beside the original · c compares requests, audited)"
		}
		add("", title("Conflicting attempts")+s.st.Muted.Render(truncate(hint, max(1, w-22))))
		add(s.conflictTable(d)...)
	}
	return out
}

// conflictTable puts the original attempt and its conflicting attempts
// side by side, as many as fit.
func (s *detailScreen) conflictTable(d *readmodel.Detail) []string {
	const labelW, colW = 14, 22
	now := d.DBTime
	fit := max(1, (s.w-3-labelW)/(colW+1))
	type attempt struct{ head, at, owner, version, fp, reviewed string }
	cols := []attempt{{
		head: "ORIGINAL", at: stamp(d.CreatedAt, now), owner: orDash(termtext.Clean(d.Owner)) + " (now)",
		version: termtext.Clean(d.ToolVersion), fp: termtext.Clean(d.FingerprintTag), reviewed: "-",
	}}
	for i, c := range d.Conflicts {
		rev := "no"
		if c.Reviewed {
			rev = "yes"
		}
		cols = append(cols, attempt{
			head: "ATTEMPT " + strconv.Itoa(i+1), at: stamp(c.AttemptedAt, now), owner: orDash(termtext.Clean(c.Owner)),
			version: termtext.Clean(c.ToolVersion), fp: termtext.Clean(c.FingerprintTag), reviewed: rev,
		})
	}
	hidden := 0
	if len(cols) > fit {
		hidden = len(cols) - fit
		cols = cols[:fit]
	}
	row := func(label string, get func(attempt) string) string {
		var b strings.Builder
		b.WriteString("   " + pad(label, labelW))
		for _, c := range cols {
			b.WriteString(" " + pad(get(c), colW))
		}
		return strings.TrimRight(b.String(), " ")
	}
	out := []string{
		s.st.Bold.Render(row("", func(a attempt) string { return a.head })),
		row("at", func(a attempt) string { return a.at }),
		row("owner", func(a attempt) string { return a.owner }),
		row("tool version", func(a attempt) string { return a.version }),
		row("fingerprint", func(a attempt) string { return a.fp }),
		row("reviewed", func(a attempt) string { return a.reviewed }),
	}
	if hidden > 0 {
		out = append(out, s.st.Muted.Render(fmt.Sprintf("   and %d more attempt%s: widen the terminal to see them", hidden, plural(hidden))))
	}
	return out
}

type event struct {
	at   time.Time
	what string
}

// timeline lists what happened to a record, in database-time order; only
// what has happened by the time of the read.
func timeline(d *readmodel.Detail) []event {
	now := d.DBTime
	ev := []event{{d.CreatedAt, "created"}}
	if !d.LeasedAt.IsZero() {
		what := "leased by " + orDash(termtext.Clean(d.Owner)) + " · attempt " + strconv.Itoa(d.Attempt)
		if !d.LeaseExpiresAt.IsZero() {
			what += " · lease until " + stamp(d.LeaseExpiresAt, now)
		}
		ev = append(ev, event{d.LeasedAt, what})
	}
	if d.Pending() && !d.LeaseExpiresAt.IsZero() && !d.LeaseLive() {
		ev = append(ev, event{d.LeaseExpiresAt, "lease expired without a completion"})
	}
	if !d.CompletedAt.IsZero() {
		what := "completed"
		if d.Outcome != "" {
			what += ": " + termtext.Clean(d.Outcome)
		}
		if d.State == readmodel.StateReleased {
			what = "released"
		}
		ev = append(ev, event{d.CompletedAt, what})
	}
	for i, c := range d.Conflicts {
		what := fmt.Sprintf("%s conflicting attempt %d by %s (tool version %s, %s)",
			glyphConflicted, i+1, orDash(termtext.Clean(c.Owner)), termtext.Clean(c.ToolVersion), termtext.Clean(c.FingerprintTag))
		if c.Reviewed {
			what += ", reviewed"
		}
		ev = append(ev, event{c.AttemptedAt, what})
	}
	for _, dec := range d.Decisions {
		ev = append(ev, event{dec.At, decisionText(d, dec)})
	}
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].at.Before(ev[j].at) })
	return ev
}

// decisionText tells a person's decision in the timeline: what, who (the
// authenticated role, and apart from it the name they claimed), the
// flags, the audit record and why.
func decisionText(d *readmodel.Detail, dec readmodel.Decision) string {
	var what string
	switch dec.Action {
	case "decide:completed":
		what = "✓ confirmed completed"
		if dec.ResultRef != "" {
			what += " (result ref " + termtext.Clean(dec.ResultRef) + ")"
		}
	case "decide:not-executed":
		what = "○ confirmed not executed: released"
	case "decide:failed":
		what = "✗ marked failed"
	case readmodel.ActionDefer:
		what = "deferred"
		if !dec.SnoozeUntil.IsZero() {
			what += " until " + stamp(dec.SnoozeUntil, d.DBTime)
		}
	case "conflicts:ack":
		what = glyphConflicted + " conflicting attempts acknowledged"
	default:
		what = termtext.Clean(dec.Action)
	}
	if dec.Machine {
		what += " by opsdesk reconciler, role " + termtext.Clean(dec.Role) + " (auto_reconcile)"
	} else {
		what += " by role " + termtext.Clean(dec.Role)
	}
	if dec.DisplayName != "" {
		what += " (claims to be " + strconv.Quote(termtext.Clean(dec.DisplayName)) + ")"
	}
	if dec.Forced {
		what += " · forced over a live lease"
	}
	if dec.Override {
		what += " · overriding the lookup"
	}
	what += " · audit " + termtext.Clean(d.Tenant) + "#" + strconv.FormatInt(dec.AuditSeq, 10)
	if dec.HashBroken {
		what += " " + glyphBroken + " " + brokenText
	}
	if dec.Reason != "" {
		what += " · reason: " + termtext.Clean(dec.Reason)
	}
	return what
}

// stateNote explains a state in the detail's words.
func stateNote(r readmodel.Row) string {
	deferral := ""
	if l := deferralLine(r); l != "" {
		deferral = " · " + l
	}
	switch r.State {
	case readmodel.StateStuck, readmodel.StateDeferred:
		return ": pending, its lease expired " + since(r.LeaseExpiresAt, r.DBTime) + " and nobody completed it" + deferral
	case readmodel.StatePending:
		return ": " + orDash(termtext.Clean(r.Owner)) + " holds a live lease" + deferral
	case readmodel.StateRejected:
		return ": completed with a business rejection"
	case readmodel.StateReleased:
		return ": released; the next attempt runs again"
	}
	return ""
}

// brokenDecisions counts the record's decisions whose audit record does
// not match its hash.
func brokenDecisions(d *readmodel.Detail) int {
	n := 0
	for _, dec := range d.Decisions {
		if dec.HashBroken {
			n++
		}
	}
	return n
}

func unreviewed(cs []readmodel.Conflict) int {
	n := 0
	for _, c := range cs {
		if !c.Reviewed {
			n++
		}
	}
	return n
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// AfterPurge says what a late retry of a purged identity gets; the
// console and ops get say it alike.
const AfterPurge = "Until the tombstone goes, a late retry gets what the tool's after_expiry says: " +
	"reexecute runs it as new work, reject answers ErrExpired; after that it runs as new work"
