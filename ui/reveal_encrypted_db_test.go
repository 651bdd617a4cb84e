package ui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// TestRevealEncryptedRealDatabase: a result the service stored sealed
// (Config.Keyring) is revealed from the console as an operator's login,
// audited as any reveal; the console holds no key, so it shows the
// envelope and says which key id it is encrypted under, and no plaintext.
func TestRevealEncryptedRealDatabase(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	kr, err := ops.NewLocalKeyring("2026-12", []string{"fp-1"},
		map[string][]byte{"2026-12": bytes.Repeat([]byte{7}, ops.KeyBytes), "fp-1": bytes.Repeat([]byte{8}, ops.KeyBytes)})
	require.NoError(t, err)
	store, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"create-note": {Effect: opsmodel.EffectIdempotentProvider}},
		Owner: "worker-1", Keyring: kr})
	require.NoError(t, err)
	const key = "sealed-1"
	_, err = ops.DoExternal(t.Context(), store, noteRequest(key, `{"to":"secret@example.com"}`), writeNote)
	require.NoError(t, err)

	operator := dbtest.NewPerson(t, d, "operator", "*")
	h := newSourceHarness(t, storeview.New(operator.Pool, storeview.Config{StatementTimeout: 5 * time.Second}),
		Config{Context: "db", Decider: &desk.Desk{Pool: operator.Pool, DisplayName: "Test Operator"}}, 120, 40)
	h.keys(":key acme/create-note/" + key + "<enter>")
	h.keys("vcustomer asks<enter>")
	v := flat(h.view())
	require.Contains(t, v, `encrypted under key id "2026-12"`, "the reveal does not say it is encrypted:\n%s", h.view())
	require.Contains(t, v, `"opsdesk": "encrypted"`, "the envelope is not shown:\n%s", h.view())
	require.NotContains(t, v, "noted", "plaintext shown:\n%s", h.view())

	h.keys("q")
	h.keys("iwhich address<enter>")
	v = flat(h.view())
	require.Contains(t, v, "Stored intent", "the intent reveal:\n%s", h.view())
	require.Contains(t, v, `encrypted under key id "2026-12"`, "the intent reveal does not say it is encrypted:\n%s", h.view())
	require.NotContains(t, v, "secret@example.com", "plaintext shown:\n%s", h.view())

	// A conflicting request is sealed too: the comparison says so for both
	// sides instead of warning that they do not hash to their fingerprints.
	_, err = ops.DoExternal(t.Context(), store, noteRequest(key, `{"to":"other-secret@example.com"}`), writeNote)
	require.ErrorIs(t, err, ops.ErrIntentConflict)
	h.keys("q")
	h.keys(":key acme/create-note/" + key + "<enter>")
	h.keys("c")
	h.keys("caller sent a second note<enter>y")
	v = flat(h.view())
	require.Contains(t, v, `no differences to compute: the requests are encrypted at rest (key id "2026-12")`, "the comparison:\n%s", h.view())
	require.Equal(t, 2, strings.Count(v, `encrypted under key id "2026-12": the service sealed this`), "each side says so:\n%s", h.view())
	require.NotContains(t, v, "~ changed", "envelope members listed as differences:\n%s", h.view())
	require.NotContains(t, v, "does not hash to the fingerprint", "a false alarm:\n%s", h.view())
	require.NotContains(t, v, "secret@example.com", "plaintext shown:\n%s", h.view())
}
