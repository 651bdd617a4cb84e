package ui

import (
	"context"
	"fmt"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/muesli/termenv"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// fakeVerifier answers :verify with a report, after telling its steps;
// with a gate it then waits for the gate, or for the screen to stop it.
type fakeVerifier struct {
	steps []auditreport.Progress
	rep   *auditreport.Report
	err   error
	gate  chan struct{}
}

func (v *fakeVerifier) Verify(ctx context.Context, progress func(auditreport.Progress)) (*auditreport.Report, error) {
	for _, p := range v.steps {
		progress(p)
	}
	if v.gate != nil {
		select {
		case <-v.gate:
		case <-ctx.Done():
			return nil, fmt.Errorf("verify audit: %w", ctx.Err())
		}
	}
	return v.rep, v.err
}

// verifyReport is the fake trail's chains, acme's broken at seq 4 when
// broken is set.
func verifyReport(broken bool) *auditreport.Report {
	rep := &auditreport.Report{At: dbNow, Role: "alice", SeesEveryTenant: true, OK: true, Chains: []auditreport.Chain{
		{Tenant: "", Records: 3, HeadSeq: 3}, {Tenant: "acme", Records: 7, HeadSeq: 7},
		{Tenant: "globex", Records: 4, HeadSeq: 4}, {Tenant: "initech", Records: 2, HeadSeq: 2},
	}}
	if broken {
		b := &auditreport.Break{Tenant: "acme", Seq: 4, Reason: "seq 4: hash does not match its contents"}
		rep.Chains[1].Break, rep.Break, rep.OK = b, b, false
	}
	return rep
}

func newVerifyHarness(t *testing.T, v Verifier, w, h int) *harness {
	t.Helper()
	src := newFakeSource()
	return startHarness(&harness{t: t, src: src}, src, Config{Context: "prod-eu", NoColor: true, Verifier: v}, w, h, termenv.Ascii)
}

// breakAuditRecord makes acme#4 (the deferral of 48213) a record changed
// after it was written: its hash no longer matches, in the trail and in
// the operation's decisions.
func breakAuditRecord(src *fakeSource) {
	src.mu.Lock()
	defer src.mu.Unlock()
	for i := range src.trail {
		if r := &src.trail[i]; r.Tenant == "acme" && r.Seq == 4 {
			r.HashBroken, r.Check.HashMatches = true, false
			r.Check.Problem = "its hash does not match its contents"
		}
	}
	src.decisions[48213] = append(src.decisions[48213], readmodel.Decision{AuditSeq: 4, At: dbNow.Add(-41 * time.Minute),
		Role: "alice", Action: readmodel.ActionDefer, Reason: "nothing to see", SnoozeUntil: dbNow.Add(-5 * time.Minute),
		HashBroken: true})
}

// TestVerifyViews: the verification under way, done, broken and stopped;
// a record changed after it was written flagged in the trail and in its
// operation's timeline.
func TestVerifyViews(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, w, h int) *harness
	}{
		{"verify-running", func(t *testing.T, w, hh int) *harness {
			v := &fakeVerifier{steps: []auditreport.Progress{{Records: 7200, Total: 16000, Chains: 2, Tenant: "acme"}}, gate: make(chan struct{})}
			t.Cleanup(func() { close(v.gate) })
			h := newVerifyHarness(t, v, w, hh).keys(":verify")
			_, cmd := h.m.Update(tea.KeyMsg{Type: tea.KeyEnter})
			h.m.Update(firstOf(cmd)) // the first progress; the rest is never waited for
			return h
		}},
		{"verify-ok", func(t *testing.T, w, hh int) *harness {
			return newVerifyHarness(t, &fakeVerifier{rep: verifyReport(false)}, w, hh).keys(":verify<enter>")
		}},
		{"verify-broken", func(t *testing.T, w, hh int) *harness {
			return newVerifyHarness(t, &fakeVerifier{rep: verifyReport(true)}, w, hh).keys(":verify<enter>")
		}},
		{"verify-stopped", func(t *testing.T, w, hh int) *harness {
			v := &fakeVerifier{steps: []auditreport.Progress{{Records: 3000, Total: 16000, Chains: 1, Tenant: ""}}, gate: make(chan struct{})}
			t.Cleanup(func() { close(v.gate) })
			h := newVerifyHarness(t, v, w, hh).keys(":verify")
			_, cmd := h.m.Update(tea.KeyMsg{Type: tea.KeyEnter})
			h.m.Update(firstOf(cmd))
			return h.keys("<esc>")
		}},
		{"audit-broken", func(t *testing.T, w, hh int) *harness {
			h := newVerifyHarness(t, nil, w, hh)
			breakAuditRecord(h.src)
			return h.keys(":audit tenant:acme<enter>jjj")
		}},
		{"detail-broken", func(t *testing.T, w, hh int) *harness {
			h := newVerifyHarness(t, nil, w, hh)
			breakAuditRecord(h.src)
			return h.keys(":ops id:48213<enter><enter>G")
		}},
	}
	for _, c := range cases {
		goldens(t, c.name, func(t *testing.T, w, h int) string { return c.setup(t, w, h).view() })
	}
}

// firstOf runs a command (a batch's commands in turn) until one gives a
// message.
func firstOf(cmd tea.Cmd) tea.Msg {
	if cmd == nil {
		return nil
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			if m := firstOf(c); m != nil {
				return m
			}
		}
		return nil
	default:
		return msg
	}
}

// TestVerifyOpensTheBreak: enter on a broken chain opens its first broken
// record, which says what is wrong; r verifies again; esc stops a
// verification under way and q never quits from it.
func TestVerifyOpensTheBreak(t *testing.T) {
	t.Parallel()
	v := &fakeVerifier{rep: verifyReport(true)}
	h := newVerifyHarness(t, v, 120, 40)
	breakAuditRecord(h.src)
	h.keys(":verify<enter>")
	require.Contains(t, h.view(), "✗ tenant acme seq 4: hash does not match its contents")
	h.keys("<enter>")
	require.Equal(t, screenAuditRecord, h.m.active().id())
	require.Contains(t, h.view(), "Audit record acme#4")
	require.Contains(t, h.view(), "✗ its hash does not match its contents")
	h.keys("<esc>")
	require.Equal(t, screenVerify, h.m.active().id())
	v.rep = verifyReport(false)
	h.keys("r")
	require.Contains(t, h.view(), "✓ every chain verifies: 4 chains, 16 records")
	h.keys("q")
	require.Equal(t, screenOverview, h.m.active().id())

	gated := &fakeVerifier{steps: []auditreport.Progress{{Total: 16000}}, gate: make(chan struct{})}
	defer close(gated.gate)
	h = newVerifyHarness(t, gated, 120, 40).keys(":verify")
	_, cmd := h.m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	h.m.Update(firstOf(cmd))
	h.keys("q")
	require.False(t, h.quit)
	require.Equal(t, screenVerify, h.m.active().id(), "q left a verification under way")
	h.keys("<esc>")
	require.Contains(t, h.view(), "stopped after 0 of 16,000 records: nothing was concluded")
}

// TestBrokenRecordsFlagged: the trail's list and the operation's
// timeline say which records were changed after they were written.
func TestBrokenRecordsFlagged(t *testing.T) {
	t.Parallel()
	h := newVerifyHarness(t, nil, 120, 40)
	breakAuditRecord(h.src)
	h.keys(":audit tenant:acme<enter>")
	v := h.view()
	require.Contains(t, v, "acme#4 ✗")
	require.Contains(t, v, "✗ 1 changed after written")
	require.NotContains(t, v, "acme#5 ✗")
	h.keys("<esc>:ops id:48213<enter><enter>")
	require.Contains(t, h.view(), "✗ 1 audit record changed after written (timeline)")
	h.keys("G")
	require.Contains(t, flat(h.view()), "audit acme#4 ✗ changed after it was written: its hash does not match its contents")
}
