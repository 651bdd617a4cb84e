package ui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// TestKeyFitKeepsWhatDiffers: keys that share a start and an end are cut
// in the shared parts, never in the digits that tell them apart.
func TestKeyFitKeepsWhatDiffers(t *testing.T) {
	t.Parallel()
	keys := []string{"order-00035:charge", "order-00036:charge", "order-00141:charge"}
	f := newKeyFit(keys)
	for _, c := range []struct {
		w    int
		want []string
	}{
		{24, keys},
		{18, keys},
		{16, []string{"…er-00035:charge", "…er-00036:charge", "…er-00141:charge"}},
		{12, []string{"…0035:charge", "…0036:charge", "…0141:charge"}},
		{8, []string{"…035:ch…", "…036:ch…", "…141:ch…"}},
	} {
		for i, k := range keys {
			got := f.fit(k, c.w)
			require.LessOrEqual(t, width(got), c.w, "fit(%q, %d) = %q", k, c.w, got)
			if c.w < 18 {
				require.Equal(t, c.want[i], got, "fit(%q, %d)", k, c.w)
			}
		}
	}
}

// TestKeyFitDistinct: at any width that holds the differing part, two
// different keys never read alike, hostile keys included, and a cut key
// is never wider than its room.
func TestKeyFitDistinct(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 250)
	sets := map[string][]string{
		"orders": {"order-00035:charge", "order-00036:charge"},
		"wide":   {"注文-こんにちは-0035-世界", "注文-こんにちは-0036-世界"},
		"marks":  {"e\u0301tude-ticket-35", "e\u0301tude-ticket-36"},
		"ctrl":   {"run\x1b[31m-35\x07:charge", "run\x1b[31m-36\x07:charge"},
		"255":    {long + "-0035", long + "-0036"},
		"nest":   {"ab", "abab", "abcab"},
	}
	for name, raw := range sets {
		keys := make([]string, len(raw))
		for i, k := range raw {
			keys[i] = termtext.Clean(k)
		}
		f := newKeyFit(keys)
		for w := 6; w <= 30; w++ {
			seen := map[string]string{}
			for _, k := range keys {
				got := f.fit(k, w)
				require.LessOrEqual(t, width(got), w, "%s: fit(%q, %d) = %q", name, k, w, got)
				require.NotContains(t, got, "\x1b", name)
				if other, ok := seen[got]; ok {
					t.Fatalf("%s at %d: %q and %q both read %q", name, w, other, k, got)
				}
				seen[got] = k
			}
		}
	}
}

// TestBulkItemKeys: the plan's lines at 60, 80 and 120 columns keep the
// digits of keys that share their start and end.
func TestBulkItemKeys(t *testing.T) {
	t.Parallel()
	var items []bulk.Item
	for i := 35; i < 40; i++ {
		items = append(items, bulk.Item{ID: int64(49000 + i), Tenant: "acme", Key: fmt.Sprintf("order-%05d:charge", i)})
	}
	s := &bulkFlow{plan: &bulk.Plan{Groups: []bulk.Group{{Verdict: bulk.Found, Items: items}}}}
	for _, w := range []int{60, 80, 120} {
		s.sm.w = w
		seen := map[string]bool{}
		for _, it := range items {
			line := s.itemLine(it, "ref ch_1")
			require.LessOrEqual(t, width(line), w)
			digits := fmt.Sprintf("%05d", it.ID-49000)[3:] + ":charge"
			require.Contains(t, line, digits, "at %d: %q", w, line)
			cut := strings.Fields(line)[2]
			require.False(t, seen[cut], "at %d two keys read %q", w, cut)
			seen[cut] = true
		}
	}
}
