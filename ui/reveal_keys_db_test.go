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

// TestRevealDecryptsWithTheContextsKeysRealDatabase: a console whose
// context holds the key a value was sealed under (reveal_keys) shows its
// plaintext and says it decrypted it; one without that key id, or with
// another key under that id, says it is encrypted under the key id and
// shows no plaintext; an altered envelope is said not to authenticate.
// Every reveal is audited as before.
func TestRevealDecryptsWithTheContextsKeysRealDatabase(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	sealKey := bytes.Repeat([]byte{7}, ops.KeyBytes)
	kr, err := ops.NewLocalKeyring("2026-12", []string{"fp-1"},
		map[string][]byte{"2026-12": sealKey, "fp-1": bytes.Repeat([]byte{8}, ops.KeyBytes)})
	require.NoError(t, err)
	store, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"create-note": {Effect: opsmodel.EffectIdempotentProvider}},
		Owner: "worker-1", Keyring: kr})
	require.NoError(t, err)
	for _, key := range []string{"sealed-1", "tampered-1"} {
		_, err = ops.DoExternal(t.Context(), store, noteRequest(key, `{"to":"secret@example.com"}`), writeNote)
		require.NoError(t, err)
	}
	dbtest.TamperSealedResult(t, d, "tampered-1") // a bit of its ciphertext flipped

	operator := dbtest.NewPerson(t, d, "operator", "*")
	console := func(keys opsmodel.Keyring) *harness {
		opts := Config{Context: "db", Decider: &desk.Desk{Pool: operator.Pool, DisplayName: "Test Operator"}}
		if keys != nil {
			opts.RevealKeys = keys
		}
		return newSourceHarness(t, storeview.New(operator.Pool, storeview.Config{StatementTimeout: 5 * time.Second}), opts, 120, 40)
	}
	reader := func(id string, key []byte) opsmodel.Keyring {
		k, err := ops.NewLocalKeyring(id, []string{id}, map[string][]byte{id: key})
		require.NoError(t, err)
		return k
	}
	reveal := func(h *harness, key, keys string) string {
		h.keys(":key acme/create-note/" + key + "<enter>")
		h.keys(keys)
		return flat(h.view())
	}
	audits := func() int {
		var n int
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit WHERE action LIKE 'reveal:%' AND outcome = 'succeeded'`).Scan(&n))
		return n
	}

	before := audits()
	h := console(reader("2026-12", sealKey))
	v := reveal(h, "sealed-1", "vcustomer asks<enter>")
	require.Contains(t, v, `decrypted locally under key id "2026-12"`, "the reveal:\n%s", h.view())
	require.Contains(t, v, `"noted"`, "the plaintext is not shown:\n%s", h.view())
	require.NotContains(t, v, `"opsdesk": "encrypted"`, "the envelope is shown:\n%s", h.view())
	h.keys("q")
	v = reveal(h, "sealed-1", "iwhich address<enter>")
	require.Contains(t, v, `decrypted locally under key id "2026-12"`, "the intent reveal:\n%s", h.view())
	require.Contains(t, v, "secret@example.com", "the intent's plaintext is not shown:\n%s", h.view())
	require.Equal(t, before+2, audits(), "each reveal is audited")

	for name, keys := range map[string]opsmodel.Keyring{
		"another key id":             reader("2027-01", sealKey),
		"another key under the same": reader("2026-12", bytes.Repeat([]byte{9}, ops.KeyBytes)),
	} {
		h := console(keys)
		v := reveal(h, "sealed-1", "vcustomer asks<enter>")
		require.Contains(t, v, `encrypted under key id "2026-12"`, "%s:\n%s", name, h.view())
		require.Contains(t, v, `"opsdesk": "encrypted"`, "%s: the envelope is not shown:\n%s", name, h.view())
		require.NotContains(t, v, "noted", "%s: plaintext shown:\n%s", name, h.view())
		require.NotContains(t, v, "decrypted locally", "%s:\n%s", name, h.view())
	}

	h = console(reader("2026-12", sealKey))
	v = reveal(h, "tampered-1", "vcustomer asks<enter>")
	require.Contains(t, v, `encrypted under key id "2026-12", and it does not authenticate`, "the tampered reveal:\n%s", h.view())
	require.NotContains(t, v, "noted", "plaintext shown:\n%s", h.view())
	require.Equal(t, before+5, audits(), "each reveal is audited")

	// A conflicting attempt is sealed too ("conflict", bound to the
	// record): with the key both requests open, and what differs is shown.
	_, err = ops.DoExternal(t.Context(), store, noteRequest("sealed-1", `{"to":"other@example.com"}`), writeNote)
	require.ErrorIs(t, err, ops.ErrIntentConflict)
	compare := func(h *harness) string { return reveal(h, "sealed-1", "ccaller sent a second note<enter>y") }
	h = console(reader("2026-12", sealKey))
	v = compare(h)
	require.Equal(t, 2, strings.Count(v, `decrypted here under key id "2026-12"`), "each side says it was decrypted:\n%s", h.view())
	require.Contains(t, v, "secret@example.com", "the original's plaintext:\n%s", h.view())
	require.Contains(t, v, "other@example.com", "the attempt's plaintext:\n%s", h.view())
	require.Contains(t, v, "~ changed", "the differing field is not marked:\n%s", h.view())
	require.NotContains(t, v, "no differences to compute", "the comparison:\n%s", h.view())
	require.NotContains(t, v, "does not hash to the fingerprint", "a false alarm:\n%s", h.view())

	h = console(reader("2027-01", sealKey))
	v = compare(h)
	require.Contains(t, v, `this context's reveal_keys hold no key "2026-12"`, "why it stays sealed:\n%s", h.view())
	require.NotContains(t, v, "secret@example.com", "plaintext shown:\n%s", h.view())
	require.Equal(t, before+7, audits(), "each reveal is audited")
}
