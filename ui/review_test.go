package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/purgereport"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// Review is the fake source's retention review: hand-written figures that
// exercise every part of the screen (estimates, kept records, a stuck
// record, each kind of warning). The real figures are tested against
// PostgreSQL in internal/storeview.
func (s *fakeSource) Review(_ context.Context, catalog map[string]readmodel.ToolPolicy) (readmodel.Review, error) {
	if err := s.enter("review"); err != nil {
		return readmodel.Review{}, fmt.Errorf("list the store's tools: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	day := 24 * time.Hour
	r := readmodel.Review{DBTime: dbNow, Scoped: s.scoped, Tools: []readmodel.ToolReview{
		{Tool: "charge-card", InCatalog: true, InStore: true, Retention: day, RetryWindow: 3 * day, AfterExpiry: "reject",
			Expiring24h: readmodel.Count{N: 12}, Expiring7d: readmodel.Count{N: 12}, Expired: readmodel.Count{N: 3},
			Purgeable: readmodel.Count{N: 3},
			Warnings:  []string{"retention 1d is shorter than the retry window 3d: a retry in between gets ErrExpired instead of its result"}},
		{Tool: "create-ticket", InCatalog: true, InStore: true, Retention: 7 * day, RetryWindow: 3 * day, AfterExpiry: "reexecute",
			Expiring24h: readmodel.Count{N: 4210, Estimated: true}, Expiring7d: readmodel.Count{N: 30120, Estimated: true},
			Expired: readmodel.Count{N: 52312, Estimated: true}, Purgeable: readmodel.Count{N: 52301, Estimated: true},
			Held: 9, Conflicted: 2,
			OldestPending:      &readmodel.PendingRef{ID: 48213, LeasedAt: dbNow.Add(-8*day - time.Minute), LeaseExpiresAt: dbNow.Add(-8 * day), Stuck: true},
			StuckPastRetention: readmodel.Count{N: 1},
			Warnings:           []string{"1 record stuck for longer than the retention 7d: their callers have likely given up; reconcile them"}},
		{Tool: "legacy-sync", InStore: true, Retention: 7 * day, RetryWindow: 7 * day, AfterExpiry: "reexecute",
			Expiring7d: readmodel.Count{N: 1},
			Warnings:   []string{"not in the catalog: its retry window and after_expiry are unknown here; figures assume the library's default retention (7d)"}},
		{Tool: "send-email", InCatalog: true, InStore: true, Retention: 30 * day, RetryWindow: 7 * day, AfterExpiry: "reexecute",
			Expiring24h: readmodel.Count{N: 88}, Expiring7d: readmodel.Count{N: 612},
			OldestPending: &readmodel.PendingRef{ID: 48901, LeasedAt: dbNow.Add(-3 * time.Second), LeaseExpiresAt: dbNow.Add(27 * time.Second)}},
	}}
	r.UnfinishedPurges = s.unfinished
	if s.scoped {
		r.Tools[1].Expired = readmodel.Count{N: readmodel.CountCap, AtLeast: true}
		r.Tools[1].Purgeable = readmodel.Count{N: readmodel.CountCap - 2, AtLeast: true}
	}
	return r, nil
}

// fakeUnfinished is n unfinished purge runs, the first of create-ticket
// by an admin who claims a name, the others of every tool.
func fakeUnfinished(n int) []readmodel.UnfinishedPurge {
	seq := int64(408)
	runs := []readmodel.UnfinishedPurge{{Run: 7, Role: "alice", DisplayName: "Alice \x1b[31mA.", StartedAt: dbNow.Add(-3 * time.Hour),
		Reason: "end of quarter", Tool: "create-ticket", Before: dbNow.Add(-3 * time.Hour), Purged: 12_000, StartSeq: &seq}}
	for i := 1; i < n; i++ {
		runs = append(runs, readmodel.UnfinishedPurge{Run: int64(7 + i), Role: "bob", StartedAt: dbNow.Add(-time.Duration(i) * 24 * time.Hour),
			Reason: "weekly", Before: dbNow.Add(-time.Duration(i) * 24 * time.Hour), Purged: int64(i)})
	}
	return runs
}

// fakePurger purges nothing real: it counts, reports progress in batches
// and records what it was asked.
type fakePurger struct {
	mu       sync.Mutex
	count    int64
	countErr error
	err      error
	tools    []string
	reasons  []string
	befores  []time.Time
	// block, when set, holds the purge after its first batch until the
	// context is cancelled.
	block bool
}

func (p *fakePurger) Count(_ context.Context, tool string) (purgereport.DryRun, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return purgereport.DryRun{Count: p.count, Before: dbNow}, p.countErr
}

func (p *fakePurger) Purge(ctx context.Context, tool string, dry purgereport.DryRun, reason string, progress func(purgereport.Progress)) (purgereport.Result, error) {
	before := dry.Before
	p.mu.Lock()
	p.tools, p.reasons, p.befores = append(p.tools, tool), append(p.reasons, reason), append(p.befores, before)
	n, block, err := p.count, p.block, p.err
	p.mu.Unlock()
	if err != nil {
		return purgereport.Result{}, err
	}
	var done int64
	for b := 1; done < n; b++ {
		done = min(n, done+1000)
		progress(purgereport.Progress{Run: 7, Purged: done, Batches: b})
		if block {
			<-ctx.Done()
			return purgereport.Result{}, fmt.Errorf("purge run 7, after %d records: %w (run the purge again to resume)", done, ctx.Err())
		}
	}
	return purgereport.Result{Run: 7, Purged: n, AuditTenant: "", AuditSeq: 412}, nil
}

func (p *fakePurger) asked() ([]string, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tools, p.reasons
}

// newPurgeHarness is a console whose role may purge (admin), or not.
func newPurgeHarness(t *testing.T, purger *fakePurger, admin bool, w, h int) *harness {
	t.Helper()
	src := newFakeSource()
	dec := newFakeDecider(src)
	dec.caps = reconcile.Capabilities{Role: "alice", Decide: true, Grant: admin, Purge: admin}
	return newDecideHarness(t, src, dec, Config{Purger: purger}, w, h)
}

func TestReviewViews(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(h *harness)
	}{
		{"review", func(h *harness) { h.keys(":retention<enter>") }},
		{"review-selected", func(h *harness) { h.keys(":retention<enter>j") }},
		{"review-not-in-catalog", func(h *harness) { h.keys(":retention<enter>jj") }},
		{"purge-reason", func(h *harness) { h.keys(":retention<enter>jp") }},
		{"purge-confirm", func(h *harness) { h.keys(":retention<enter>jpend of quarter<enter>") }},
		{"purge-done", func(h *harness) { h.keys(":retention<enter>jpend of quarter<enter>y") }},
		{"purge-declined", func(h *harness) { h.keys(":retention<enter>jpend of quarter<enter>n") }},
		{"review-unfinished-purge", func(h *harness) {
			h.src.mu.Lock()
			h.src.unfinished = fakeUnfinished(1)
			h.src.mu.Unlock()
			h.keys(":retention<enter>")
		}},
		{"review-unfinished-purges", func(h *harness) {
			h.src.mu.Lock()
			h.src.unfinished = fakeUnfinished(4)
			h.src.mu.Unlock()
			h.keys(":retention<enter>")
		}},
	}
	for _, c := range cases {
		goldens(t, c.name, func(t *testing.T, w, h int) string {
			hs := newPurgeHarness(t, &fakePurger{count: 2500}, true, w, h)
			c.setup(hs)
			return hs.view()
		})
	}
}

// Purging goes through the dry run's count, a required reason and a
// confirmation that defaults to No; only then does the purger run, on the
// selected tool, with the reason.
func TestPurgeFlow(t *testing.T) {
	t.Parallel()
	p := &fakePurger{count: 2500}
	h := newPurgeHarness(t, p, true, 120, 40)
	h.keys(":retention<enter>jp")
	require.Contains(t, h.view(), "2,500 records would be purged")
	h.keys("<enter>")
	require.Contains(t, h.view(), "a reason is required")
	h.keys("end of quarter<enter><enter>") // enter at the confirmation is No
	tools, _ := p.asked()
	require.Empty(t, tools, "enter is No")
	// No says so, and keeps the reason typed.
	require.Contains(t, h.view(), "Not purged: you answered no, and nothing was deleted")
	require.Contains(t, h.view(), "> end of quarter")
	require.Contains(t, h.view(), "[reason]")
	h.keys("<enter>n")
	tools, _ = p.asked()
	require.Empty(t, tools)
	require.Contains(t, h.view(), "Not purged")
	h.keys("<esc>")
	require.Contains(t, h.view(), "Retention review")

	h.keys("pend of quarter<enter>")
	require.NotContains(t, h.view(), "Not purged", "a new purge starts without the last one's answer")
	require.Contains(t, h.view(), "[confirm]")
	h.keys("y")
	tools, reasons := p.asked()
	require.Equal(t, []string{"create-ticket"}, tools)
	require.Equal(t, []string{"end of quarter"}, reasons)
	require.Equal(t, []time.Time{dbNow}, p.befores, "what the dry run counted")
	require.Contains(t, h.view(), "✓ purged 2,500 records")
	require.Contains(t, h.view(), "audit record global#412")
	h.keys("<esc>")
	require.Contains(t, h.view(), "Retention review")
}

// A running purge stops at esc after its batch and says how to resume.
func TestPurgeStops(t *testing.T) {
	t.Parallel()
	p := &fakePurger{count: 2500, block: true}
	h := newPurgeHarness(t, p, true, 120, 40)
	h.keys(":retention<enter>jpweekly<enter>")
	// y starts the purge; its first progress arrives, then it waits to be
	// stopped. The harness runs commands in line, so the waits are run by
	// hand here.
	_, waitCmd := h.m.Update(runeKey("y"))
	_, waitCmd = h.m.Update(waitCmd())
	require.Contains(t, h.view(), "purged 1,000 of 2,500")
	h.keys("<esc>")
	require.Contains(t, h.view(), "stopping after the batch under way")
	h.send(waitCmd())
	view := h.view()
	require.Contains(t, view, "✗ the purge stopped")
	require.Contains(t, view, "Purge the tool again to resume the run")
}

// Nobody but a role the database lets purge is offered the key, and a
// tool with nothing to purge offers none either.
func TestPurgeKeyOnlyForAdmins(t *testing.T) {
	t.Parallel()
	p := &fakePurger{count: 2500}
	h := newPurgeHarness(t, p, false, 120, 40)
	h.keys(":retention<enter>jp")
	require.NotContains(t, h.view(), "p purge expired")
	require.Contains(t, h.view(), "Retention review")
	tools, _ := p.asked()
	require.Empty(t, tools)

	h = newPurgeHarness(t, p, true, 120, 40)
	h.keys(":retention<enter>")
	require.Contains(t, h.view(), "p purge expired")
	h.keys("jjj") // send-email: nothing expired
	require.NotContains(t, h.view(), "p purge expired")
}

// A purge that fails says so and how to resume it.
func TestPurgeFails(t *testing.T) {
	t.Parallel()
	p := &fakePurger{count: 2500, err: errors.New("boom")}
	h := newPurgeHarness(t, p, true, 120, 40)
	h.keys(":retention<enter>jpweekly<enter>y")
	require.Contains(t, h.view(), "✗ the purge stopped")
	require.Contains(t, h.view(), "boom")
	require.Contains(t, h.view(), "Purge the tool again to resume the run")
}

// A failed dry run asks nothing and purges nothing.
func TestPurgeCountFails(t *testing.T) {
	t.Parallel()
	p := &fakePurger{count: 2500, countErr: errors.New("connection refused")}
	h := newPurgeHarness(t, p, true, 120, 40)
	h.keys(":retention<enter>jp")
	view := h.view()
	require.Contains(t, view, "✗ could not count what a purge would take: cannot reach the database")
	require.Contains(t, view, "Nothing was purged.")
	require.NotContains(t, view, "Reason (required")
	h.keys("y")
	tools, _ := p.asked()
	require.Empty(t, tools)
}

// On a short terminal the review says which tools it shows, and moving
// down brings the others in (issue 22: at 60x20 it showed 1 of 5 without
// a word).
func TestReviewSaysWhichToolsItShows(t *testing.T) {
	t.Parallel()
	h := newPurgeHarness(t, &fakePurger{count: 2500}, true, 60, 20)
	h.keys(":retention<enter>")
	view := h.view()
	require.Regexp(t, `· (showing )?1–\d`, view)
	require.NotContains(t, newPurgeHarness(t, &fakePurger{count: 2500}, true, 200, 60).keys(":retention<enter>").view(), "↑/↓ for the others",
		"every tool fits")
	h.keys("jjj")
	require.NotRegexp(t, `· (showing )?1–\d`, h.view(), "the window moved with the selection")
}

// TestReviewScrollMark60: at 60x20 not every tool fits, and the title's
// mark says which are shown and how to see the others, whole (the long
// mark was cut to "showing 1–4, ↑/…").
func TestReviewScrollMark60(t *testing.T) {
	t.Parallel()
	h := newPurgeHarness(t, &fakePurger{count: 2500}, true, 60, 20)
	h.keys(":retention<enter>")
	title := strings.Split(h.view(), "\n")[1]
	require.Regexp(t, `· 1–\d of \d ↑/↓\s*$`, title, "%s", h.view())
	require.LessOrEqual(t, width(title), 60)
	h = newPurgeHarness(t, &fakePurger{count: 2500}, true, 100, 20)
	h.keys(":retention<enter>")
	require.Contains(t, h.view(), "↑/↓ for the others", "%s", h.view())
}
