package ui

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// noteRequest is a create-note request of tenant acme.
func noteRequest(key, intent string) ops.Request {
	return ops.Request{Identity: opsmodel.Identity{Tenant: "acme", Tool: "create-note", Key: key}, Version: "1", Intent: json.RawMessage(intent)}
}

func writeNote(context.Context, ops.Attempt) (string, error) { return "noted", nil }

// noteConflict has the library create note key with intent original, then
// again with intent attempted: a conflict. It returns the service's store
// (requests up to 2 MiB) and the conflict. An external effect (DoExternal,
// not DoTx: the ui package's tests do not import pgx either) whose
// provider is idempotent.
func noteConflict(t *testing.T, d *dbtest.DB, key, original, attempted string) (*ops.Store, *ops.IntentConflictError) {
	t.Helper()
	store, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"create-note": {Effect: opsmodel.EffectIdempotentProvider}},
		Owner: "worker-1", MaxIntentBytes: 2 << 20})
	require.NoError(t, err)
	_, err = ops.DoExternal(t.Context(), store, noteRequest(key, original), writeNote)
	require.NoError(t, err)
	_, err = ops.DoExternal(t.Context(), store, noteRequest(key, attempted), writeNote)
	var conflict *ops.IntentConflictError
	require.ErrorAs(t, err, &conflict)
	return store, conflict
}

// TestConflictRevealRealDatabase makes a real conflict with the library
// (the same key twice, the request changed, hostile values and a 1 MiB
// one) and reveals it from the console as an operator's own login: the
// differences shown are the store's, nothing reaches the terminal raw,
// and the reveal's audit record is committed with the operator's role and
// reason. A viewer is not offered it, and the database refuses it anyway.
func TestConflictRevealRealDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	const key = "ord/7~1"
	big := strings.Repeat("QUJD", 256<<10) // 1 MiB
	store, conflict := noteConflict(t, d, key, `{"a/b":1,"big":"`+big+`","a~n":"\u001b[2J","to":"user@example.com"}`,
		`{"a/b":2,"big":"`+big+`x","a~n":"\u001b[2J","to":"user@example.com`+"\u202e"+`moc.live\u009b","new":true}`)
	// The store refuses a NUL in a request: what the console could be
	// shown stops there (the fake's tests show \u0000 escaped).
	_, err := ops.DoExternal(ctx, store, noteRequest(key, `{"a/b":3,"nul":"\u0000"}`), writeNote)
	require.ErrorIs(t, err, ops.ErrInvalidRequest)

	operator := dbtest.NewPerson(t, d, "operator", "*")
	h := newSourceHarness(t, storeview.New(operator.Pool, storeview.Config{StatementTimeout: 5 * time.Second}),
		Config{Context: "db", Decider: &desk.Desk{Pool: operator.Pool, DisplayName: "Test Operator"}}, 120, 60)
	require.True(t, h.m.canDecide(), "the operator's capabilities: %+v", h.m.caps)
	h.keys(":key acme/create-note/" + key + "<enter>")
	require.Contains(t, h.view(), "c compare conflict", "the conflicted record does not offer the reveal:\n%s", h.view())
	h.keys("c")
	require.Contains(t, h.view(), "Why do you need to see conflicting attempt 1 (conflict #", "one attempt: straight to the reason:\n%s", h.view())
	h.keys(" <enter>")
	require.Contains(t, flat(h.view()), "a reason is required", "a blank reason went on:\n%s", h.view())
	h.keys("caller sent a second note<enter>y")
	v := h.view()
	requireNoRaw(t, v)
	for _, want := range []string{
		"4 differing fields",
		"~ changed  /intent/a~1b ",
		"~ changed  /intent/big ",
		"… (1048578 bytes) → \"QUJD", // the 1 MiB value, cut in the list
		`~ changed  /intent/to `,
		`"user@example.com\u202emoc.live\u009b"`,
		"+ added    /intent/new ",
		`"a~n": "\u001b[2J",`,
		"ORIGINAL request · operation ",
		"ATTEMPTED request · attempt 1, conflict #",
		"lines 1–",
	} {
		require.Contains(t, v, want, "the reveal lacks %q:\n%s", want, v)
	}
	require.NotContains(t, v, "/intent/a~0n", "an equal field is listed as differing:\n%s", v)
	// The audit record, committed before the requests were read.
	var role, action, outcome, reason string
	var seq int64
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT role, action, outcome, reason, seq FROM opsdesk.audit
WHERE tenant = 'acme' AND action = 'reveal:conflict' ORDER BY seq DESC LIMIT 1`).Scan(&role, &action, &outcome, &reason, &seq))
	require.Equal(t, []string{operator.Role, "reveal:conflict", "succeeded", "caller sent a second note"}, []string{role, action, outcome, reason})
	require.Contains(t, v, "record acme#"+strconv.FormatInt(seq, 10)+", committed", "the audit sequence shown is not the reveal's:\n%s", v)
	// Narrow: stacked, scrolled to the attempted request.
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	require.NotContains(t, h.view(), "│", "not stacked at 80 columns:\n%s", h.view())
	h.keys("G")
	requireNoRaw(t, h.view())
	require.Contains(t, h.view(), `+     "new": true`, "the end of the attempted request:\n%s", h.view())

	// A viewer is not offered it, and the database refuses it anyway,
	// audited.
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	desk := &desk.Desk{Pool: viewer.Pool}
	hv := newSourceHarness(t, storeview.New(viewer.Pool, storeview.Config{StatementTimeout: 5 * time.Second}),
		Config{Context: "db", Decider: desk}, 120, 40)
	hv.keys(":key acme/create-note/" + key + "<enter>")
	require.Contains(t, hv.view(), "≠ 1 unreviewed conflicting attempt", "the viewer does not see the record:\n%s", hv.view())
	require.NotContains(t, hv.view(), "compare conflict", "offered to a viewer:\n%s", hv.view())
	hv.keys("c")
	require.Equal(t, hv.m.detail(), hv.m.active(), "c opened screen %s for a viewer", hv.m.active().id())
	_, res, err := desk.RevealConflict(ctx, conflict.ConflictID, "curious")
	var refused *reconcile.RefusedError
	require.True(t, errors.As(err, &refused), "a viewer's reveal: %v", err)
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT role, action, outcome FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
		res.Tenant, res.Seq).Scan(&role, &action, &outcome))
	require.Equal(t, []string{viewer.Role, "reveal:conflict", "denied"}, []string{role, action, outcome})
}

// TestConflictRevealConnectionLost: the operator's connection is lost
// between the reveal's audited request and its fetch, on a real store. The
// console says the database did not answer and that nothing was shown,
// shows neither request, and the request stays unfetched (it expires a
// minute later).
func TestConflictRevealConnectionLost(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	const key = "ord-lost"
	_, conflict := noteConflict(t, d, key, `{"to":"user@example.com","n":1}`, `{"to":"user@example.com","n":2}`)
	operator := dbtest.NewPerson(t, d, "operator", "acme")
	losing := dbtest.LosingPool(t, d, operator, "reveal_conflict_fetch")
	h := newSourceHarness(t, storeview.New(operator.Pool, storeview.Config{StatementTimeout: 5 * time.Second}),
		Config{Context: "db", Decider: &desk.Desk{Pool: losing}}, 120, 40)
	h.keys(":key acme/create-note/" + key + "<enter>c")
	require.Contains(t, h.view(), "conflict #"+strconv.FormatInt(conflict.ConflictID, 10), "c does not offer the conflict:\n%s", h.view())
	h.keys("the line drops<enter>y")
	v := flat(h.view())
	require.Contains(t, v, "The database did not answer the reveal", "%s", h.view())
	require.Contains(t, v, "Nothing was shown, and no record changed", "%s", h.view())
	require.NotContains(t, v, "user@example.com", "a request was shown:\n%s", h.view())
	require.NotContains(t, v, "differing field", "differences were shown:\n%s", h.view())

	var seq int64
	var outcome string
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT seq, outcome FROM opsdesk.audit
WHERE tenant = 'acme' AND action = 'reveal:conflict' AND role = $1`, operator.Role).Scan(&seq, &outcome))
	require.Equal(t, "succeeded", outcome, "audited before the fetch")
	require.Contains(t, v, "(audit record acme#"+strconv.FormatInt(seq, 10)+")", "the error does not name the reveal's audit record:\n%s", h.view())
	var fetched int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.reveal_fetches WHERE tenant = 'acme' AND seq = $1`,
		seq).Scan(&fetched))
	require.Zero(t, fetched, "the request was marked fetched, yet nothing was shown")
}

// TestConflictRevealOtherTenant: a one-tenant operator and a one-tenant
// admin look up a conflicted record of another tenant, on a real store:
// it reads as absent, c opens nothing and nothing is audited.
func TestConflictRevealOtherTenant(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	const key = "ord-other"
	noteConflict(t, d, key, `{"to":"user@example.com","n":1}`, `{"to":"user@example.com","n":2}`)
	for _, level := range []string{"operator", "admin"} {
		p := dbtest.NewPerson(t, d, level, "globex")
		h := newSourceHarness(t, storeview.New(p.Pool, storeview.Config{StatementTimeout: 5 * time.Second}),
			Config{Context: "db", Decider: &desk.Desk{Pool: p.Pool}}, 120, 40)
		require.True(t, h.m.canDecide(), "%s: the capabilities: %+v", level, h.m.caps)
		h.keys(":key acme/create-note/" + key + "<enter>")
		v := h.view()
		require.Contains(t, flat(v), "No attempt was ever recorded for this identity", "%s:\n%s", level, v)
		require.NotContains(t, v, "compare conflict", "%s:\n%s", level, v)
		h.keys("c")
		require.Equal(t, h.m.detail(), h.m.active(), "%s: c opened screen %s", level, h.m.active().id())
		require.NotContains(t, h.view(), "user@example.com", level)
		var audited int
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit WHERE role = $1`, p.Role).Scan(&audited))
		require.Zero(t, audited, "%s: audited", level)
	}
}
