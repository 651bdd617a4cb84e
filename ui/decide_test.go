package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// The records the flows act on (see newFakeSource).
const (
	// openDeploy: stuck, external effect of unknown outcome; the lookup
	// finds it (DEP-4711). Its key ends in "ry-7".
	openDeploy = ":ops id:48207<enter><enter>"
	// openCharge: pending with a live lease, external unknown; the
	// lookup does not find it.
	openCharge = ":ops id:48231<enter><enter>"
	// openTicket: stuck, local; no lookup configured.
	openTicket = ":ops id:48213<enter><enter>"
	// openEmail: completed with a stored result and an unreviewed
	// conflicting attempt.
	openEmail = ":ops id:48190<enter><enter>"
)

// TestDecideViews compares every step of the flows with its golden file
// at 80x24 and 120x40 (ASCII), driven through Update with keys, with a
// fake Decider whose role may decide.
func TestDecideViews(t *testing.T) {
	t.Parallel()
	decideGoldens(t, []decideCase{
		{"detail-operator", func(h *harness, _ *fakeDecider) { h.keys(openDeploy) }},
		// One screen to decide on: the record, the evidence, the choice
		// the evidence points at and what it does.
		{"decide", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r") }},
		{"decide-scrolled", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r<pgdown>") }},
		{"decide-live-lease", func(h *harness, _ *fakeDecider) { h.keys(openCharge + "r") }},
		{"decide-asking", func(h *harness, _ *fakeDecider) {
			h.keys(openDeploy)
			h.m.Update(runeKey("r")) // the lookup's command is never run
			h.keys("<enter>")
		}},
		{"decide-no-lookup", func(h *harness, _ *fakeDecider) { h.keys(openTicket + "r") }},
		{"decide-no-lookup-unknown", func(h *harness, dec *fakeDecider) {
			delete(dec.lookups, "deploy-service")
			h.keys(openDeploy + "r")
		}},
		{"decide-no-answer", func(h *harness, dec *fakeDecider) {
			dec.lookups["create-ticket"] = dec.lookups["send-email"]
			h.keys(openTicket + "r")
		}},
		{"decide-not-executed", func(h *harness, _ *fakeDecider) { h.keys(openTicket + "r2") }},
		{"decide-failed", func(h *harness, _ *fakeDecider) { h.keys(openTicket + "r3") }},
		{"decide-defer", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r4") }},
		{"decide-contradicts", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r2") }},
		{"decide-contradicts-enter", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r2<enter>") }},
		{"decide-override", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r2o") }},
		{"reference", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "re") }},
		{"reference-contradicts", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "re<backspace>2<enter>") }},
		{"reference-empty", func(h *harness, _ *fakeDecider) { h.keys(openTicket + "r1<enter><enter>") }},
		{"snooze", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r4<enter>") }},
		{"reason", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r<enter>") }},
		{"reason-required", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r<enter><enter>") }},
		{"confirm", func(h *harness, _ *fakeDecider) {
			h.keys(openDeploy + "r<enter>deployment DEP-4711 is live<enter>")
		}},
		{"confirm-no-lookup", func(h *harness, _ *fakeDecider) { h.keys(openTicket + "r3<enter>queue closed<enter>") }},
		{"confirm-typed", func(h *harness, _ *fakeDecider) {
			h.keys(openDeploy + "r2o<enter>rolled back by hand<enter>")
		}},
		{"confirm-typed-wrong", func(h *harness, _ *fakeDecider) {
			h.keys(openDeploy + "r2o<enter>rolled back by hand<enter>ry-7<enter>")
		}},
		{"result", func(h *harness, _ *fakeDecider) {
			h.keys(openDeploy + "r<enter>deployment DEP-4711 is live<enter>y")
		}},
		// The confirmation says until when the record is out of the queue.
		{"confirm-defer", func(h *harness, _ *fakeDecider) {
			h.keys(openDeploy + "r4<enter><enter>the provider answers in the morning<enter>")
		}},
		{"result-deferred", func(h *harness, _ *fakeDecider) {
			h.keys(openDeploy + "r4<enter><enter>the provider answers in the morning<enter>y")
		}},
		{"result-released", func(h *harness, _ *fakeDecider) {
			h.keys(openTicket + "r2<enter>no ticket in the queue<enter>48213<enter>")
		}},
		{"result-changed", func(h *harness, _ *fakeDecider) {
			h.keys(openDeploy + "r<enter>deployment DEP-4711 is live<enter>")
			changeBehindTheScenes(h.src, 48207)
			h.keys("y")
		}},
		{"detail-decided", func(h *harness, _ *fakeDecider) {
			h.keys(openDeploy + "r2o<enter>rolled back by hand<enter>48207<enter><enter>G")
		}},
		// From the stuck list, r decides on the selected row.
		{"list-reconcile", func(h *harness, _ *fakeDecider) { h.keys(":stuck<enter>jr") }},
		// While the row's record is read: the title names the operation
		// only (no empty identity).
		{"list-reconcile-loading", func(h *harness, _ *fakeDecider) {
			h.keys(":stuck<enter>j")
			h.m.Update(runeKey("r")) // the read's command is never run
		}},
		{"ack-reason", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "a") }},
		{"ack-confirm", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "acaller reused keys; fixed in v2.3<enter>") }},
		{"ack-result", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "acaller reused keys; fixed in v2.3<enter>y") }},
		{"reveal-reason", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "v") }},
		{"reveal-result", func(h *harness, _ *fakeDecider) { h.keys(openEmail + "vcustomer asks what was sent<enter>") }},
		// A 32 MiB result: its start, laid out once, paged, and what was cut.
		{"reveal-large", func(h *harness, dec *fakeDecider) {
			dec.values = map[reconcile.Field][]byte{reconcile.FieldResult: largeValue()}
			h.keys(openEmail + "vexport size<enter>")
		}},
		{"reveal-large-page", func(h *harness, dec *fakeDecider) {
			dec.values = map[reconcile.Field][]byte{reconcile.FieldResult: largeValue()}
			h.keys(openEmail + "vexport size<enter>nn")
		}},
		{"reveal-large-end", func(h *harness, dec *fakeDecider) {
			dec.values = map[reconcile.Field][]byte{reconcile.FieldResult: largeValue()}
			h.keys(openEmail + "vexport size<enter>G")
		}},
		// Waiting for a value, then giving up on it: back on the record at
		// once, the command never answered.
		{"reveal-loading", func(h *harness, _ *fakeDecider) {
			h.keys(openEmail + "vexport size")
			h.m.Update(tea.KeyMsg{Type: tea.KeyEnter}) // the reveal's command is never run
		}},
		{"reveal-cancelled", func(h *harness, _ *fakeDecider) {
			h.keys(openEmail + "vexport size")
			h.m.Update(tea.KeyMsg{Type: tea.KeyEnter})
			h.keys("<esc>")
		}},
		{"help", func(h *harness, _ *fakeDecider) { h.keys(openDeploy + "r?") }},
	})
}

// decideCase is a view of the console with a fake Decider, reached by
// setup.
type decideCase struct {
	name  string
	setup func(h *harness, dec *fakeDecider)
}

// decideGoldens compares each case's view with its golden file.
func decideGoldens(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, c := range cases {
		goldens(t, c.name, func(t *testing.T, w, h int) string {
			src := newFakeSource()
			dec := newFakeDecider(src)
			hs := newDecideHarness(t, src, dec, Config{}, w, h)
			c.setup(hs, dec)
			return hs.view()
		})
	}
}

func runeKey(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

// changeBehindTheScenes completes record id as another person would,
// after the operator read it.
func changeBehindTheScenes(src *fakeSource, id int64) {
	src.mu.Lock()
	defer src.mu.Unlock()
	for i := range src.rows {
		if r := &src.rows[i]; r.ID == id {
			r.State, r.Version, r.CompletedAt, r.UpdatedAt = readmodel.StateCompleted, r.Version+1, dbNow, dbNow
			src.refs[id] = "DEP-4711"
			src.decisions[id] = append(src.decisions[id], readmodel.Decision{AuditSeq: 42, At: dbNow, Role: "bob",
				Action: "decide:completed", Reason: "saw it live in the dashboard", ResultRef: "DEP-4711"})
		}
	}
}

// TestDecideKeysHidden: a viewer (the database says it may not decide),
// a read-only context and a console without a Decider get no r, a or v:
// neither in the footer nor in help, and the keys do nothing.
func TestDecideKeysHidden(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		opts     Config
		viewer   bool
		noDec    bool
		askCaps  bool
		roleNote string
	}{
		{name: "viewer", viewer: true, askCaps: true, roleNote: "you: alice (viewer)"},
		{name: "read-only", opts: Config{ReadOnly: true}},
		{name: "no-decider", noDec: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := newFakeSource()
			dec := newFakeDecider(src)
			dec.caps.Decide = !c.viewer
			var d Decider = dec
			if c.noDec {
				d = nil
			}
			h := newDecideHarness(t, src, d, c.opts, 120, 40)
			got := dec.called("caps") > 0
			require.Equal(t, c.askCaps, got, "capabilities asked: %v, want %v", got, c.askCaps)
			require.False(t, c.roleNote != "" && !strings.Contains(h.view(), c.roleNote), "the status bar does not say %q:\n%s", c.roleNote, h.view())
			for _, open := range []string{openDeploy, openEmail, openCharge} {
				h.keys(open)
				for _, view := range []string{h.view(), h.keys("?").view()} {
					for _, word := range []string{"reconcile", "ack conflicts", "reveal result", "v reveals", "compare conflict", "c compares"} {
						require.NotContains(t, view, word, "%s: %q is offered:\n%s", open, word, view)
					}
				}
				h.keys("<esc>") // close help
				for _, k := range []string{"r", "a", "v", "c"} {
					h.keys(k)
					require.Equal(t, h.m.detail(), h.m.active(), "%s: %s left the detail for screen %s", open, k, h.m.active().id())
				}
			}
			n := dec.called("ask") + dec.called("decide") + dec.called("ack") + dec.called("reveal") + dec.called("reveal-conflict")
			require.EqualValues(t, 0, n, "the decider was called %d times", n)
		})
	}
	// With an operator's role the same keys are offered.
	src := newFakeSource()
	h := newDecideHarness(t, src, newFakeDecider(src), Config{}, 120, 40).keys(openEmail)
	for _, word := range []string{"a ack conflicts", "v reveal result", "c compare conflict"} {
		require.Contains(t, h.view(), word, "an operator is not offered %q:\n%s", word, h.view())
	}
	require.NotContains(t, h.view(), "r reconcile", "reconcile is offered on a completed record:\n%s", h.view())
}

// TestDecideTypedConfirmation: releasing a record whose external effect
// has an unknown outcome, without the lookup saying the provider has no
// such effect, needs the record's operation id typed (the key's end is
// the same for every record of a tool); anything else refuses and
// decides nothing. A release the lookup backs, or of a local effect, is
// a plain yes/no.
func TestDecideTypedConfirmation(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 80, 24)
	h.keys(openDeploy + "r2o<enter>rolled back by hand<enter>")
	require.Equal(t, stepConfirm, h.m.reconcile().sm.step, "not on the typed confirmation:\n%s", h.view())
	require.True(t, h.m.reconcile().sm.typedConfirm(), "not on the typed confirmation:\n%s", h.view())
	// y is a character typed here, not a yes.
	for _, wrong := range []string{"y", "ry-7", "4820", "482070", "48207 ", "048207", "48213"} {
		h.keys(wrong + "<enter>")
		require.Contains(t, flat(h.view()), "that is not this record's operation id: nothing was done", "%q was not refused", wrong)
		require.Equal(t, stepConfirm, h.m.reconcile().sm.step, "%q", wrong)
		require.Zero(t, dec.called("decide"), "%q decided", wrong)
	}
	h.keys("48207<enter>")
	require.EqualValues(t, 1, dec.called("decide"), "the right id did not decide:\n%s", h.view())
	require.Contains(t, h.view(), "Done: confirmed not executed: released")
	p := dec.lastDecided(t)
	require.Equal(t, reconcile.NotExecuted, p.Decision)
	require.True(t, p.Override)
	require.False(t, p.Force)
	require.EqualValues(t, 3, p.ExpectVersion)
	require.Equal(t, reconcile.LookupFound, p.Evidence.Lookup)
	require.Equal(t, "rolled back by hand", p.Reason)
	// Without a lookup, the same release is typed too.
	delete(dec.lookups, "charge-card")
	h.keys("<enter>" + openCharge + "r2<enter>the provider has no such charge<enter>")
	require.True(t, h.m.reconcile().sm.typedConfirm(), "a release without evidence is not typed:\n%s", h.view())
	h.keys("<esc><esc><esc>")
	// A local record is released with a plain yes/no.
	h.keys(openTicket + "r2<enter>no ticket in the queue<enter>")
	require.False(t, h.m.reconcile().sm.typedConfirm(), "a local record asks for typing:\n%s", h.view())
	require.Contains(t, h.view(), "Apply? y yes")
}

// TestDecideBackedRelease: when the provider's lookup says it has no
// such effect, releasing agrees with it: a plain yes/no, still No by
// default.
func TestDecideBackedRelease(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	dec.lookups["deploy-service"] = dec.lookups["charge-card"] // not found
	h := newDecideHarness(t, src, dec, Config{}, 80, 24)
	h.keys(openDeploy + "r")
	require.Equal(t, reconcile.NotExecuted, h.m.reconcile().decision(), "the evidence does not point at not executed")
	h.keys("<enter>the provider has no such deployment<enter>")
	require.False(t, h.m.reconcile().sm.typedConfirm())
	require.Contains(t, h.view(), "Apply? y yes · N no")
	h.keys("<enter>")
	require.Zero(t, dec.called("decide"), "enter applied")
	h.keys("<enter>y")
	p := dec.lastDecided(t)
	require.Equal(t, reconcile.NotExecuted, p.Decision)
	require.False(t, p.Override)
	require.Equal(t, reconcile.LookupNotFound, p.Evidence.Lookup)
}

// TestDecideConfirmDefaultsToNo: enter and n on the confirmation decide
// nothing and go back a step; only y applies.
func TestDecideConfirmDefaultsToNo(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 80, 24)
	h.keys(openTicket + "r3<enter>duplicate ticket<enter>")
	for _, no := range []string{"<enter>", "n", "<esc>"} {
		require.Equal(t, stepConfirm, h.m.reconcile().sm.step, "not on the confirmation:\n%s", h.view())
		h.keys(no)
		require.Equal(t, stepReason, h.m.reconcile().sm.step, "%s on the confirmation: step %s, %d decisions", no, h.m.reconcile().sm.step, dec.called("decide"))
		require.EqualValues(t, 0, dec.called("decide"), "%s on the confirmation: step %s, %d decisions", no, h.m.reconcile().sm.step, dec.called("decide"))
		require.Equal(t, "duplicate ticket", h.m.reconcile().sm.reason.Value(), "the reason was lost: %q", h.m.reconcile().sm.reason.Value())
		h.keys("<enter>")
	}
	h.keys("y")
	p := dec.lastDecided(t)
	require.Equal(t, reconcile.Failed, p.Decision, "decided %+v", p)
	require.Equal(t, "duplicate ticket", p.Reason, "decided %+v", p)
}

// TestDecideChanged: a record changed after the operator read it is
// refused with "changed since you looked", and the flow shows what
// changed; back on the detail the record is the new one.
func TestDecideChanged(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openDeploy + "r<enter>deployment DEP-4711 is live<enter>")
	changeBehindTheScenes(src, 48207)
	h.keys("y")
	v := h.view()
	for _, want := range []string{
		"✗ Refused: changed since you looked: now version 4 (completed), you saw version 3",
		"record globex#42: the refusal is audited",
		"Changed since you looked",
		"state        ⚠ stuck → ✓ completed",
		"version      3 → 4",
		"result ref   - → DEP-4711",
		"decided      ✓ confirmed completed (result ref DEP-4711) by role bob",
	} {
		require.Contains(t, v, want, "the refusal lacks %q:\n%s", want, v)
	}
	p := dec.lastDecided(t)
	require.EqualValues(t, 3, p.ExpectVersion, "the decision expected version %d, want the version shown (3)", p.ExpectVersion)
	h.keys("<enter>")
	require.Equal(t, h.m.detail(), h.m.active(), "back on the detail, the record is not the new one:\n%s", h.view())
	require.EqualValues(t, 4, h.m.detail().d.Version, "back on the detail, the record is not the new one:\n%s", h.view())
	require.Contains(t, h.view(), "✓ completed", "back on the detail, the record is not the new one:\n%s", h.view())
}

// TestDecideStaleAnswers: a lookup answer for an earlier flow (another
// record), or an earlier ask of the same flow, is dropped; so is a late
// capabilities answer.
func TestDecideStaleAnswers(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openDeploy)
	_, first := h.m.Update(runeKey("r")) // deploy-service: found DEP-4711, held
	h.keys("<esc>" + openCharge)
	_, second := h.m.Update(runeKey("r")) // charge-card: not found, held
	h.keys("<enter>")
	require.Contains(t, h.view(), "asking the provider…", "no spinner while asking:\n%s", h.view())
	h.run(first)
	v := h.view()
	require.NotContains(t, v, "DEP-4711", "another record's lookup answer was shown:\n%s", v)
	require.Contains(t, v, "asking the provider…", "another record's lookup answer was shown:\n%s", v)
	h.run(second)
	v = h.view()
	require.Contains(t, v, "not found: the provider has no such effect", "the flow's own answer was not shown:\n%s", v)
	// The same record in two flows: only the last flow's ask counts,
	// whenever the first one's answer arrives.
	h.keys("<esc>")
	_, earlier := h.m.Update(runeKey("r"))
	h.keys("<esc>")
	_, later := h.m.Update(runeKey("r"))
	h.keys("<enter>")
	dec.lookups["charge-card"] = reconcile.Answer{Evidence: reconcile.Evidence{Lookup: reconcile.LookupNotFound, Summary: "HTTP 404 again"}}
	h.run(later)
	dec.lookups["charge-card"] = dec.lookups["deploy-service"]
	h.run(earlier)
	v = h.view()
	require.Contains(t, v, "HTTP 404 again", "an earlier flow's answer replaced the last one:\n%s", v)
	require.NotContains(t, v, "DEP-4711", "an earlier flow's answer replaced the last one:\n%s", v)
	// A capabilities answer to an earlier question changes nothing.
	h.send(capsMsg{seq: h.m.capsSeq - 1, caps: reconcile.Capabilities{Role: "alice"}})
	require.True(t, h.m.canDecide(), "a stale capabilities answer withdrew the writes")
}

// TestDecideSteps: esc goes one step back, keeping what was entered; at
// the first step it returns to the detail; q cancels the flow; ctrl+c
// quits even while typing.
func TestDecideSteps(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 80, 24)
	h.keys(openDeploy + "re<enter>because")
	for i, st := range []step{stepReason, stepReference, stepDecide} {
		require.Equal(t, st, h.m.reconcile().sm.step, "after %d esc", i)
		h.keys("<esc>")
	}
	require.Equal(t, h.m.detail(), h.m.active(), "esc at the first step did not return to the detail")
	h.keys("r4<enter><enter>")
	require.Equal(t, stepReason, h.m.reconcile().sm.step)
	require.Equal(t, "", h.m.reconcile().sm.reason.Value(), "a new flow kept the old reason")
	h.keys("<esc><esc>q")
	require.Equal(t, h.m.detail(), h.m.active(), "q did not cancel the flow")
	require.Zero(t, dec.called("decide"), "q did not cancel the flow")
	h.keys("r4<enter><enter>typing q")
	require.False(t, h.quit, "q typed into the reason quit")
	require.Equal(t, "typing q", h.m.reconcile().sm.reason.Value(), "q typed into the reason was lost")
	// In a flow the first ctrl+c says what was done (nothing), keeping the
	// reason; the second quits.
	h.send(tea.KeyMsg{Type: tea.KeyCtrlC})
	require.False(t, h.quit, "the first ctrl+c in a flow quit")
	require.Contains(t, h.view(), "nothing was decided on operation")
	require.Equal(t, "typing q", h.m.reconcile().sm.reason.Value(), "ctrl+c lost the reason")
	h.send(tea.KeyMsg{Type: tea.KeyCtrlC})
	require.True(t, h.quit, "ctrl+c twice did not quit while typing")
	require.Zero(t, dec.called("decide"))
}

// TestDecideEachKind: each decision reaches the Decider with the version
// shown, the lookup's evidence, force over a live lease, override only
// when set and contradicting, the reference or the snooze time; back on
// the detail the timeline says who decided, when and why.
func TestDecideEachKind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, open, keys string
		want             reconcile.DecideParams
		state            readmodel.State
		timeline         string
	}{
		// The lookup's answer: r, enter, the reason, enter, y.
		{"completed", openDeploy, "<enter>deployment DEP-4711 is live<enter>y",
			reconcile.DecideParams{OperationID: 48207, Decision: reconcile.Completed, ExpectVersion: 3, ResultRef: "DEP-4711",
				Reason: "deployment DEP-4711 is live"}, readmodel.StateCompleted,
			"✓ confirmed completed (result ref DEP-4711) by role alice (claims to be \"Alice Example\") · audit globex#42 · reason: deployment DEP-4711 is live"},
		// Another reference than the lookup's contradicts it: override.
		{"completed-edited-ref", openDeploy, "e<backspace>2<enter><esc>o<enter>the provider shows DEP-4712<enter>y",
			reconcile.DecideParams{OperationID: 48207, Decision: reconcile.Completed, ExpectVersion: 3, ResultRef: "DEP-4712",
				Override: true, Reason: "the provider shows DEP-4712"}, readmodel.StateCompleted, "(result ref DEP-4712)"},
		{"not-executed-local", openTicket, "2<enter>no ticket in the queue<enter>y",
			reconcile.DecideParams{OperationID: 48213, Decision: reconcile.NotExecuted, ExpectVersion: 2,
				Reason: "no ticket in the queue"}, readmodel.StateReleased, "○ confirmed not executed: released by role alice"},
		{"failed", openTicket, "3<enter>queue closed<enter>y",
			reconcile.DecideParams{OperationID: 48213, Decision: reconcile.Failed, ExpectVersion: 2, Reason: "queue closed"},
			readmodel.StateRejected, "✗ marked failed by role alice"},
		{"defer", openTicket, "4<enter><backspace><backspace>90m<enter>waiting for the queue owner<enter>y",
			reconcile.DecideParams{OperationID: 48213, Decision: reconcile.Defer, ExpectVersion: 2, Reason: "waiting for the queue owner",
				SnoozeFor: 90 * time.Minute}, readmodel.StateDeferred, "deferred until 04:42:09 by role alice"},
		// The lookup says not found: releasing agrees with it.
		{"forced-live-lease", openCharge, "<enter>the provider has no such charge<enter>y",
			reconcile.DecideParams{OperationID: 48231, Decision: reconcile.NotExecuted, ExpectVersion: 2, Force: true,
				Reason: "the provider has no such charge"}, readmodel.StateReleased, "· forced over a live lease"},
		{"override", openCharge, "1o<enter>CH-1<enter>charge visible in the dashboard<enter>y",
			reconcile.DecideParams{OperationID: 48231, Decision: reconcile.Completed, ExpectVersion: 2, Force: true, Override: true,
				ResultRef: "CH-1", Reason: "charge visible in the dashboard"}, readmodel.StateCompleted, "· overriding the lookup"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := newFakeSource()
			dec := newFakeDecider(src)
			h := newDecideHarness(t, src, dec, Config{}, 120, 40)
			h.keys(c.open + "r" + c.keys)
			require.Contains(t, h.view(), "✓ Done: ", "not done:\n%s", h.view())
			got := dec.lastDecided(t)
			want := c.want
			want.Evidence = dec.lookups[map[int64]string{48207: "deploy-service", 48231: "charge-card"}[want.OperationID]].Evidence
			if want.OperationID == 48213 { // create-ticket has no lookup
				want.Evidence = reconcile.NoLookupEvidence("create-ticket")
			}
			require.True(t, got.SnoozeUntil.Equal(want.SnoozeUntil), "snooze until %v, want %v", got.SnoozeUntil, want.SnoozeUntil)
			got.SnoozeUntil, want.SnoozeUntil = time.Time{}, time.Time{}
			require.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "decided\n%+v\nwant\n%+v", got, want)
			h.keys("<enter>")
			require.Equal(t, h.m.detail(), h.m.active(), "back on the detail: state %s, want %s:\n%s", h.m.detail().d.State, c.state, h.view())
			require.Equal(t, c.state, h.m.detail().d.State, "back on the detail: state %s, want %s:\n%s", h.m.detail().d.State, c.state, h.view())
			h.keys("G")
			v := flat(h.view())
			require.Contains(t, v, c.timeline, "the timeline lacks %q:\n%s", c.timeline, h.view())
		})
	}
}

// TestDecideReveal: the value shows only once Reveal returned, and is
// forgotten when the operator leaves; a reason is required first.
func TestDecideReveal(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openEmail + "v<enter>")
	require.EqualValues(t, 0, dec.called("reveal"), "revealed without a reason:\n%s", h.view())
	require.Contains(t, h.view(), "a reason is required", "revealed without a reason:\n%s", h.view())
	h.keys("customer asks")
	_, cmd := h.m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	v := h.view()
	require.NotContains(t, v, "msg_8f3a21\",", "the value shows before Reveal returned:\n%s", v)
	require.NotContains(t, v, "user-8812@example.com", "the value shows before Reveal returned:\n%s", v)
	require.Contains(t, v, "asking the database…", "the value shows before Reveal returned:\n%s", v)
	h.run(cmd)
	v = h.view()
	require.Contains(t, v, `"to": "user-8812@example.com"`, "the value is not shown after the audit:\n%s", v)
	require.Contains(t, v, "record globex#42, committed", "the value is not shown after the audit:\n%s", v)
	h.keys("q")
	require.False(t, h.m.reveal().revealed.ok, "the value was kept after leaving")
	require.NotContains(t, h.view(), "user-8812@example.com", "the value was kept after leaving")
	require.Equal(t, "customer asks", dec.reasons[0], "revealed with reason %q", dec.reasons[0])

	// The intent, the same way.
	h.keys("iwhich template<enter>")
	v = h.view()
	require.Contains(t, v, "Stored intent", "the intent is not shown after the audit:\n%s", v)
	require.Contains(t, v, `"template": "tmpl-7731"`, "the intent is not shown after the audit:\n%s", v)
	h.keys("q")
	require.NotContains(t, h.view(), "tmpl-7731", "the intent was kept after leaving")
}

// largeValue is a 32 MiB stored result: an export with a long word,
// wide characters, runs of spaces and escapes, then rows and rows.
var largeValue = sync.OnceValue(func() []byte {
	var b strings.Builder
	b.WriteString(`{"report":"nightly export","blob":"`)
	b.WriteString(strings.Repeat("QUJD", 60))
	b.WriteString(`","title":"鍵の一覧  two spaces \u001b[2J","rows":[`)
	for i := 0; b.Len() < 32<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"customer":"acme","tags":[],"note":"row %d"}`, i, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
})

// TestNoAnswerWording: when the database does not answer a write, a
// decision says it may have been applied; a reveal, which changes no
// record, says nothing was shown.
func TestNoAnswerWording(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, keys, want, notWant string }{
		{"decision", openDeploy + "r<enter>deployment DEP-4711 is live<enter>y",
			"did not answer the decision", "Nothing was shown"},
		{"reveal", openEmail + "vexport size<enter>", "did not answer the reveal", "may or may not have been applied"},
		{"conflict", compareLatest, "did not answer the reveal", "may or may not have been applied"},
	} {
		src := newFakeSource()
		dec := newFakeDecider(src)
		dec.lost = errors.New("conn closed: unexpected EOF")
		h := newDecideHarness(t, src, dec, Config{}, 120, 40)
		h.keys(c.keys)
		v := flat(h.view())
		require.Contains(t, v, c.want, "%s:\n%s", c.name, h.view())
		require.Contains(t, v, "unexpected EOF", "%s:\n%s", c.name, h.view())
		require.NotContains(t, v, c.notWant, "%s:\n%s", c.name, h.view())
	}
}

// TestDecideRevealLarge: a value of any size is fetched up to
// revealBytes, laid out once and paged; every line fits the screen.
func TestDecideRevealLarge(t *testing.T) {
	// Not parallel: it holds a 32 MiB value and its layout. No time is
	// asserted (the machine is shared): the bounds on what is laid out are.
	src := newFakeSource()
	dec := newFakeDecider(src)
	dec.values = map[reconcile.Field][]byte{reconcile.FieldResult: largeValue()}
	h := newDecideHarness(t, src, dec, Config{}, 80, 24)
	h.keys(openEmail + "vexport size<enter>")
	v := h.view()
	require.Contains(t, v, `"report": "nightly export",`, "the large value's start is not shown, paged:\n%s", v)
	require.Contains(t, v, "lines 1–", "the large value's start is not shown, paged:\n%s", v)
	lines := len(h.m.reveal().revealed.lines)
	require.False(t, lines < 1000, "%d lines laid out for a value cut to %d bytes", lines, revealBytes)
	require.False(t, lines > 10000, "%d lines laid out for a value cut to %d bytes", lines, revealBytes)
	// Paging to the end and back lays nothing out again.
	for range 50 {
		h.keys("n")
	}
	h.keys("G")
	v = h.view()
	require.Contains(t, v, "more bytes not shown", "the end does not say what was cut:\n%s", v)
	require.Contains(t, v, "opsdesk ops reveal 48190 --field result", "the end does not say what was cut:\n%s", v)
	h.keys("g")
	v = h.view()
	require.Contains(t, v, "lines 1–", "g does not go back to the start:\n%s", v)
	// The value is hidden again when the operator leaves.
	h.keys("<enter>")
	require.False(t, h.m.reveal().revealed.ok, "the value was kept after leaving")
	require.NotContains(t, h.view(), "nightly export", "the value was kept after leaving")
}

// TestDecideRevealCancel: esc while a reveal is fetched leaves at once
// and cancels the request; its answer, when it comes, shows nothing.
func TestDecideRevealCancel(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	dec.slowReveal = make(chan struct{})
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openEmail + "vneed the message id")
	_, cmd := h.m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	answered := make(chan tea.Msg, 1)
	go func() { answered <- cmd() }()
	select {
	case <-dec.slowReveal: // the audit committed; the value is on its way
	case <-time.After(10 * time.Second):
		t.Fatal("the reveal was never asked for")
	}
	v := h.view()
	require.Contains(t, v, "asking the database…", "waiting for the value:\n%s", v)
	require.Contains(t, v, "esc cancel the reveal", "waiting for the value:\n%s", v)
	h.keys("<esc>")
	v = h.view()
	require.Equal(t, h.m.detail(), h.m.active(), "esc did not leave at once:\n%s", v)
	require.Contains(t, v, "reveal cancelled, nothing shown", "esc did not leave at once:\n%s", v)
	var msg tea.Msg
	select {
	case msg = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the reveal's request was not cancelled")
	}
	a, ok := msg.(applyMsg)
	require.True(t, ok, "the reveal's request ended with %#v, want it cancelled", msg)
	require.True(t, errors.Is(a.err, context.Canceled), "the reveal's request ended with %#v, want it cancelled", msg)
	h.send(msg)
	require.Equal(t, h.m.detail(), h.m.active(), "the late answer was shown:\n%s", h.view())
	require.False(t, h.m.reveal().revealed.ok, "the late answer was shown:\n%s", h.view())
	require.NotContains(t, h.view(), "Stored result", "the late answer was shown:\n%s", h.view())
}

// TestIndentJSON: the start of a value is laid out as json.Indent lays
// out the whole.
func TestIndentJSON(t *testing.T) {
	t.Parallel()
	for _, js := range []string{
		`{"a":1,"b":[1,2,{"c":null}],"d":{},"e":[],"f":"x,y:{[\"]}"}`,
		`{"charge_id": "ch_1", "amount": 100, "nested": {"k": [true, false]}}`,
		`[]`, `"plain"`, `12.5`, `[{"a":[[]]}]`,
	} {
		var want bytes.Buffer
		require.NoError(t, json.Indent(&want, []byte(js), "", "  "))
		got := indentJSON([]byte(js))
		require.Equal(t, want.String(), got, "%s:\n%s\nwant\n%s", js, got, want.String())
	}
	// A cut value: no error, the same layout as far as it goes.
	got := indentJSON([]byte(`{"a":[1,{"b":"x,`))
	require.Equal(t, "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"x,", got, "cut value laid out as %q", got)
}

// TestHardWrap keeps every character and fits every line, in one pass.
func TestHardWrap(t *testing.T) {
	// Not parallel: it bounds a time, which other tests running beside
	// it on a small machine would stretch.
	for _, c := range []struct {
		s    string
		w    int
		want []string
	}{
		{"abcdef", 4, []string{"abcd", "ef"}},
		{"a  b", 2, []string{"a ", " b"}},
		{"鍵鍵鍵", 5, []string{"鍵鍵", "鍵"}},
		{"éé", 1, []string{"é", "é"}},
		{"", 3, []string{""}},
	} {
		got := hardWrap(c.s, c.w)
		require.Equal(t, fmt.Sprint(c.want), fmt.Sprint(got), "hardWrap(%q, %d) = %q, want %q", c.s, c.w, got, c.want)
	}
	long := strings.Repeat("鍵", 1<<20)
	lines := hardWrap(long, 77)
	require.Equal(t, long, strings.Join(lines, ""), "hardWrap lost characters or overfilled a line (%d cells)", width(lines[0]))
	require.EqualValues(t, 76, width(lines[0]), "hardWrap lost characters or overfilled a line (%d cells)", width(lines[0]))
}

// TestDecideAck: acknowledging conflicts asks a reason and a yes, then
// the detail shows them reviewed and the key is no longer offered.
func TestDecideAck(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openEmail + "acaller bug<enter>y<enter>")
	require.EqualValues(t, 1, dec.called("ack"), "acked %v with %v", dec.acked, dec.reasons)
	require.EqualValues(t, 48190, dec.acked[0], "acked %v with %v", dec.acked, dec.reasons)
	require.Equal(t, "caller bug", dec.reasons[0], "acked %v with %v", dec.acked, dec.reasons)
	v := h.view()
	require.Contains(t, v, "2 conflicting attempts, all reviewed", "the detail after the acknowledgement:\n%s", v)
	require.NotContains(t, v, "a ack conflicts", "the detail after the acknowledgement:\n%s", v)
}

// TestDecideCapabilitiesLater: a role whose capabilities cannot be read
// at first gets no writes; once they are read (at a refresh), it does.
func TestDecideCapabilitiesLater(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	dec.capsErr = errDown
	h := newDecideHarness(t, src, dec, Config{}, 120, 40).keys(openDeploy)
	require.NotContains(t, h.view(), "r reconcile", "reconcile is offered before the role's capabilities are known")
	dec.mu.Lock()
	dec.capsErr = nil
	dec.mu.Unlock()
	h.send(h.lastTick())
	require.Contains(t, h.view(), "r reconcile", "reconcile is not offered once the capabilities are known:\n%s", h.view())
	asked := dec.called("caps")
	h.send(h.lastTick())
	require.Equal(t, asked, dec.called("caps"), "the capabilities are asked again once known")
}

// TestFlowReconcile runs a reconciliation in a real Bubble Tea program,
// from the stuck list, with the lookup in a command: the decision the
// lookup supports is r, enter, the reason, enter and y (4 keys and the
// reason), and the list says the record left.
func TestFlowReconcile(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	tm := teatest.NewTestModel(t, New(src, Config{Context: "prod-eu", NoColor: true, Decider: dec}), teatest.WithInitialTermSize(120, 40))
	wait := (&screenLog{tm: tm}).wait(t)
	wait("Needs attention")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) // the stuck tile
	wait("48207  globex")
	tm.Type("j")
	wait("r reconcile")
	tm.Type("r") // 1
	wait("Reconcile operation 48207")
	wait("found (reference DEP-4711)")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) // 2
	wait("Reason for deciding completed")
	tm.Type("deployment is live")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) // 3
	wait("Apply?")
	tm.Type("y") // 4
	wait("Done: confirmed completed")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("48207 left this page")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
	require.Equal(t, final.list(), final.active(), "ended on screen %s", final.active().id())
	p := dec.lastDecided(t)
	require.Equal(t, reconcile.Completed, p.Decision)
	require.Equal(t, "DEP-4711", p.ResultRef)
	require.EqualValues(t, 3, p.ExpectVersion)
}

// TestDecideScrollsAtAnySize: at 60x20 every text a decision depends on
// (the runbook last) can be read with pgdn, on every step, and every
// frame fits.
func TestDecideScrollsAtAnySize(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	dec.runbooks["deploy-service"] += "\nEscalate to #deploys when the dashboard disagrees with the lookup."
	h := newDecideHarness(t, src, dec, Config{}, 60, 20)
	reads := func(want string) {
		t.Helper()
		for range 20 {
			v := h.view()
			checkFrame(t, v, 60, 20)
			if strings.Contains(flat(v), want) {
				return
			}
			h.keys("<pgdown>")
		}
		require.Fail(t, "never shown", "%q:\n%s", want, h.view())
	}
	h.keys(openDeploy + "r")
	reads("Escalate to #deploys when the dashboard disagrees with the lookup.")
	h.keys("<pgup><pgup><pgup><pgup><pgup>")
	require.Contains(t, h.view(), "record ", "pgup does not go back to the top")
	h.keys("2o<enter>")
	reads("Reason (required")
	h.keys("rolled back by hand, the deployment is gone from every region<enter>")
	reads("recorded")
	reads("type this record's operation id")
	h.keys("48207<enter>")
	require.Contains(t, h.view(), "Done: confirmed not executed")
}
