package ui

import (
	"github.com/muesli/termenv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

func TestSparkline(t *testing.T) {
	t.Parallel()
	require.Equal(t, "▁▂▃▅█", sparkline([]int64{0, 1, 2, 4, 8}))
	require.Equal(t, "▁▁▁", sparkline([]int64{0, 0, 0}), "nothing stuck: the lowest bar")
	require.Equal(t, "▂▂█", sparkline([]int64{1, 1, 1000}), "one stuck is never drawn as none")
	require.Empty(t, sparkline(nil))
}

// TestPulseViews: the overview's pulse after an outage, read by six
// refreshes: more stuck tools than an 80x24 terminal shows, read among
// the 1,000 stuck longest, and the stuck count at each refresh.
func TestPulseViews(t *testing.T) {
	t.Parallel()
	goldens(t, "overview-pulse", func(t *testing.T, w, h int) string {
		hs := newHarness(t, newFakeSource(), w, h)
		ov := *hs.m.overview().ov
		ov.StuckByTool = nil
		// The store reads the 1,001 stuck longest when more are stuck.
		stuck := []int64{400, 200, 150, 100, 60, 50, 31, 10}
		for i, tool := range []string{"charge-card", "create-ticket", "send-email", "deploy-service", "refund-card",
			"create-note", "sync-crm", "page-oncall"} {
			ov.StuckByTool = append(ov.StuckByTool, readmodel.ToolStuck{Tool: tool, Stuck: stuck[i],
				Oldest: dbNow.Add(-time.Duration(40-4*i) * time.Minute)})
		}
		ov.StuckByToolCut = true
		for i, stuck := range []int64{0, 3, 7, 12, 9, 1001} {
			s := hs.m.overview()
			o := ov
			o.DBTime = dbNow.Add(time.Duration(i+1) * 2 * time.Second)
			o.Stuck, o.StuckEstimated = stuck, stuck > readmodel.CountCap
			hs.send(overviewMsg{seq: s.seq, ov: o})
		}
		return hs.view()
	})
}

// A short terminal keeps the counts and the notes, and gives the pulse
// what room is left, or none.
func TestPulseOnAShortTerminal(t *testing.T) {
	t.Parallel()
	for _, sz := range []struct{ w, h int }{{60, 20}, {80, 20}, {80, 22}} {
		hs := newHarness(t, newFakeSource(), sz.w, sz.h)
		v := hs.view()
		checkFrame(t, v, sz.w, sz.h)
		require.Contains(t, v, "Needs attention", "%dx%d", sz.w, sz.h)
		require.Contains(t, v, "counts as of db time", "%dx%d: the notes stay", sz.w, sz.h)
		if strings.Contains(v, "Recent decisions") {
			require.Contains(t, v, "Stuck by tool", "%dx%d", sz.w, sz.h)
		}
	}
}

// A machine's decision says so in the timeline, the audit list's role
// column and the pulse; a person's keeps the name it claimed.
func TestMachineDecisionsAreMarked(t *testing.T) {
	t.Parallel()
	d := &readmodel.Detail{}
	require.Contains(t, decisionText(d, readmodel.Decision{Action: "decide:completed", Role: "rec-1", Machine: true}),
		"by opsdesk reconciler, role rec-1 (auto_reconcile)")
	require.Contains(t, decisionText(d, readmodel.Decision{Action: "decide:completed", Role: "alice"}), "by role alice")
	row := readmodel.AuditRow{Role: "rec-1", Action: "decide:not-executed", Machine: true}
	require.Equal(t, "rec-1 (auto)", auditColumns[auditColRole].cell(row))
	require.Equal(t, "rec-1 (auto)", auditColumns[auditColRole].short(row))
	require.Equal(t, "rec-1 (auto)", decisionCells(row)[1])
	row = readmodel.AuditRow{Role: "alice", DisplayName: "Alice Ng", Action: "decide:completed"}
	require.Equal(t, "alice (Alice Ng)", decisionCells(row)[1])
}

// :about shows what the console was told of its store (the demo's
// catalog, provider, exporter and psql), and says so when it was told
// nothing.
func TestAboutViews(t *testing.T) {
	t.Parallel()
	notes := []string{"the demo is running:", "  database  postgres://postgres@/opsdesk?host=/tmp/opsdesk-pg-1",
		"  provider  http://127.0.0.1:39573  (outcome lookups: /lookup)", "  catalog   /tmp/opsdesk-pg-1/opsdesk.yaml",
		"  exporter  http://127.0.0.1:46873/metrics", "  reconciler as opsdesk_demo_reconciler, every 5s: decides charge-card's stuck records whose lookup is definite",
		"explore with:  psql 'postgres://postgres@/opsdesk?host=%2Ftmp%2Fopsdesk-pg-3642649874&port=5432&sslmode=disable'"}
	goldens(t, "about", func(t *testing.T, w, h int) string {
		src := newFakeSource()
		hs := startHarness(&harness{t: t, src: src}, src, Config{Context: "demo", NoColor: true, About: notes}, w, h, termenv.Ascii)
		hs.keys(":about<enter>")
		return hs.view()
	})
	goldens(t, "about-none", func(t *testing.T, w, h int) string {
		hs := newHarness(t, newFakeSource(), w, h)
		hs.keys(":about<enter>")
		return hs.view()
	})
}
