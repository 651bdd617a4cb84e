package ui

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// decideDeploy decides the deploy record completed, as the lookup says.
const decideDeploy = openDeploy + "r<enter>deployment DEP-4711 is live<enter>y"

var errStalled = errors.New("conn closed: unexpected EOF")

// ambiguousCases are the answers to a decision the database did not
// answer, once the record is read again.
var ambiguousCases = []decideCase{
	// It had not been applied: the record is at the version expected.
	{"result-not-applied", func(h *harness, dec *fakeDecider) {
		dec.lost = errStalled
		h.keys(decideDeploy)
	}},
	// It had been: the record shows the decision and its audit record.
	{"result-applied-unanswered", func(h *harness, dec *fakeDecider) {
		dec.lostApplied = errStalled
		h.keys(decideDeploy)
	}},
	// The record could not be read again either: it is read again when
	// the database answers.
	{"result-unknown", func(h *harness, dec *fakeDecider) {
		dec.lost = errStalled
		h.keys(openDeploy + "r<enter>deployment DEP-4711 is live<enter>")
		h.src.setDown(true)
		h.keys("y")
	}},
	// Someone else decided meanwhile: not applied, and what changed.
	{"result-not-applied-changed", func(h *harness, dec *fakeDecider) {
		dec.lost = errStalled
		h.keys(openDeploy + "r<enter>deployment DEP-4711 is live<enter>")
		h.src.setDown(true)
		h.keys("y")
		changeBehindTheScenes(h.src, 48207)
		h.src.setDown(false)
		h.send(h.lastTick())
	}},
}

func TestAmbiguousViews(t *testing.T) {
	t.Parallel()
	decideGoldens(t, ambiguousCases)
}

// TestAmbiguousFindsOut: a decision the database did not answer is
// followed at once by a read of the record, which says applied (with
// the audit record) or not applied, never "may or may not" once it could
// read; a read that fails is made again when the database answers.
func TestAmbiguousFindsOut(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	dec.lost = errStalled
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(decideDeploy)
	v := flat(h.view())
	require.Contains(t, v, "did not answer the decision", "%s", h.view())
	require.Contains(t, v, "Not applied: the record is as you saw it", "%s", h.view())
	require.Contains(t, v, "no record of this decision", "%s", h.view())
	require.NotContains(t, v, "may or may not", "%s", h.view())
	require.Equal(t, 2, src.called("get"), "the record was not read again at once")
	require.Contains(t, v, "go back to the record (enter)", "%s", h.view())

	// Decided from a list row, enter goes back to the list, and the
	// result says so.
	src = newFakeSource()
	dec = newFakeDecider(src)
	dec.lost = errStalled
	h = newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(":ops id:48207<enter>r<enter>deployment DEP-4711 is live<enter>y")
	v = flat(h.view())
	require.Contains(t, v, "Not applied: the record is as you saw it", "%s", h.view())
	require.Contains(t, v, "go back to the list (enter)", "%s", h.view())
	require.NotContains(t, v, "back to the record", "%s", h.view())
	h.keys("<enter>")
	require.Equal(t, screenList, h.m.active().id())

	src = newFakeSource()
	dec = newFakeDecider(src)
	dec.lostApplied = errStalled
	h = newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(decideDeploy)
	v = flat(h.view())
	require.Contains(t, v, "Applied: the record shows this decision", "%s", h.view())
	require.Contains(t, v, "now ✓ completed · version 4", "%s", h.view())
	require.Contains(t, v, "record globex#42, committed", "%s", h.view())
	require.NotContains(t, v, "may or may not", "%s", h.view())

	// The read fails too: it is read again when the database answers,
	// and the decision that committed meanwhile is found.
	src = newFakeSource()
	dec = newFakeDecider(src)
	dec.lostApplied = errStalled
	h = newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openDeploy + "r<enter>deployment DEP-4711 is live<enter>")
	src.setDown(true)
	h.keys("y")
	v = flat(h.view())
	require.Contains(t, v, "Could not read the record again", "%s", h.view())
	require.NotContains(t, v, "dial tcp", "the driver's words on the screen (E has them):\n%s", h.view())
	require.Contains(t, v, "may or may not have been applied", "%s", h.view())
	require.Contains(t, v, "database unreachable", "the message line does not say the database is away:\n%s", h.view())
	h.send(h.lastTick())
	require.Contains(t, flat(h.view()), "Could not read the record again", "%s", h.view())
	src.setDown(false)
	h.send(h.lastTick())
	v = flat(h.view())
	require.Contains(t, v, "Applied: the record shows this decision", "not read again when the database answered:\n%s", h.view())
	require.NotContains(t, v, "database unreachable", "%s", h.view())
	// enter goes back, as on any result.
	h.keys("<enter>")
	require.Equal(t, screenDetail, h.m.active().id())
}

// TestAmbiguousInterrupt: ctrl+c on the result of a decision the
// database did not answer says what the record read again told, and a
// quit before it could be read leaves the terminal a word on it.
func TestAmbiguousInterrupt(t *testing.T) {
	t.Parallel()
	src := newFakeSource()
	dec := newFakeDecider(src)
	dec.lostApplied = errStalled
	h := newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(decideDeploy + "<ctrl+c>")
	require.Contains(t, flat(h.view()), "operation 48207: no answer, then read again: applied, audit record globex#42", "%s", h.view())
	require.Empty(t, h.m.exitReport(0), "a decision found applied left a word at exit")

	src = newFakeSource()
	dec = newFakeDecider(src)
	dec.lost = errStalled
	h = newDecideHarness(t, src, dec, Config{}, 120, 40)
	h.keys(openDeploy + "r<enter>deployment DEP-4711 is live<enter>")
	src.setDown(true)
	h.keys("y<ctrl+c>")
	require.Contains(t, flat(h.view()), "not read again yet: it may or may not have been applied", "%s", h.view())
	require.Contains(t, h.m.exitReport(0), "it may or may not have been applied; opsdesk ops show 48207 says which")
}
