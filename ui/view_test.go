package ui

import (
	"fmt"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

var sizes = []struct{ w, h int }{{80, 24}, {120, 40}}

// TestViews compares every screen with its golden file at 80x24 and
// 120x40 (ASCII profile), each reached through Update with keys and
// store answers, as an operator would.
func TestViews(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(h *harness)
	}{
		{"overview", func(h *harness) {}},
		{"overview-selected-state", func(h *harness) { h.keys("jjjj") }},
		{"overview-scoped", func(h *harness) {
			h.src.setScoped()
			h.send(h.lastTick())
		}},
		{"list", func(h *harness) { h.keys(":ops<enter>") }},
		{"list-stuck", func(h *harness) { h.keys("<enter>") }}, // the stuck tile
		{"list-filter-error", func(h *harness) { h.keys(":ops tool:create-ticket<enter>/state:bogus<enter>") }},
		{"list-no-match", func(h *harness) { h.keys("/tenant:nobody<enter>") }},
		{"detail", func(h *harness) { h.keys(":key globex/send-email/welcome/user-8812<enter>") }},
		{"detail-stuck", func(h *harness) { h.keys("<enter><enter>") }},
		{"key-not-found", func(h *harness) { h.keys(":key acme/create-ticket/run-43<enter>") }},
		{"key-unknown-tool", func(h *harness) { h.keys(":key acme/create-tickett/run-43<enter>") }},
		{"key-unknown-tenant", func(h *harness) { h.keys(":key acmee/create-ticket/run-43<enter>") }},
		{"key-purged", func(h *harness) { h.keys(":key acme/create-ticket/run-7<enter>") }},
		{"help", func(h *harness) { h.keys(":ops<enter>?") }},
		{"command-error", func(h *harness) { h.keys(":frobnicate<enter>") }},
		{"unreachable", func(h *harness) {
			h.keys(":ops<enter>")
			h.src.setDown(true)
			h.send(h.lastTick())
		}},
		{"connect-failed", nil},
		// The queue: a deferred record out of it, one due again.
		{"overview-deferred", func(h *harness) {
			deferTwo(h.src)
			h.send(h.lastTick())
		}},
		{"list-stuck-due", func(h *harness) {
			deferTwo(h.src)
			h.keys(":stuck<enter>")
		}},
		{"list-deferred", func(h *harness) {
			deferTwo(h.src)
			h.keys(":ops state:deferred,stuck<enter>")
		}},
		{"detail-deferred", func(h *harness) {
			deferTwo(h.src)
			h.keys(":ops id:48207<enter><enter>")
		}},
		// The selected record left the list at a refresh: the cursor
		// stays, and the list says so.
		{"list-left", func(h *harness) {
			h.keys(":stuck<enter><down>")
			changeBehindTheScenes(h.src, 48207)
			h.send(h.lastThaw(), h.lastTick())
		}},
		// During an outage a list opened again shows its last rows,
		// marked stale.
		{"list-stale", func(h *harness) {
			h.keys(":stuck<enter><esc>")
			h.src.setDown(true)
			h.keys(":stuck<enter>")
		}},
	}
	for _, c := range cases {
		goldens(t, c.name, func(t *testing.T, w, h int) string {
			src := newFakeSource()
			if c.setup == nil {
				src.setDown(true)
			}
			hs := newHarness(t, src, w, h)
			if c.setup != nil {
				c.setup(hs)
			}
			return hs.view()
		})
	}
}

// goldens compares the view a case builds with its golden file at 80x24
// and 120x40, in a subtest of t named after the case.
func goldens(t *testing.T, name string, view func(t *testing.T, w, h int) string) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		for _, sz := range sizes {
			t.Run(fmt.Sprintf("%dx%d", sz.w, sz.h), func(t *testing.T) {
				t.Parallel()
				v := view(t, sz.w, sz.h)
				checkFrame(t, v, sz.w, sz.h)
				golden.RequireEqual(t, v)
			})
		}
	})
}

// deferTwo defers the deploy (stuck) for 1h50m, and had deferred the
// ticket until 5 minutes ago: due again.
func deferTwo(src *fakeSource) {
	src.deferRecord(48207, dbNow.Add(110*time.Minute), "alice")
	src.deferRecord(48213, dbNow.Add(-5*time.Minute), "bob")
}

// TestTooSmall shows a notice below 60x20 and lays out from 60x20 up.
func TestTooSmall(t *testing.T) {
	t.Parallel()
	for _, sz := range []struct{ w, h int }{{59, 24}, {80, 19}, {40, 10}} {
		t.Run(fmt.Sprintf("%dx%d", sz.w, sz.h), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, newFakeSource(), sz.w, sz.h)
			view := h.view()
			require.Contains(t, view, "terminal too small", "no notice:\n%s", view)
			require.Contains(t, view, "need 60x20", "no notice:\n%s", view)
			checkFrame(t, view, sz.w, sz.h)
			golden.RequireEqual(t, view)
			// q never quits from here: the operator may be mid-flow
			// and only resized; ctrl+c does.
			h.keys("q")
			require.False(t, h.quit, "q quits from the notice")
			h.keys("<ctrl+c>")
			require.True(t, h.quit, "ctrl+c does not quit from the notice")
		})
	}
	// The notice wraps rather than cuts its lines, and stays in the frame
	// however small the terminal.
	for _, sz := range []struct{ w, h int }{{20, 8}, {12, 3}, {1, 1}} {
		view := newHarness(t, newFakeSource(), sz.w, sz.h).view()
		checkFrame(t, view, sz.w, sz.h)
		if sz.w >= 20 {
			require.Contains(t, strings.ReplaceAll(view, "\n", " "), "quits", "the notice is cut:\n%s", view)
		}
	}
	t.Run("60x20", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, newFakeSource(), 60, 20).keys(":ops<enter>")
		view := h.view()
		checkFrame(t, view, 60, 20)
		golden.RequireEqual(t, view)
	})
}

// checkFrame: exactly h lines, none wider than w.
func checkFrame(t *testing.T, view string, w, h int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	require.False(t, len(lines) > h, "%d lines, want at most %d", len(lines), h)
	for i, l := range lines {
		lw := width(l)
		require.False(t, lw > w, "line %d is %d cells wide, want at most %d: %q", i+1, lw, w, l)
	}
}

// TestViewNeverPanics renders every screen at odd sizes, before and after
// data arrives.
func TestViewNeverPanics(t *testing.T) {
	t.Parallel()
	for _, sz := range []struct{ w, h int }{{0, 0}, {1, 1}, {60, 20}, {61, 21}, {200, 60}, {300, 20}} {
		src := newFakeSource()
		h := newHarness(t, src, sz.w, sz.h)
		_ = h.view()
		for _, k := range []string{":ops<enter>", "<down><enter>", "?", "<esc>", "<esc>", "/state:x<enter>"} {
			h.keys(k)
			v := h.view()
			if sz.w >= minWidth && sz.h >= minHeight {
				checkFrame(t, v, sz.w, sz.h)
			}
		}
	}
}

// TestColumnsDropByPriority: narrower terminals give up first what an
// operator needs least: the attempt number, retention, lease age, the
// owner, a deferral's details, the lease expiry and the tool in turn for
// a readable key, then the tenant only if the rest does not fit; never
// the id, key or state. At 80 columns the tenant, the tool and the key of
// the demo's records show whole beside the state and the lease expiry; at
// 60 a stuck list keeps the tool.
func TestColumnsDropByPriority(t *testing.T) {
	t.Parallel()
	rows := demoRows(4830)
	layout := func(rows []readmodel.Row) func(w int) string {
		cells := make([][colCount]string, len(rows))
		for i, r := range rows {
			cells[i] = rowCells(r)
		}
		m := measureCells(cells)
		return func(w int) string {
			ws := layoutColumns(m, w)
			var names []string
			total := markWidth
			for c := range colCount {
				if ws[c] > 0 {
					names = append(names, columns[c].title)
					total += ws[c] + colGap
				}
			}
			require.LessOrEqual(t, total-colGap, w, "width %d: the columns are too wide", w)
			for i := range cells {
				if w < 80 {
					break
				}
				for _, c := range []col{colTenant, colTool} {
					require.GreaterOrEqual(t, ws[c], width(cells[i][c]), "width %d: %s cut", w, columns[c].title)
				}
				require.GreaterOrEqual(t, ws[colKey], min(width(cells[i][colKey]), keyReadable), "width %d: the key unreadable", w)
			}
			return strings.Join(names, ",")
		}
	}
	every := layout(rows)
	for w, cols := range map[int]string{
		140: "ID,TENANT,TOOL,KEY,STATE,OWNER,LEASE AGE,EXPIRES,TRY,RETENTION",
		120: "ID,TENANT,TOOL,KEY,STATE,OWNER,LEASE AGE,EXPIRES,TRY,RETENTION",
		100: "ID,TENANT,TOOL,KEY,STATE,OWNER,LEASE AGE,EXPIRES",
		80:  "ID,TENANT,TOOL,KEY,STATE,EXPIRES",
		60:  "ID,TENANT,KEY,STATE",
	} {
		require.Equal(t, cols, every(w), "width %d", w)
	}
	var stuck []readmodel.Row
	for _, r := range rows {
		if r.State == readmodel.StateStuck {
			stuck = append(stuck, r)
		}
	}
	require.Equal(t, "ID,TENANT,TOOL,KEY,STATE", layout(stuck)(60), "a stuck list at 60")
	// A deferral's details show where there is room; where there is
	// not, the state still says deferred.
	rows[2].State, rows[2].DeferredUntil, rows[2].DeferredBy = readmodel.StateDeferred, dbNow.Add(2*time.Hour), "opsdesk_demo_operator"
	deferred := layout(rows)
	require.Equal(t, "ID,TENANT,TOOL,KEY,STATE,DEFERRED,OWNER,LEASE AGE,EXPIRES,TRY,RETENTION", deferred(140))
	require.Equal(t, "ID,TENANT,TOOL,KEY,STATE,EXPIRES", deferred(80))
	require.Equal(t, "⏲ deferred", rowCells(rows[2])[colState])
}

// demoRows are records like the demo's, numbered from base.
func demoRows(base int64) []readmodel.Row {
	rows := []readmodel.Row{
		{Tenant: "acme", Tool: "charge-card", Key: "order-00017:charge", State: readmodel.StatePending, Owner: "worker-1"},
		{Tenant: "acme", Tool: "charge-card", Key: "order-00018:charge", State: readmodel.StateCompleted, Owner: "worker-2"},
		{Tenant: "globex", Tool: "charge-card", Key: "order-00027:charge", State: readmodel.StateStuck, Owner: "worker-3"},
		{Tenant: "initech", Tool: "deploy-service", Key: "release-00020:deploy", State: readmodel.StateStuck, Owner: "worker-7"},
		{Tenant: "initech", Tool: "deploy-service", Key: "release-00021:deploy", State: readmodel.StateCompleted, Owner: "worker-4"},
		{Tenant: "acme", Tool: "deploy-service", Key: "release-00030:deploy", State: readmodel.StateRejected, Owner: "worker-5"},
		{Tenant: "acme", Tool: "create-ticket", Key: "run-42:create-ticket", State: readmodel.StateStuck, Owner: "worker-3"},
		{Tenant: "acme", Tool: "create-ticket", Key: "run-43:create-ticket", State: readmodel.StateCompleted, Owner: "worker-6"},
		{Tenant: "globex", Tool: "create-ticket", Key: "run-142:create-ticket", State: readmodel.StateCompleted, Conflicted: true, Owner: "worker-8"},
		{Tenant: "globex", Tool: "send-email", Key: "welcome/user-8812", State: readmodel.StateReleased},
	}
	for i := range rows {
		r := &rows[i]
		r.ID = base + int64(i)
		r.DBTime, r.Attempt, r.Version = dbNow, 1, 2
		r.CreatedAt, r.LeasedAt = dbNow.Add(-time.Hour), dbNow.Add(-time.Hour)
		r.LeaseExpiresAt = dbNow.Add(-time.Hour + 30*time.Second)
		if r.State == readmodel.StatePending {
			r.LeasedAt, r.LeaseExpiresAt = dbNow.Add(-3*time.Second), dbNow.Add(27*time.Second)
		}
		if r.State == readmodel.StateCompleted || r.State == readmodel.StateRejected {
			r.CompletedAt, r.ExpiresAt = dbNow.Add(-59*time.Minute), dbNow.Add(7*24*time.Hour)
		}
	}
	return rows
}

// TestKeysReadable: at 80x24 and 60x20 every row shows its tenant, and
// distinct keys look distinct on screen, with ids as short as the fake's
// and (at 80x24) as long as a store of millions of records has.
func TestKeysReadable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		w, h int
		base int64
	}{{80, 24, 48300}, {60, 20, 48300}, {80, 24, 4_180_300}} {
		t.Run(fmt.Sprintf("%dx%d-id%d", c.w, c.h, c.base), func(t *testing.T) {
			t.Parallel()
			src := newFakeSource()
			src.rows = demoRows(c.base)
			view := newHarness(t, src, c.w, c.h).keys(":ops<enter>").view()
			checkFrame(t, view, c.w, c.h)
			lines := strings.Split(view, "\n")
			header := lines[2]
			// cell cuts a row's cell under a header title: from the title
			// to the next title.
			cell := func(line, title string) string {
				t.Helper()
				at := strings.Index(header, " "+title+" ") + 1
				require.NotEqualValues(t, 0, at, "no %s column at %dx%d:\n%s", title, c.w, c.h, view)
				end := at + len(title)
				for end < len(header) && header[end] == ' ' {
					end++
				}
				return strings.TrimSpace(ansi.Cut(line, at, end))
			}
			seen := map[string]string{}
			for _, r := range src.rows {
				id := strconv.FormatInt(r.ID, 10)
				i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, " "+id+"  ") })
				require.False(t, i < 0, "no row %s:\n%s", id, view)
				got := cell(lines[i], "TENANT")
				require.False(t, got != r.Tenant && !strings.HasPrefix(r.Tenant, strings.TrimSuffix(got, "…")), "row %s shows tenant %q, want %q", id, got, r.Tenant)
				k := cell(lines[i], "KEY")
				other, ok := seen[k]
				require.False(t, ok, "keys %q and %q both read %q:\n%s", other, r.Key, k, view)
				seen[k] = r.Key
			}
		})
	}
}

// TestTruncateMiddle keeps both ends of a key, which is where keys differ.
func TestTruncateMiddle(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		w    int
		want string
	}{
		{"run-42:create-ticket", 30, "run-42:create-ticket"},
		{"run-42:create-ticket", 20, "run-42:create-ticket"},
		{"run-42:create-ticket", 17, "run-42:c…e-ticket"},
		{"run-42:create-ticket", 10, "run-4…cket"},
		{"abcdef", 2, "a…"},
		{"abcdef", 1, "…"},
		{"abcdef", 0, ""},
	}
	for _, c := range cases {
		got := truncateMiddle(c.in, c.w)
		require.Equal(t, c.want, got, "truncateMiddle(%q, %d) = %q, want %q", c.in, c.w, got, c.want)
	}
	// Wide and multi-byte characters: the result is exactly w cells.
	for _, in := range []string{"注文-2026-こんにちは-世界", "ключ-идемпотентности-42", "e\u0301tude-ticket-42"} {
		for w := 2; w < 14; w++ {
			got := truncateMiddle(in, w)
			require.Equal(t, w, width(got), "truncateMiddle(%q, %d) = %q (%d cells)", in, w, got, width(got))
			require.Contains(t, got, "…", "truncateMiddle(%q, %d) = %q (%d cells)", in, w, got, width(got))
		}
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for d, want := range map[string]string{
		"27s": "in 27s", "-41m30s": "41m ago", "3h5m": "in 3h05m", "-50h": "2d02h ago", "720h": "in 30d", "0s": "now",
	} {
		got := Relative(mustDur(t, d))
		require.Equal(t, want, got, "relative(%s) = %q, want %q", d, got, want)
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1204: "1,204", 4180112: "4,180,112", -1234: "-1,234"} {
		got := count(n)
		require.Equal(t, want, got, "count(%d) = %q, want %q", n, got, want)
	}
	for n, want := range map[int64]string{812: "~812", 4180112: "~4.2M", 42_000: "~42k", 12_500_000: "~13M"} {
		got := approx(n)
		require.Equal(t, want, got, "approx(%d) = %q, want %q", n, got, want)
	}
}

// TestNoPgxImport: the console reads through Source and decides through
// Decider, and depends on pgx neither itself nor through any package it
// imports (go list -deps, without its tests); its test files do not import
// pgx either. A failure names the way pgx is reached.
func TestNoPgxImport(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, f := range files {
		parsed, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			require.NotContains(t, imp.Path.Value, "jackc/pgx", "%s imports %s", f, imp.Path.Value)
		}
	}
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}|{{join .Imports " "}}`, ".")
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "go list: %s", stderr)
	imports := map[string][]string{}
	var self string
	for line := range strings.Lines(string(out)) {
		path, imps, ok := strings.Cut(strings.TrimSpace(line), "|")
		require.True(t, ok, line)
		imports[path] = strings.Fields(imps)
		self = path // go list -deps lists the package itself last
	}
	if way := pgxWay(imports, self); way != nil {
		t.Fatalf("ui depends on pgx: %s", strings.Join(way, " → "))
	}
}

// pgxWay is a shortest chain of imports from from to a package of pgx
// (github.com/jackc/pgx/...), or nil when there is none.
func pgxWay(imports map[string][]string, from string) []string {
	parent := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if strings.HasPrefix(p, "github.com/jackc/pgx") {
			var way []string
			for ; p != ""; p = parent[p] {
				way = append([]string{p}, way...)
			}
			return way
		}
		for _, imp := range imports[p] {
			if _, seen := parent[imp]; !seen {
				parent[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// TestPgxWayNamesTheChain: the check names the packages between the
// console and pgx, and passes a graph without it.
func TestPgxWayNamesTheChain(t *testing.T) {
	t.Parallel()
	graph := map[string][]string{
		"ui":        {"fmt", "reconcile"},
		"reconcile": {"ops", "strings"},
		"ops":       {"github.com/jackc/pgx/v5/pgxpool"},
	}
	require.Equal(t, []string{"ui", "reconcile", "ops", "github.com/jackc/pgx/v5/pgxpool"}, pgxWay(graph, "ui"))
	graph["reconcile"] = []string{"strings"}
	require.Nil(t, pgxWay(graph, "ui"))
}
