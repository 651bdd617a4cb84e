package ui

import (
	"strconv"
	"strings"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// The overview's pulse: where the stuck records are, the stuck count at
// each read since the console opened, and the past day's last decisions.
// Every figure is the store's, read in the overview's snapshot at the
// database time it shows; the sparkline's samples are the counts earlier
// reads gave, each at its own database time.

// pulseLines are the pulse's sections inside the overview's box, in at
// most room lines: none when fewer than five fit (a short terminal keeps
// the counts and the notes).
func (s *overviewScreen) pulseLines(cw, room int) []string {
	ov := s.ov
	if room < 5 {
		return nil
	}
	rest := room - 3 // two rules and the sparkline
	wantTools, wantDecisions := max(1, len(ov.StuckByTool)), max(1, len(ov.RecentDecisions))
	toolRows, decisionRows := wantTools, wantDecisions
	if toolRows+decisionRows > rest {
		decisionRows = min(wantDecisions, max(1, rest/2))
		toolRows = max(1, min(wantTools, rest-decisionRows))
		decisionRows = max(1, min(wantDecisions, rest-toolRows))
	}

	title := "Stuck by tool"
	if ov.StuckByToolCut {
		var read int64
		for _, t := range ov.StuckByTool {
			read += t.Stuck
		}
		title += ", among the " + count(read) + " stuck longest"
	}
	lines := []string{s.boxRule("├", title, "┤")}
	tools := ov.StuckByTool
	switch {
	case len(tools) == 0:
		lines = append(lines, s.boxLine(s.st.Muted.Render("nothing stuck"), cw))
	default:
		shown := tools
		if len(tools) > toolRows {
			shown = tools[:toolRows-1]
		}
		nw := 5
		for _, t := range shown {
			nw = max(nw, width(count(t.Stuck)))
		}
		for _, t := range shown {
			line := "  " + pad(truncate(termtext.Clean(t.Tool), 24), 24) + " " + padLeft(count(t.Stuck), nw) +
				"   oldest lease expired " + since(t.Oldest, ov.DBTime)
			lines = append(lines, s.boxLine(truncate(line, cw), cw))
		}
		if len(shown) < len(tools) {
			more := len(tools) - len(shown)
			lines = append(lines, s.boxLine(s.st.Muted.Render(truncate("  … and "+count(int64(more))+" more tool"+plural(more)+
				": :stuck lists every stuck record", cw)), cw))
		}
	}
	lines = append(lines, s.boxLine(truncate(s.sparkLine(cw), cw), cw))

	lines = append(lines, s.boxRule("├", "Recent decisions, past day", "┤"))
	if len(ov.RecentDecisions) == 0 {
		lines = append(lines, s.boxLine(s.st.Muted.Render("nothing decided in the past day"), cw))
	}
	shown := ov.RecentDecisions[:min(len(ov.RecentDecisions), decisionRows)]
	var cols [3]int // when, who, what: as wide as their widest
	for _, d := range shown {
		for i, c := range decisionCells(d) {
			cols[i] = max(cols[i], width(c))
		}
	}
	for _, d := range shown {
		c := decisionCells(d)
		line := "  " + padLeft(c[0], cols[0]) + "  " + pad(c[1], cols[1]) + "  " + pad(c[2], cols[2]) +
			"  #" + strconv.FormatInt(d.OperationID, 10) + "  " + termtext.Clean(d.Tool) + " · " + termtext.Clean(d.Tenant)
		lines = append(lines, s.boxLine(truncate(line, cw), cw))
	}
	return lines
}

// sparkLine is the stuck count at each read since the console opened.
func (s *overviewScreen) sparkLine(cw int) string {
	label := "stuck at each refresh"
	if len(s.pulse) > 0 {
		label += " since " + clock(s.pulse[0].at) + " UTC"
	}
	now := "now " + OverviewFigure(s.ov, s.ov.Stuck, s.ov.StuckEstimated)
	room := max(1, cw-width(label)-width(now)-4)
	samples := s.pulse[max(0, len(s.pulse)-room):]
	vals := make([]int64, len(samples))
	for i, p := range samples {
		vals[i] = p.stuck
	}
	return label + "  " + s.st.Stuck.Render(sparkline(vals)) + "  " + now
}

// sparkBars are a sparkline's eight heights.
var sparkBars = []rune("▁▂▃▄▅▆▇█")

// sparkline draws vals, each a bar scaled to the largest: nothing is the
// lowest bar, and any count above nothing at least the second.
func sparkline(vals []int64) string {
	var hi int64
	for _, v := range vals {
		hi = max(hi, v)
	}
	var b strings.Builder
	for _, v := range vals {
		i := 0
		if v > 0 && hi > 0 {
			i = max(1, int((v*int64(len(sparkBars)-1)+hi/2)/hi))
		}
		b.WriteRune(sparkBars[i])
	}
	return b.String()
}

// decisionCells are a recent decision's when, who and what.
func decisionCells(d readmodel.AuditRow) [3]string {
	return [3]string{since(d.At, d.DBTime), whoText(d, 24, true), decisionWord(d.Action)}
}

// whoText is who made an audit record, in a column: the role (cut to
// roleW), then "(auto)" for a machine's, never cut, or with name the name
// the person claimed.
func whoText(r readmodel.AuditRow, roleW int, name bool) string {
	who := truncate(termtext.Clean(r.Role), roleW)
	switch {
	case r.Machine:
		return who + " (auto)"
	case name && r.DisplayName != "":
		return truncate(who+" ("+termtext.Clean(r.DisplayName), roleW+7) + ")"
	}
	return who
}

// decisionWord names a decision's action with its glyph, as the
// timeline does.
func decisionWord(action string) string {
	switch action {
	case "decide:completed":
		return "✓ completed"
	case "decide:not-executed":
		return "○ not executed"
	case "decide:failed":
		return "✗ failed"
	case readmodel.ActionDefer:
		return "⏲ deferred"
	}
	return termtext.Clean(strings.TrimPrefix(action, "decide:"))
}
