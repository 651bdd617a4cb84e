package ui

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// AuditBatches pages the fake's runs newest first.
func (s *fakeSource) AuditBatches(_ context.Context, q readmodel.BatchQuery) (readmodel.BatchPage, error) {
	if err := s.enter("batches"); err != nil {
		return readmodel.BatchPage{}, fmt.Errorf("list bulk runs: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	start := 0
	if q.After != nil {
		start = slices.IndexFunc(s.batches, func(b readmodel.Batch) bool { return b.ID == q.After.ID }) + 1
	}
	page := readmodel.BatchPage{DBTime: dbNow, Batches: []readmodel.Batch{}}
	for i := start; i < len(s.batches); i++ {
		if len(page.Batches) == limit {
			next := page.Batches[limit-1].Cursor()
			page.Next = &next
			break
		}
		page.Batches = append(page.Batches, s.batches[i])
	}
	return page, nil
}

// addBatches gives the fake n past runs, newest first: the first over
// two tenants with a skipped record, the others smaller and older.
func addBatches(src *fakeSource, n int) {
	src.mu.Lock()
	defer src.mu.Unlock()
	for i := range n {
		last := dbNow.Add(-time.Duration(20+i*90) * time.Minute)
		first := last.Add(-42 * time.Second)
		filter := "state:stuck tool:charge-card age>1h"
		name := "Alice Night"
		b := readmodel.Batch{ID: fmt.Sprintf("%08x-3f2d-4c5e-9a8b-1c2d3e4f5a6b", 0x0b7e6c1a+i),
			StartedAt: first.Add(-50 * time.Second), StartedBy: "alice", StartedByName: &name, Filter: &filter, FirstAt: &first,
			LastAt: &last, Span: 42 * time.Second, Roles: []string{"alice"}, DisplayNames: []string{"Alice Night"},
			Tenants: []string{"acme"}, Tools: []string{"charge-card"}, Records: 6, Operations: 6,
			Groups: []readmodel.BatchGroup{{Lookup: "found", Decision: "completed", Decided: 4}}}
		if i == 0 {
			b.Tenants, b.Records, b.Operations = []string{"acme", "globex"}, 14, 13
			b.Groups = []readmodel.BatchGroup{{Lookup: "found", Decision: "completed", Decided: 8, Skipped: 1},
				{Lookup: "not_found", Decision: "not-executed", Decided: 3, Failed: 1}}
		}
		if i%3 == 2 {
			b.Roles, b.DisplayNames, b.StartedBy, b.StartedByName = []string{"bob"}, []string{}, "bob", nil
		}
		if i == 1 {
			// From before runs were recorded: no filter; one decision.
			b.Filter, b.FirstAt, b.Span = nil, &last, 0
		}
		if i == 2 {
			// Started, and nothing decided (or nothing the role sees).
			b.FirstAt, b.LastAt, b.Span, b.Roles, b.DisplayNames = nil, nil, 0, []string{}, []string{}
			b.Tenants, b.Tools, b.Records, b.Operations, b.Groups = []string{}, []string{}, 0, 0, []readmodel.BatchGroup{}
		}
		src.batches = append(src.batches, b)
	}
}

// TestBatchesViews: :batches with runs, without any, and after a page
// turn.
func TestBatchesViews(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(src *fakeSource)
		keys  string
	}{
		{"batches", func(src *fakeSource) { addBatches(src, 3) }, ":batches<enter>j"},
		{"batches-none", func(*fakeSource) {}, ":batches<enter>"},
		{"batches-next-page", func(src *fakeSource) { addBatches(src, 24) }, ":batches<enter>n"},
	}
	for _, c := range cases {
		goldens(t, c.name, func(t *testing.T, w, hh int) string {
			src := newFakeSource()
			c.setup(src)
			h := newHarness(t, src, w, hh)
			h.keys(c.keys)
			return h.view()
		})
	}
}

// TestBatchesOpen: enter opens the audit trail filtered to the selected
// run's records; :batches takes no arguments.
func TestBatchesOpen(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	addBatches(src, 3)
	h := newHarness(t, src, 120, 40)
	h.keys(":batches<enter>j<enter>")
	require.Equal(t, screenAudit, h.m.active().id())
	require.Contains(t, h.view(), "filter: batch:"+src.batches[1].ID)
	h.keys("<esc>")
	require.Equal(t, screenBatches, h.m.active().id(), "esc goes back to the runs")

	h = newHarness(t, src, 120, 40)
	h.keys(":batches acme<enter>")
	require.Contains(t, flat(h.view()), ":batches takes no arguments")
}
