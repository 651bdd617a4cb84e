package ui

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// compareLatest opens the e-mail record's latest conflicting attempt
// (#907, unreviewed) and reveals it with a reason.
const compareLatest = openEmail + "c<enter>customer got two e-mails<enter>y"

// hostileRequests are requests whose values would act on a terminal
// printed raw (an escape sequence, a right-to-left override, C1 CSI, a
// NUL) and whose keys hold the characters a JSON Pointer escapes.
var hostileRequests = [2]json.RawMessage{
	json.RawMessage(`{"intent":{"a/b":1,"m~n":"x","note":"\u001b[2J\u0000wiped","to":"user@example.com"},"tool":"send-email","version":"1"}`),
	json.RawMessage(`{"intent":{"a/b":2,"m~n":"x","note":"safe","to":"user@example.com` + "\u202e" + `moc.live` + "\u009b" + `31m","\u001b]0;pwned\u0007":true},"tool":"send-email","version":"1"}`),
}

// TestConflictViews compares every state of the conflict reveal with its
// golden file at 80x24 (the requests stacked) and 120x40 (side by side).
func TestConflictViews(t *testing.T) {
	t.Parallel()
	decideGoldens(t, []decideCase{
		{"detail-conflicts-operator", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "G") }},
		{"conflict-choose", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "c") }},
		{"conflict-reason", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "c<enter>") }},
		{"conflict-reason-blank", func(h *harness, _ *fakeDecider) {
			h.keys(openEmail + "c<enter>  ")
			h.send(runeKey("\t"), runeKey("\u3000"))
			h.keys("<enter>")
		}},
		{"conflict-confirm", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "c<enter>customer got two e-mails<enter>") }},
		{"conflict-loading", func(h *harness, _ *fakeDecider) {
			h.keys(openEmail + "c<enter>customer got two e-mails<enter>")
			h.m.Update(runeKey("y")) // the reveal's command is never run
		}},
		{"conflict-result", func(h *harness, _ *fakeDecider) { h.keys(compareLatest) }},
		{"conflict-result-scrolled", func(h *harness, _ *fakeDecider) { h.keys(compareLatest + "n") }},
		{"conflict-not-recorded", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "ck<enter>older one<enter>y") }},
		{"conflict-refused", func(h *harness, dec *fakeDecider) {
			dec.refuseConflict = "role alice may not reveal conflict 907 (needs the operator role)"
			h.keys(compareLatest)
		}},
		{"conflict-hostile", func(h *harness, dec *fakeDecider) {
			dec.requests[907] = hostileRequests
			h.keys(compareLatest)
		}},
		{"conflict-type-changed", func(h *harness, dec *fakeDecider) {
			dec.requests[907] = [2]json.RawMessage{
				json.RawMessage(`{"intent":{"items":[{"qty":1,"sku":"A"},{"qty":2,"sku":"B"}],"to":"a@example.com"},"tool":"send-email","version":"1"}`),
				json.RawMessage(`{"intent":{"items":"A,B","to":"a@example.com","z":null},"tool":"send-email","version":"1"}`)}
			h.keys(compareLatest)
		}},
		{"conflict-single", func(h *harness, _ *fakeDecider) {
			h.src.conflicts[48190] = h.src.conflicts[48190][1:]
			h.keys(openEmail + "c")
		}},
	})
}

// TestConflictReveal: the requests show only after the audited reveal
// answered, with every difference in the list and marked beside the
// field, and are forgotten when the operator leaves.
func TestConflictReveal(t *testing.T) {
	t.Parallel()
	for _, w := range []int{80, 120} {
		src := newFakeSource()
		dec := newFakeDecider(src)
		h := newDecideHarness(t, src, dec, Config{}, w, 400)
		h.keys(openEmail + "c<enter>")
		require.Contains(t, h.view(), "#907", "the latest unreviewed attempt is not chosen:\n%s", h.view())
		h.keys("<enter>")
		require.EqualValues(t, 0, dec.called("reveal-conflict"), "revealed without a reason:\n%s", h.view())
		require.Contains(t, flat(h.view()), "a reason is required", "revealed without a reason:\n%s", h.view())
		h.keys("customer got two e-mails<enter>")
		require.NotContains(t, h.view(), "tmpl-7732", "shown before the confirmation:\n%s", h.view())
		h.keys("<enter>") // enter is no
		require.EqualValues(t, 0, dec.called("reveal-conflict"), "enter confirmed the reveal:\n%s", h.view())
		h.keys("<enter>y")
		require.EqualValues(t, 1, dec.called("reveal-conflict"), "y did not reveal:\n%s", h.view())
		require.Equal(t, []int64{907}, dec.reveals, "revealed conflicts")
		require.Equal(t, "customer got two e-mails", dec.reasons[0], "the reason")
		v := h.view()
		for _, want := range []string{
			"record globex#42, committed",
			"3 differing fields",
			"~ changed  /intent/template  \"tmpl-7731\" → \"tmpl-7732\"",
			"- removed  /intent/locale    \"en\" → (absent)",
			"+ added    /intent/cc        (absent) → \"ops@example.com\"",
			"ORIGINAL request · operation 48190",
			"ATTEMPTED request · attempt 2, conflict #907",
			`~     "template": "tmpl-7731",`,
			`~     "template": "tmpl-7732",`,
			`-     "locale": "en",`,
			`+     "cc": "ops@example.com",`,
		} {
			require.Contains(t, v, want, "at %d columns the reveal lacks %q:\n%s", w, want, v)
		}
		if w >= sideBySideWidth {
			require.Regexp(t, `~     "template": "tmpl-7731", +│ ~     "template": "tmpl-7732",`, v, "not side by side:\n%s", v)
			require.Regexp(t, `-     "locale": "en", +│\n`, v, "a removed field does not face a blank:\n%s", v)
		} else {
			require.NotContains(t, v, "│", "stacked at %d columns:\n%s", w, v)
		}
		h.keys("<enter>")
		require.Equal(t, h.m.detail(), h.m.active(), "enter does not go back to the record")
		require.False(t, h.m.screens[screenConflict].(*conflictFlow).shown.ok, "the requests were kept after leaving")
		require.NotContains(t, h.view(), "tmpl-7732", "the requests were kept after leaving")
	}
}

// TestConflictKeysHidden: a record without conflicts does not offer the
// reveal (TestDecideKeysHidden checks a viewer, a read-only context and a
// console without a Decider).
func TestConflictKeysHidden(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 120, 40).keys(openDeploy)
	require.NotContains(t, h.view(), "compare conflict", "offered on a record without conflicts:\n%s", h.view())
	h.keys("c")
	require.Equal(t, h.m.detail(), h.m.active(), "c left the detail for screen %s", h.m.active().id())
	require.EqualValues(t, 0, dec.called("reveal-conflict"), "revealed")
}

// TestConflictHostile: nothing of a request reaches the terminal raw,
// and the paths of keys holding / and ~ are escaped as RFC 6901 says.
func TestConflictHostile(t *testing.T) {
	t.Parallel()
	for _, w := range []int{80, 120} {
		src := newFakeSource()
		dec := newFakeDecider(src)
		dec.requests[907] = hostileRequests
		h := newDecideHarness(t, src, dec, Config{}, w, 400)
		h.keys(compareLatest)
		v := h.view()
		requireNoRaw(t, v)
		for _, want := range []string{"/intent/a~1b", `"\u001b[2J\u0000wiped"`, `user@example.com\u202emoc.live\u009b31m`,
			`"/intent/\u001b]0;pwned\u0007"`, "+ added", "~ changed"} {
			require.Contains(t, v, want, "at %d columns the reveal lacks %q:\n%s", w, want, v)
		}
		require.NotContains(t, v, "/intent/m~0n", "an equal field is listed:\n%s", v)
	}
	// The operator's typed reason and the record's own fields are
	// cleaned too.
	src := newFakeSource()
	src.rows = append(src.rows, readmodel.Row{ID: 48999, Tenant: "acme\u202e", Tool: "send-email", Key: "k\x1b[2J", State: readmodel.StateCompleted,
		Owner: "w\u009b1m", CreatedAt: dbNow.Add(-time.Hour), DBTime: dbNow, Version: 2})
	src.conflicts[48999] = []readmodel.Conflict{{ID: 999, AttemptedAt: dbNow.Add(-time.Minute), Owner: "evil\u202e\x1b[31m", FingerprintTag: "fp:\u2066x"}}
	dec := newFakeDecider(src)
	dec.requests[999] = hostileRequests
	h := newDecideHarness(t, src, dec, Config{}, 120, 400)
	h.keys(":ops id:48999<enter><enter>c")
	requireNoRaw(t, h.view())
	h.send(runeKey("why\u202e"))
	h.keys("<enter>")
	requireNoRaw(t, h.view())
	h.keys("y")
	requireNoRaw(t, h.view())
	require.Contains(t, h.view(), "ATTEMPTED request · attempt 1, conflict #999", "not revealed:\n%s", h.view())
}

// requireNoRaw fails when v holds a character a terminal would act on.
func requireNoRaw(t *testing.T, v string) {
	t.Helper()
	for _, r := range v {
		bad := r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f || termtext.IsBidiControl(r)
		require.False(t, bad, "the view holds U+%04X raw:\n%q", r, v)
	}
}

// largeRequest is a 32 MiB request: a string of 32 MiB, then more fields
// than a side shows.
var largeRequest = sync.OnceValue(func() []byte {
	var b strings.Builder
	b.WriteString(`{"intent":{"blob":"`)
	b.WriteString(strings.Repeat("QUJD", 8<<20))
	b.WriteString(`","rows":[`)
	for i := range conflictSideLines * 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":1,"note":"a row"}`)
	}
	b.WriteString(`]},"tool":"send-email","version":"1"}`)
	return []byte(b.String())
})

// TestConflictLarge: requests of any size are laid out once, bounded,
// and paged: the screen answers at once whatever their size.
func TestConflictLarge(t *testing.T) {
	// Not parallel: it holds a 32 MiB request and its layout. No time is
	// asserted (the machine is shared): what keeps the screen answering is
	// where the work is done, which is what is checked.
	src := newFakeSource()
	dec := newFakeDecider(src)
	big := largeRequest()
	require.GreaterOrEqual(t, len(big), 32<<20, "the request is %d bytes", len(big))
	dec.requests[907] = [2]json.RawMessage{json.RawMessage(fakeEmailRequest), big}
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openEmail + "c<enter>export size<enter>")
	_, cmd := h.m.Update(runeKey("y"))
	// The reveal's command reads and lays the requests out, away from
	// Update (the screen keeps answering meanwhile); the bound is loose.
	start := time.Now()
	answer := cmd()
	t.Logf("the reveal's command took %v", time.Since(start))
	msg, ok := answer.(applyMsg)
	require.True(t, ok, "no reveal under way: %T", answer)
	box, ok := msg.value.(conflictAnswer)
	require.True(t, ok, "the reveal's answer is a %T", msg.value)
	require.Len(t, box.attempted, conflictSideLines+1, "the requests are not laid out by the reveal's command (Update would)")
	// Update, which the screen waits on, takes the laid out answer.
	h.run(func() tea.Msg { return answer })
	v := h.view()
	require.Contains(t, v, "/intent/blob", "the differences are not listed:\n%s", v)
	require.Contains(t, v, "lines 1–", "not paged:\n%s", v)
	lines := len(h.m.screens[screenConflict].(*conflictFlow).shown.lines)
	require.Less(t, lines, 2*conflictSideLines+5000, "%d lines laid out", lines)
	for range 50 {
		h.keys("n")
	}
	h.keys("G")
	v = h.view()
	require.Contains(t, v, "more lines not shown", "the end does not say what was cut:\n%s", v)
	require.Contains(t, v, "more lines not shown. opsdesk conflicts show", "the end does not say how to see it whole:\n%s", v)
	require.Contains(t, v, "48190 --conflict 907 --reveal --reason … -o json prints it", "the end does not say how to see it whole:\n%s", v)
	// Paging moves over the lines laid out once; it lays out nothing.
	for range 20 {
		h.keys("p")
		_ = h.view()
	}
	require.Equal(t, lines, len(h.m.screens[screenConflict].(*conflictFlow).shown.lines), "paging laid the requests out again")
	// A resize lays out again, once.
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	require.Contains(t, h.view(), "lines 1–", "not paged after a resize:\n%s", h.view())
}

// TestConflictResized: requests that fitted scroll once the terminal
// shrinks, stacked.
func TestConflictResized(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	h := newDecideHarness(t, src, newFakeDecider(src), Config{}, 120, 40)
	h.keys(compareLatest)
	require.NotContains(t, h.view(), "lines 1–", "the requests do not fit at 120x40:\n%s", h.view())
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	require.Contains(t, h.view(), "lines 1–", "not paged at 80x24:\n%s", h.view())
	require.Contains(t, h.view(), "pgdn/pgup page", "the footer does not offer paging:\n%s", h.view())
	h.keys("n")
	require.Contains(t, h.view(), "ATTEMPTED request · attempt 2, conflict #907", "n does not page:\n%s", h.view())
}
