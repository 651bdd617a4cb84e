package ui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/rivo/uniseg"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
)

// stateGlyph pairs every state with a glyph, so that state is never told by
// colour alone.
func stateGlyph(s readmodel.State) string {
	switch s {
	case readmodel.StatePending:
		return "◷"
	case readmodel.StateStuck:
		return "⚠"
	case readmodel.StateDeferred:
		return "⏲"
	case readmodel.StateCompleted:
		return "✓"
	case readmodel.StateRejected:
		return "✗"
	case readmodel.StateReleased:
		return "○"
	}
	return "?"
}

// glyphConflicted marks records with unreviewed conflicting attempts.
const glyphConflicted = "≠"

// stateText is the glyph and the word of a state.
func stateText(s readmodel.State) string {
	return stateGlyph(s) + " " + string(s)
}

// RowStateText is what the list shows for a row: a stuck record stays
// "stuck" (the most urgent fact), or "due" when a deferral of it ran out,
// and a deferred one "deferred"; otherwise a record with unreviewed
// conflicts reads "conflicted". The detail screen shows both.
func RowStateText(r readmodel.Row) string {
	switch {
	case r.Due():
		return stateGlyph(readmodel.StateStuck) + " due"
	case r.Conflicted && r.State != readmodel.StateStuck && r.State != readmodel.StateDeferred:
		return glyphConflicted + " conflicted"
	}
	return stateText(r.State)
}

// deferralText says a row's deferral in a few words: how long it has to
// run and who deferred it, or that it is due; "-" for none.
func deferralText(r readmodel.Row) string {
	switch {
	case r.DeferredUntil.IsZero():
		return "-"
	case r.DeferredUntil.After(r.DBTime):
		return "for " + ShortDuration(r.DeferredUntil.Sub(r.DBTime)) + " · " + termtext.Clean(r.DeferredBy)
	}
	return "due " + since(r.DeferredUntil, r.DBTime) + " · " + termtext.Clean(r.DeferredBy)
}

// deferralLine says a row's deferral in a sentence, "" for none.
func deferralLine(r readmodel.Row) string {
	switch {
	case r.DeferredUntil.IsZero():
		return ""
	case r.DeferredUntil.After(r.DBTime):
		return "deferred by role " + termtext.Clean(r.DeferredBy) + " until " + stamp(r.DeferredUntil, r.DBTime) + " UTC (" +
			since(r.DeferredUntil, r.DBTime) + "): out of the queue until then"
	}
	return "due: the reminder of role " + termtext.Clean(r.DeferredBy) + " passed " + since(r.DeferredUntil, r.DBTime) +
		" (at " + stamp(r.DeferredUntil, r.DBTime) + " UTC); back in the queue"
}

// ShortDuration writes a duration the way an operator reads it at a glance:
// 27s, 41m, 3h05m, 2d03h, 45d. The sign is dropped. A duration time.Sub
// could not hold (from an infinite time, or one over 292 years away) is ∞.
func ShortDuration(d time.Duration) string {
	if d == math.MaxInt64 || d == math.MinInt64 {
		return "∞"
	}
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 24*time.Hour:
		h := int(d / time.Hour)
		m := int((d % time.Hour) / time.Minute)
		if m == 0 {
			return strconv.Itoa(h) + "h"
		}
		return fmt.Sprintf("%dh%02dm", h, m)
	case d < 10*24*time.Hour:
		days := int(d / (24 * time.Hour))
		h := int((d % (24 * time.Hour)) / time.Hour)
		if h == 0 {
			return strconv.Itoa(days) + "d"
		}
		return fmt.Sprintf("%dd%02dh", days, h)
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
}

// Relative writes a signed duration from now: "in 27s" or "41m ago"; a
// time too far ahead for time.Sub (opsmodel.Infinity, 'infinity' in the store)
// is "never", and one too far behind "-infinity".
func Relative(d time.Duration) string {
	switch {
	case d == math.MaxInt64:
		return "never"
	case d == math.MinInt64:
		return "-infinity"
	case d > 0 && d >= time.Second:
		return "in " + ShortDuration(d)
	case d < 0 && d <= -time.Second:
		return ShortDuration(d) + " ago"
	}
	return "now"
}

// since writes how long ago t was, measured on the database clock now.
func since(t, now time.Time) string {
	if t.IsZero() || now.IsZero() {
		return "-"
	}
	return Relative(t.Sub(now))
}

// count writes an exact count with thousands separators.
func count(n int64) string {
	if n < 0 {
		return "-" + count(-n)
	}
	s := strconv.FormatInt(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	lead := len(s) % 3
	b.WriteString(s[:lead])
	for i := lead; i < len(s); i += 3 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// approx writes an estimated count: "~" and a compact number, so nobody
// mistakes an estimate for a count.
// figure writes a count, marked ~ when it is an estimate.
func figure(n int64, estimated bool) string {
	if estimated {
		return approx(n)
	}
	return count(n)
}

// OverviewFigure is one of the overview's counts: exact, estimated (~),
// or for a role scoped to some tenants a lower bound (1,000+).
func OverviewFigure(ov *readmodel.Overview, n int64, estimated bool) string {
	if estimated && ov.Scoped {
		return count(readmodel.CountCap) + "+"
	}
	return figure(n, estimated)
}

// ReviewFigure is one of the retention review's counts: exact, estimated
// (~) or a lower bound (1,000+).
func ReviewFigure(c readmodel.Count) string {
	if c.AtLeast {
		return count(c.N) + "+"
	}
	return figure(c.N, c.Estimated)
}

func approx(n int64) string {
	switch {
	case n >= 10_000_000:
		return fmt.Sprintf("~%dM", (n+500_000)/1_000_000)
	case n >= 1_000_000:
		return fmt.Sprintf("~%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("~%dk", (n+500)/1000)
	}
	return "~" + count(n)
}

// clock writes a database time as the status bar does.
func clock(t time.Time) string {
	if t.IsZero() {
		return "--:--:--"
	}
	return t.UTC().Format("15:04:05")
}

// stamp writes a database time: the clock alone on the same UTC day as
// ref, the date too otherwise.
func stamp(t, ref time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if s, ok := Infinite(t); ok {
		return s
	}
	t = t.UTC()
	if !ref.IsZero() && t.Format(time.DateOnly) == ref.UTC().Format(time.DateOnly) {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

// Infinite writes a time the store holds as infinite, or beyond the
// years a time is written in (opsmodel.Infinity, ops.NegativeInfinity), as
// PostgreSQL does: "infinity" or "-infinity". ok is false for any other
// time.
func Infinite(t time.Time) (text string, ok bool) {
	switch {
	case !t.Before(opsmodel.Infinity):
		return "infinity", true
	case !t.After(opsmodel.NegativeInfinity):
		return "-infinity", true
	}
	return "", false
}

// Cut keeps the first n bytes of text, ending on a character boundary,
// and says after them how many bytes it left out and, in more, how to see
// the whole value: "abc … 1,048,573 more bytes not shown. more". Text of
// at most n bytes comes back as it is. Screens and commands cut what
// services and people wrote with it before cleaning it (termtext.Clean), so that a
// value of any size costs n bytes to clean, lay out and print.
func Cut(text string, n int, more string) string {
	if len(text) <= n {
		return text
	}
	n = max(0, n)
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	marker := fmt.Sprintf("%s … %s more bytes not shown.", text[:n], groupDigits(int64(len(text)-n)))
	if more == "" {
		return marker
	}
	return marker + " " + more
}

// isASCII tells whether s is printable ASCII, for the fast width path.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// width is the display width of plain or styled text.
func width(s string) int {
	if isASCII(s) {
		return len(s)
	}
	return ansi.StringWidth(s)
}

// truncate cuts s to w cells with an ellipsis at the end.
func truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if isASCII(s) {
		if len(s) <= w {
			return s
		}
		return s[:w-1] + "…"
	}
	return ansi.Truncate(s, w, "…")
}

// truncateMiddle cuts s to w cells keeping its start and its end, which
// is where keys differ ("run-42:cr…-ticket").
func truncateMiddle(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := width(s)
	if sw <= w {
		return s
	}
	if w == 1 {
		return "…"
	}
	head := (w - 1 + 1) / 2
	tail := w - 1 - head
	if isASCII(s) {
		return s[:head] + "…" + s[len(s)-tail:]
	}
	// Take whole grapheme clusters from each end, so wide characters
	// never overflow and accents stay with their letters.
	var clusters []string
	var widths []int
	g := uniseg.NewGraphemes(s)
	for g.Next() {
		clusters = append(clusters, g.Str())
		widths = append(widths, g.Width())
	}
	var hb strings.Builder
	hw, i := 0, 0
	for ; i < len(clusters) && hw+widths[i] <= head; i++ {
		hb.WriteString(clusters[i])
		hw += widths[i]
	}
	tw, j := 0, len(clusters)
	for j > i && tw+widths[j-1] <= tail {
		j--
		tw += widths[j]
	}
	out := hb.String() + "…" + strings.Join(clusters[j:], "")
	// A wide character that did not fit leaves a cell: keep columns aligned.
	return out + strings.Repeat(" ", max(0, w-hw-1-tw))
}

// pad fills s with spaces up to w cells (left-aligned), truncating first.
func pad(s string, w int) string {
	s = truncate(s, w)
	if n := w - width(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}

// padLeft right-aligns s in w cells.
func padLeft(s string, w int) string {
	s = truncate(s, w)
	if n := w - width(s); n > 0 {
		return strings.Repeat(" ", n) + s
	}
	return s
}

// indented is text wrapped to w cells (wrap), each line styled (style
// nil: as it is) and then indented: a paragraph of a screen.
func indented(text string, w int, indent string, style func(...string) string) []string {
	lines := wrap(text, w)
	for i, l := range lines {
		if style != nil {
			l = style(l)
		}
		lines[i] = indent + l
	}
	return lines
}

// wrap breaks text into lines of at most w cells, at spaces where it can.
func wrap(s string, w int) []string {
	if w <= 0 {
		return nil
	}
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		words := strings.Fields(para)
		var cur string
		for _, word := range words {
			for width(word) > w {
				if cur != "" {
					lines = append(lines, cur)
					cur = ""
				}
				head := ansi.Truncate(word, w, "")
				lines = append(lines, head)
				word = ansi.TruncateLeft(word, width(head), "")
			}
			switch {
			case cur == "":
				cur = word
			case width(cur)+1+width(word) <= w:
				cur += " " + word
			default:
				lines = append(lines, cur)
				cur = word
			}
		}
		lines = append(lines, cur)
	}
	return lines
}

// spread puts left and right on one line of w cells, truncating the left
// part when both do not fit.
func spread(left, right string, w int) string {
	rw := width(right)
	if rw >= w {
		return truncate(right, w)
	}
	room := w - rw - 1
	left = truncate(left, room)
	return left + strings.Repeat(" ", w-rw-width(left)) + right
}
