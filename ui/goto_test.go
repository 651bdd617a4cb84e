package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

// gotoHarness starts the console on the fake store with a start command.
func gotoHarness(t *testing.T, src *fakeSource, line string) *harness {
	t.Helper()
	return startHarness(&harness{t: t, src: src}, src, Config{Context: "prod-eu", NoColor: true, Goto: line}, 120, 40, termenv.Ascii)
}

// rowIDs are the list's rows, by record number.
func rowIDs(m *Model) []int64 {
	ids := make([]int64, 0, len(m.list().page.Rows))
	for _, r := range m.list().page.Rows {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestGotoOpensTheFilteredList: --goto 'stuck tool:x' starts on the stuck
// list of that tool, above the overview, as if :stuck tool:x were typed.
func TestGotoOpensTheFilteredList(t *testing.T) {
	t.Parallel()
	h := gotoHarness(t, newFakeSource(), "stuck tool:create-ticket")
	require.Equal(t, screen(h.m.list()), h.m.active(), "the console did not start on the list:\n%s", h.view())
	require.Equal(t, "state:stuck tool:create-ticket", h.m.list().filterText)
	require.Equal(t, readmodel.SortLease, h.m.list().sort)
	require.Equal(t, []int64{48213}, rowIDs(h.m), "the other tool's stuck record (48207) is listed")
	v := h.view()
	require.Contains(t, v, "filter: state:stuck tool:create-ticket")
	require.Contains(t, v, "48213")
	require.NotContains(t, v, "48207")

	h.keys("q")
	require.Equal(t, screen(h.m.overview()), h.m.active(), "q did not go back to the overview")
	require.False(t, h.quit)
	require.Contains(t, h.view(), "Needs attention")
}

// TestGotoWaitsForTheDatabase: a start command given while the database is
// down is not refused as a typed one is; it runs once the database answers.
func TestGotoWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	src.setDown(true)
	h := gotoHarness(t, src, ":conflicts tenant:globex")
	require.Equal(t, screen(h.m.connect), h.m.active())
	require.NotContains(t, h.view(), "not connected yet")

	src.setDown(false)
	h.send(h.lastTick())
	require.Equal(t, screen(h.m.list()), h.m.active(), "no list after the database answered:\n%s", h.view())
	require.Equal(t, "state:conflicted tenant:globex", h.m.list().filterText)
	require.Equal(t, []int64{48190}, rowIDs(h.m))
	require.Equal(t, []screen{h.m.overview(), h.m.list()}, h.m.stack)

	// It runs once: a later reconnection does not go there again.
	h.keys("q")
	src.setDown(true)
	h.send(h.lastTick(), h.lastTick())
	src.setDown(false)
	h.send(h.lastTick())
	require.Equal(t, screen(h.m.overview()), h.m.active())
}

// TestGotoEveryScreen: each kind of command starts where the : line goes.
func TestGotoEveryScreen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line  string
		want  func(*Model) screen
		stack int
	}{
		{"key acme/create-ticket/run-42:create-ticket", func(m *Model) screen { return m.detail() }, 2},
		{"audit action:decide:*", func(m *Model) screen { return m.audit() }, 2},
		{"retention", func(m *Model) screen { return m.review() }, 2},
		{"overview", func(m *Model) screen { return m.overview() }, 1},
		{"  :ops\tstate:stuck,pending\n", func(m *Model) screen { return m.list() }, 2},
	} {
		h := gotoHarness(t, newFakeSource(), tc.line)
		require.Equal(t, tc.want(h.m), h.m.active(), "%q:\n%s", tc.line, h.view())
		require.Len(t, h.m.stack, tc.stack, "%q", tc.line)
		require.Equal(t, screen(h.m.overview()), h.m.stack[0], "%q", tc.line)
	}
	h := gotoHarness(t, newFakeSource(), "quit")
	require.True(t, h.quit, "--goto quit did not quit")
}

// TestGotoInvalid: a console started with a command it cannot read (the
// CLI refuses one first) opens on the overview and says why.
func TestGotoInvalid(t *testing.T) {
	t.Parallel()
	h := gotoHarness(t, newFakeSource(), "stuck tool:a\x00b")
	require.Equal(t, screen(h.m.overview()), h.m.active())
	require.Contains(t, h.view(), "--goto: the command contains the control character U+0000 at byte 12")
}

// TestGotoProgram runs a real Bubble Tea program, where the connection and
// the start command race: it still starts on the stuck list.
func TestGotoProgram(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	tm := teatest.NewTestModel(t, New(src, Config{NoColor: true, Goto: "stuck tool:deploy-service"}), teatest.WithInitialTermSize(120, 40))
	wait := (&screenLog{tm: tm}).wait(t)
	wait("filter: state:stuck tool:deploy-service")
	wait("48207  globex")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
	require.Equal(t, screen(final.list()), final.active())
	require.Equal(t, []int64{48207}, rowIDs(final))
}

// TestGotoRealDatabase: on a real store read by a viewer, --goto 'stuck
// tool:create-ticket' lists that tool's stuck records, the longest stuck
// first, and none of another tool's.
func TestGotoRealDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(ctx, decideFixtures)
	require.NoError(t, err)
	_, err = d.Admin.Exec(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt,
    leased_at, lease_expires_at, created_at)
VALUES ('acme', 'send-email', 'mail-1', '1', decode(repeat('05', 32), 'hex'), 'external_unknown', 'pending', 'worker-5', 1,
    now() - interval '50m', now() - interval '49m', now() - interval '50m')`)
	require.NoError(t, err)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	store := storeview.New(viewer.Pool, storeview.Config{StatementTimeout: 5 * time.Second})
	h := newSourceHarness(t, store, Config{Context: "db", Goto: "stuck tool:create-ticket"}, 120, 40)
	require.Equal(t, screen(h.m.list()), h.m.active(), "the console did not start on the list:\n%s", h.view())
	var keys []string
	for _, r := range h.m.list().page.Rows {
		keys = append(keys, r.Key)
	}
	require.Equal(t, []string{"run-42", "run-43"}, keys)
	require.Contains(t, h.view(), "filter: state:stuck tool:create-ticket")
}

// TestCheckCommand: what --goto accepts and where it leads; what it
// refuses, with errors that say what is wrong without repeating hostile
// text.
func TestCheckCommand(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		"stuck tool:charge-card tenant:acme":    "operations list: state:stuck tenant:acme tool:charge-card",
		`:stuck tool:"it's a tool"`:             `operations list: state:stuck tool:"it's a tool"`,
		"conflicts tool:x":                      "operations list: state:conflicted tool:x",
		"ops state:pending,stuck tool:x":        "operations list: state:pending,stuck tool:x",
		"key acme/deploy-service/deploy/web/42": "operation acme/deploy-service/deploy/web/42",
		"audit action:decide:defer tool:x":      "audit trail: tool:x action:decide:defer",
		"audit tenant:''":                       "audit trail: tenant:''",
		"retention":                             "retention review",
		":overview":                             "overview",
		"quit":                                  "quit",
		"stuck\ttool:x\n":                       "operations list: state:stuck tool:x",
		"stuck\u3000tool:x":                     "operations list: state:stuck tool:x",
		"stuck state:stuck tool:x":              "operations list: state:stuck tool:x",
	} {
		got, err := CheckCommand(line)
		require.NoError(t, err, "%q", line)
		require.Equal(t, want, got, "%q", line)
	}
	for line, want := range map[string]string{
		"":                                  "no command",
		" \t\n\u3000":                       "no command",
		":":                                 "no command",
		"frob":                              `unknown command "frob"`,
		"stuck tool:x\x00":                  "control character U+0000 at byte 12",
		"stuck \x1b[31mtool:x":              "control character U+001B at byte 6",
		"overview\u009b":                    "control character U+009B at byte 8",
		"stuck tool:\xff":                   "not valid UTF-8",
		"stuck " + strings.Repeat("a", 995): "the command is 1001 characters long; a command is at most 1000",
		strings.Repeat("x", 32<<20):         "the command is 33554432 characters long",
		"stuck state:nope":                  `unknown state "nope"`,
		"stuck tool:\"unterminated":         "unterminated quote",
		"key acme/tool":                     "write :key TENANT/TOOL/KEY",
		"audit outcome:maybe":               `unknown outcome "maybe"`,
		// Never rewritten or ignored without a word.
		"stuck state:completed":                 ":stuck lists stuck records only: drop the state: term, or write :ops state:completed",
		"stuck state:stuck,pending":             ":stuck lists stuck records only",
		"retention foo":                         `:retention takes no arguments, not "foo": write :retention`,
		"review tool:x":                         ":retention takes no arguments",
		"verify now":                            ":verify takes no arguments",
		"overview ‮":                            ":overview takes no arguments",
		"quit please":                           ":quit takes no arguments",
		"retention " + strings.Repeat("y", 900): ":retention takes no arguments",
	} {
		_, err := CheckCommand(line)
		require.Error(t, err, "%.40q", line)
		require.Contains(t, err.Error(), want, "%.40q", line)
		require.Less(t, len(err.Error()), 300, "the error repeats the input: %.80q", err.Error())
	}
}
