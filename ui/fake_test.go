package ui

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// dbNow is the fake database's clock: fixed, so goldens are stable.
var dbNow = time.Date(2026, 11, 25, 3, 12, 9, 0, time.UTC)

// errDown is what the fake answers while "the database" is down.
var errDown = errors.New("dial tcp 10.0.4.17:5432: connect: connection refused")

// fakeSource is a small in-memory operation store.
type fakeSource struct {
	mu        sync.Mutex
	rows      []readmodel.Row
	conflicts map[int64][]readmodel.Conflict
	decisions map[int64][]readmodel.Decision
	// refs are result references people confirmed, by record.
	refs map[int64]string
	down bool
	// totalsDown fails the counts alone.
	totalsDown bool
	// estimate, when set, is reported as the planner's completed count.
	estimate int64
	// scoped answers as for a role that sees some tenants: counts above
	// the cap are lower bounds.
	scoped bool
	calls  map[string]int
	// unfinished are the review's unfinished purge runs.
	unfinished []readmodel.UnfinishedPurge
	// trail is the audit trail, newest last within each chain.
	trail []readmodel.AuditDetail
	// batches are the past bulk runs, newest first.
	batches []readmodel.Batch
}

func newFakeSource() *fakeSource {
	s := &fakeSource{conflicts: map[int64][]readmodel.Conflict{}, decisions: map[int64][]readmodel.Decision{},
		refs: map[int64]string{}, calls: map[string]int{}, estimate: 4_180_112}
	s.trail = fakeTrail()
	at := func(d time.Duration) time.Time { return dbNow.Add(d) }
	add := func(r readmodel.Row) {
		r.DBTime = dbNow
		r.Version = int64(r.Attempt) + 1
		if r.UpdatedAt.IsZero() {
			r.UpdatedAt = cmp.Or(r.CompletedAt, r.LeasedAt, r.CreatedAt)
		}
		s.rows = append(s.rows, r)
	}
	// The records the goldens and flows look at.
	add(readmodel.Row{ID: 48213, Tenant: "acme", Tool: "create-ticket", Key: "run-42:create-ticket", State: readmodel.StateStuck,
		Owner: "worker-3", Attempt: 1, CreatedAt: at(-42*time.Minute - 3*time.Second), LeasedAt: at(-42 * time.Minute),
		LeaseExpiresAt: at(-41*time.Minute - 30*time.Second)})
	add(readmodel.Row{ID: 48207, Tenant: "globex", Tool: "deploy-service", Key: "deploy/payments-api/2026-11-25T02:58:00Z/canary-7", State: readmodel.StateStuck,
		Owner: "worker-7", Attempt: 2, CreatedAt: at(-2 * time.Hour), LeasedAt: at(-14 * time.Minute),
		LeaseExpiresAt: at(-9 * time.Minute)})
	add(readmodel.Row{ID: 48231, Tenant: "acme", Tool: "charge-card", Key: "ord-7731-2026-11-25T03:11:42Z-retry-19", State: readmodel.StatePending,
		Owner: "worker-1", Attempt: 1, CreatedAt: at(-3 * time.Second), LeasedAt: at(-3 * time.Second),
		LeaseExpiresAt: at(27 * time.Second)})
	add(readmodel.Row{ID: 48190, Tenant: "globex", Tool: "send-email", Key: "welcome/user-8812", State: readmodel.StateCompleted,
		Conflicted: true, ConflictCount: 2, Owner: "worker-2", Attempt: 1, CreatedAt: at(-3 * time.Hour), LeasedAt: at(-3 * time.Hour),
		LeaseExpiresAt: at(-3*time.Hour + 30*time.Second), CompletedAt: at(-3*time.Hour + 2*time.Second), ExpiresAt: at(29*24*time.Hour - 3*time.Hour)})
	s.conflicts[48190] = []readmodel.Conflict{
		{ID: 901, AttemptedAt: at(-2 * time.Hour), Owner: "worker-9", ToolVersion: "4", FingerprintTag: fp("other-1"), Reviewed: true},
		{ID: 907, AttemptedAt: at(-20 * time.Minute), Owner: "worker-4", ToolVersion: "4", FingerprintTag: fp("other-2")},
	}
	add(readmodel.Row{ID: 48188, Tenant: "initech", Tool: "charge-card", Key: "inv-2026-0042", State: readmodel.StateRejected,
		Owner: "worker-5", Attempt: 1, CreatedAt: at(-5 * time.Hour), LeasedAt: at(-5 * time.Hour),
		LeaseExpiresAt: at(-5*time.Hour + 30*time.Second), CompletedAt: at(-5*time.Hour + 4*time.Second), ExpiresAt: at(6 * time.Hour)})
	add(readmodel.Row{ID: 48150, Tenant: "acme", Tool: "deploy-service", Key: "deploy/web/42", State: readmodel.StateReleased,
		Owner: "", Attempt: 3, CreatedAt: at(-26 * time.Hour), CompletedAt: at(-25 * time.Hour)})
	// A crowd of ordinary records, for paging.
	tools := []string{"create-note", "create-ticket", "send-email", "charge-card", "deploy-service"}
	tenants := []string{"acme", "globex", "initech"}
	for i := range 60 {
		id := int64(48100 + i)
		if slices.ContainsFunc(s.rows, func(r readmodel.Row) bool { return r.ID == id }) {
			continue
		}
		created := at(-time.Duration(60-i) * 7 * time.Minute)
		r := readmodel.Row{ID: id, Tenant: tenants[i%3], Tool: tools[i%5], Key: fmt.Sprintf("req-%04d-%s", 7000+i*13, tools[i%5]),
			State: readmodel.StateCompleted, Owner: fmt.Sprintf("worker-%d", 1+i%8), Attempt: 1 + i%3/2,
			CreatedAt: created, LeasedAt: created, LeaseExpiresAt: created.Add(30 * time.Second),
			CompletedAt: created.Add(2 * time.Second), ExpiresAt: created.Add(time.Duration(1+i%4*10) * 24 * time.Hour)}
		if i%9 == 4 {
			r.State = readmodel.StateRejected
		}
		add(r)
	}
	return s
}

// fp is a fingerprint tag, sha a digest, made up from seed.
func fp(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return "fp:" + hex.EncodeToString(sum[:6])
}

func sha(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (s *fakeSource) setScoped() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scoped = true
}

func (s *fakeSource) setDown(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = v
}

func (s *fakeSource) called(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

// enter records a call and fails while down.
func (s *fakeSource) enter(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[name]++
	if s.down {
		return errDown
	}
	return nil
}

func (s *fakeSource) Info(context.Context) (readmodel.Info, error) {
	if err := s.enter("info"); err != nil {
		return readmodel.Info{}, fmt.Errorf("read server info: %w", err)
	}
	return readmodel.Info{Server: "ops-db-1:5432", Database: "opsdesk", Role: "alice", Version: "17.2", Schema: 1, DBTime: dbNow}, nil
}

func (s *fakeSource) Overview(context.Context) (readmodel.Overview, error) {
	if err := s.enter("overview"); err != nil {
		return readmodel.Overview{}, fmt.Errorf("count pending: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := readmodel.Overview{DBTime: dbNow}
	for i, r := range s.rows {
		switch r.State {
		case readmodel.StatePending:
			o.Pending++
		case readmodel.StateStuck:
			o.Stuck++
			if o.OldestStuck == nil || r.LeaseExpiresAt.Before(o.OldestStuck.LeaseExpiresAt) {
				o.OldestStuck = &s.rows[i]
			}
		case readmodel.StateDeferred:
			o.Deferred++
			if o.NextDue == nil || r.DeferredUntil.Before(o.NextDue.DeferredUntil) {
				o.NextDue = &s.rows[i]
			}
		case readmodel.StateCompleted:
			o.Completed++
		case readmodel.StateRejected:
			o.Rejected++
		case readmodel.StateReleased:
			o.Released++
		}
		if r.Conflicted {
			o.Conflicted++
		}
		if (r.State == readmodel.StateCompleted || r.State == readmodel.StateRejected) &&
			r.ExpiresAt.After(dbNow) && !r.ExpiresAt.After(dbNow.Add(24*time.Hour)) {
			o.ExpiringSoon++
		}
	}
	// The pulse: the stuck records by tool, the longest stuck first, and
	// the past day's decisions, newest first.
	o.StuckByTool, o.RecentDecisions = []readmodel.ToolStuck{}, []readmodel.AuditRow{}
	for _, r := range s.rows {
		if r.State != readmodel.StateStuck {
			continue
		}
		i := slices.IndexFunc(o.StuckByTool, func(t readmodel.ToolStuck) bool { return t.Tool == r.Tool })
		if i < 0 {
			o.StuckByTool = append(o.StuckByTool, readmodel.ToolStuck{Tool: r.Tool, Oldest: r.LeaseExpiresAt})
			i = len(o.StuckByTool) - 1
		}
		t := &o.StuckByTool[i]
		t.Stuck++
		if r.LeaseExpiresAt.Before(t.Oldest) {
			t.Oldest = r.LeaseExpiresAt
		}
	}
	slices.SortFunc(o.StuckByTool, func(a, b readmodel.ToolStuck) int {
		return cmp.Or(a.Oldest.Compare(b.Oldest), cmp.Compare(a.Tool, b.Tool))
	})
	for _, r := range s.trail {
		if strings.HasPrefix(r.Action, "decide:") && r.Outcome == "succeeded" && r.At.After(dbNow.Add(-24*time.Hour)) {
			row := r.AuditRow
			row.DBTime = dbNow
			o.RecentDecisions = append(o.RecentDecisions, row)
		}
	}
	slices.SortFunc(o.RecentDecisions, func(a, b readmodel.AuditRow) int { return b.At.Compare(a.At) })
	o.RecentDecisions = o.RecentDecisions[:min(len(o.RecentDecisions), readmodel.RecentCap)]
	if s.estimate > 0 {
		o.Completed, o.CompletedEstimated = s.estimate, true
	}
	if s.scoped {
		o.Scoped, o.Completed = true, readmodel.CountCap+1
	}
	return o, nil
}

func (s *fakeSource) List(_ context.Context, q readmodel.Query) (readmodel.Page, error) {
	if err := s.enter("list"); err != nil {
		return readmodel.Page{}, fmt.Errorf("list operations: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []readmodel.Row
	for _, r := range s.rows {
		if matches(q.Filter, r) {
			rows = append(rows, r)
		}
	}
	sortKey := func(r readmodel.Row) time.Time {
		t := r.LeaseExpiresAt
		if q.Sort == readmodel.SortExpires {
			t = r.ExpiresAt
		}
		if t.IsZero() {
			return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return t
	}
	switch q.Sort {
	case readmodel.SortNewest, "":
		slices.SortFunc(rows, func(a, b readmodel.Row) int { return cmp.Compare(b.ID, a.ID) })
		if q.After != nil {
			rows = slices.DeleteFunc(rows, func(r readmodel.Row) bool { return r.ID >= q.After.ID })
		}
	default:
		slices.SortFunc(rows, func(a, b readmodel.Row) int {
			return cmp.Or(sortKey(a).Compare(sortKey(b)), cmp.Compare(a.ID, b.ID))
		})
		if q.After != nil {
			at := q.After.At
			if at.IsZero() {
				at = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
			}
			rows = slices.DeleteFunc(rows, func(r readmodel.Row) bool {
				return cmp.Or(sortKey(r).Compare(at), cmp.Compare(r.ID, q.After.ID)) <= 0
			})
		}
	}
	limit := cmp.Or(q.Limit, 50)
	page := readmodel.Page{DBTime: dbNow}
	if len(rows) > limit {
		last := rows[limit-1]
		c := &readmodel.Cursor{ID: last.ID, At: last.LeaseExpiresAt}
		if q.Sort == readmodel.SortExpires {
			c.At = last.ExpiresAt
		}
		page.Next = c
		rows = rows[:limit]
	}
	page.Rows = rows
	return page, nil
}

// Total counts the rows that match f.
func (s *fakeSource) Total(_ context.Context, f readmodel.Filter) (readmodel.Count, error) {
	if err := s.enter("total"); err != nil {
		return readmodel.Count{}, fmt.Errorf("count operations: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.totalsDown {
		return readmodel.Count{}, fmt.Errorf("count operations: %w", context.DeadlineExceeded)
	}
	return readmodel.Count{N: int64(s.matching(f))}, nil
}

// matching counts the rows that match f; the lock is held.
func (s *fakeSource) matching(f readmodel.Filter) int {
	n := 0
	for _, r := range s.rows {
		if matches(f, r) {
			n++
		}
	}
	return n
}

// deferRecord defers record id until a time, as role by did: out of the
// queue until then, stuck again and due after.
func (s *fakeSource) deferRecord(id int64, until time.Time, by string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.rows {
		if r := &s.rows[i]; r.ID == id {
			r.DeferredUntil, r.DeferredBy = until, by
			if until.After(r.DBTime) && r.State == readmodel.StateStuck {
				r.State = readmodel.StateDeferred
			}
		}
	}
}

func matches(f readmodel.Filter, r readmodel.Row) bool {
	if len(f.States) > 0 && !slices.Contains(f.States, r.State) {
		return false
	}
	if f.Conflicted && !r.Conflicted {
		return false
	}
	if len(f.Tenants) > 0 && !slices.Contains(f.Tenants, r.Tenant) {
		return false
	}
	if len(f.Tools) > 0 && !slices.Contains(f.Tools, r.Tool) {
		return false
	}
	if len(f.Owners) > 0 && !slices.Contains(f.Owners, r.Owner) {
		return false
	}
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, r.ID) {
		return false
	}
	if len(f.Keys) > 0 && !slices.ContainsFunc(f.Keys, func(p string) bool {
		re := "^" + strings.ReplaceAll(regexp.QuoteMeta(p), `\*`, ".*") + "$"
		return regexp.MustCompile(re).MatchString(r.Key)
	}) {
		return false
	}
	if f.MinAge > 0 && (r.LeasedAt.IsZero() || r.LeaseAge() < f.MinAge) {
		return false
	}
	if f.MaxAge > 0 && (r.LeasedAt.IsZero() || r.LeaseAge() >= f.MaxAge) {
		return false
	}
	return true
}

func (s *fakeSource) detail(r readmodel.Row) readmodel.Detail {
	d := readmodel.Detail{Row: r, ToolVersion: "3", FingerprintTag: fp(r.Key), Effect: "local"}
	switch r.Tool {
	case "send-email":
		d.Effect = "external_idempotent"
	case "charge-card", "deploy-service":
		d.Effect = "external_unknown"
	}
	switch r.State {
	case readmodel.StateCompleted:
		d.Outcome, d.HasResult = "succeeded", true
		if r.Tool == "send-email" {
			d.ResultRef = "msg_8f3a21"
		}
	case readmodel.StateRejected:
		d.Outcome, d.HasResult = "rejected", true
	}
	if ref, ok := s.refs[r.ID]; ok {
		d.ResultRef = ref
	}
	d.Conflicts = slices.Clone(s.conflicts[r.ID])
	d.Decisions = slices.Clone(s.decisions[r.ID])
	if n := len(d.Conflicts); n > 0 {
		d.LastConflictAt = d.Conflicts[n-1].AttemptedAt
	}
	return d
}

func (s *fakeSource) Get(_ context.Context, id int64) (readmodel.Detail, error) {
	if err := s.enter("get"); err != nil {
		return readmodel.Detail{}, fmt.Errorf("read operation: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		if r.ID == id {
			return s.detail(r), nil
		}
	}
	return readmodel.Detail{}, readmodel.ErrNotFound
}

func (s *fakeSource) GetByIdentity(_ context.Context, tenant, tool, key string) (readmodel.Detail, error) {
	if err := s.enter("identity"); err != nil {
		return readmodel.Detail{}, fmt.Errorf("read operation: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		if r.Tenant == tenant && r.Tool == tool && r.Key == key {
			return s.detail(r), nil
		}
	}
	if tenant == "acme" && tool == "create-ticket" && key == "run-7" {
		return readmodel.Detail{}, &readmodel.PurgedError{OperationID: 31007, PurgedAt: dbNow.Add(-50 * time.Hour),
			TombstoneUntil: dbNow.Add(5 * 24 * time.Hour), DBTime: dbNow}
	}
	return readmodel.Detail{}, readmodel.ErrNotFound
}

// harness drives a Model through Update as the Bubble Tea runtime would,
// running commands synchronously. Timers are not run: they are recorded,
// and a test delivers the ticks it wants.
type harness struct {
	t     testing.TB
	m     *Model
	src   *fakeSource
	timer []tea.Msg
	quit  bool
}

func newHarness(t testing.TB, src *fakeSource, w, h int) *harness {
	t.Helper()
	return newHarnessProfile(t, src, w, h, termenv.Ascii)
}

// newHarnessProfile renders with a colour profile (the goldens use ASCII).
func newHarnessProfile(t testing.TB, src *fakeSource, w, h int, p termenv.Profile) *harness {
	t.Helper()
	return startHarness(&harness{t: t, src: src}, src, Config{Context: "prod-eu", NoColor: p == termenv.Ascii}, w, h, p)
}

// newSourceHarness drives a model over any Source, such as a
// storeview.Store on a real server, without colour. Its src is nil.
func newSourceHarness(t testing.TB, src Source, opts Config, w, h int) *harness {
	t.Helper()
	opts.NoColor = true
	return startHarness(&harness{t: t}, src, opts, w, h, termenv.Ascii)
}

func startHarness(hs *harness, src Source, opts Config, w, h int, p termenv.Profile) *harness {
	hs.t.Helper()
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(p)
	hs.m = newModel(context.Background(), src, opts, r)
	hs.m.after = func(_ time.Duration, msg tea.Msg) tea.Cmd {
		hs.timer = append(hs.timer, msg)
		return nil
	}
	hs.send(tea.WindowSizeMsg{Width: w, Height: h})
	hs.run(hs.m.Init())
	return hs
}

// send delivers messages and runs what they return.
func (h *harness) send(msgs ...tea.Msg) *harness {
	h.t.Helper()
	for _, msg := range msgs {
		_, cmd := h.m.Update(msg)
		h.run(cmd)
	}
	return h
}

func (h *harness) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			h.run(c)
		}
	case tea.QuitMsg:
		h.quit = true
	default:
		h.send(msg)
	}
}

// keys sends key presses: runes of s, or named keys in angle brackets
// ("<enter>", "<esc>", "<down>", "<up>", "<space>").
func (h *harness) keys(s string) *harness {
	h.t.Helper()
	for s != "" {
		if strings.HasPrefix(s, "<") {
			end := strings.Index(s, ">")
			h.send(namedKey(h.t, s[1:end]))
			s = s[end+1:]
			continue
		}
		r := []rune(s)[0]
		h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
		s = s[len(string(r)):]
	}
	return h
}

func namedKey(t testing.TB, name string) tea.KeyMsg {
	switch name {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "space":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "pgup":
		return tea.KeyMsg{Type: tea.KeyPgUp}
	}
	t.Fatalf("unknown key %q", name)
	return tea.KeyMsg{}
}

// lastTick is the newest refresh tick scheduled.
func (h *harness) lastTick() tickMsg {
	h.t.Helper()
	for i := len(h.timer) - 1; i >= 0; i-- {
		if t, ok := h.timer[i].(tickMsg); ok {
			return t
		}
	}
	h.t.Fatal("no tick scheduled")
	return tickMsg{}
}

// lastThaw is the newest freeze end scheduled.
func (h *harness) lastThaw() thawMsg {
	h.t.Helper()
	for i := len(h.timer) - 1; i >= 0; i-- {
		if t, ok := h.timer[i].(thawMsg); ok {
			return t
		}
	}
	h.t.Fatal("no thaw scheduled")
	return thawMsg{}
}

func (h *harness) view() string { return h.m.View() }

// The screens, by kind, for the tests to look inside.
func (m *Model) overview() *overviewScreen { return m.screens[screenOverview].(*overviewScreen) }
func (m *Model) list() *listScreen         { return m.screens[screenList].(*listScreen) }
func (m *Model) detail() *detailScreen     { return m.screens[screenDetail].(*detailScreen) }
func (m *Model) review() *reviewScreen     { return m.screens[screenReview].(*reviewScreen) }
func (m *Model) audit() *auditScreen       { return m.screens[screenAudit].(*auditScreen) }
func (m *Model) auditRec() *auditRecordScreen {
	return m.screens[screenAuditRecord].(*auditRecordScreen)
}
func (m *Model) reconcile() *reconcileFlow { return m.screens[screenReconcile].(*reconcileFlow) }
func (m *Model) reveal() *revealFlow       { return m.screens[screenReveal].(*revealFlow) }
