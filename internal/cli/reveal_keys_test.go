package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

// keyFile writes a key file holding key under id, with mode perm.
func keyFile(t *testing.T, id string, key []byte, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.json")
	js, err := json.Marshal(map[string]any{"current": id, "fingerprint": []string{id},
		"keys": map[string]string{id: base64.StdEncoding.EncodeToString(key)}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, js, 0o600))
	require.NoError(t, os.Chmod(path, perm))
	return path
}

// TestRevealDecryptsWithTheContextsKeys: opsdesk ops reveal prints a
// value sealed at rest decrypted where the context's reveal_keys hold its
// key id, and says so; without them, or with another key id or another key
// under it, the envelope as stored and the key id it is encrypted under;
// an altered envelope is an error saying it does not authenticate. Every
// reveal is audited; a key file others can read is refused, by name.
func TestRevealDecryptsWithTheContextsKeys(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	sealKey := bytes.Repeat([]byte{7}, ops.KeyBytes)
	kr, err := ops.NewLocalKeyring("2026-12", []string{"fp-1"},
		map[string][]byte{"2026-12": sealKey, "fp-1": bytes.Repeat([]byte{8}, ops.KeyBytes)})
	require.NoError(t, err)
	store, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"create-note": {Effect: ops.EffectIdempotentProvider}},
		Owner: "worker-1", Keyring: kr})
	require.NoError(t, err)
	for _, key := range []string{"sealed-1", "tampered-1"} {
		_, err = ops.DoExternal(t.Context(), store, ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: "create-note", Key: key},
			Version: "1", Intent: json.RawMessage(`{"to":"secret@example.com"}`)},
			func(context.Context, ops.Attempt) (string, error) { return "noted", nil })
		require.NoError(t, err)
	}
	dbtest.TamperSealedResult(t, d, "tampered-1") // a bit of its ciphertext flipped

	operator := dbtest.NewPerson(t, d, "operator", "*")
	sealed, tamperedID := idOf(t, d, "sealed-1"), idOf(t, d, "tampered-1")
	audits := func() int {
		var n int
		require.NoError(t, d.Admin.QueryRow(t.Context(),
			`SELECT count(*) FROM opsdesk.audit WHERE action LIKE 'reveal:%' AND outcome = 'succeeded'`).Scan(&n))
		return n
	}
	before := audits()

	withKey := personConfig(t, operator, "    reveal_keys: "+keyFile(t, "2026-12", sealKey, 0o600)+"\n")
	code, out, errOut := run("ops", "reveal", sealed, "--reason", "customer asks", "--config", withKey)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, "\"noted\"\n", out)
	require.Contains(t, errOut, `decrypted locally under key id "2026-12"`)
	code, out, errOut = run("ops", "reveal", sealed, "--field", "intent", "--reason", "which address", "--config", withKey)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "secret@example.com")
	require.Contains(t, errOut, `decrypted locally under key id "2026-12"`)

	// -o json says how the value was sealed and that it was opened here.
	code, out, errOut = run("ops", "reveal", sealed, "--reason", "customer asks", "--config", withKey, "-o", "json")
	require.Equal(t, ExitOK, code, errOut)
	var doc struct {
		Value     json.RawMessage `json:"value"`
		Encrypted bool            `json:"encrypted"`
		KeyID     *string         `json:"key_id"`
		Decrypted bool            `json:"decrypted"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.JSONEq(t, `"noted"`, string(doc.Value))
	require.True(t, doc.Encrypted)
	require.True(t, doc.Decrypted)
	require.NotNil(t, doc.KeyID)
	require.Equal(t, "2026-12", *doc.KeyID)
	code, out, errOut = run("ops", "reveal", sealed, "--reason", "customer asks", "--config", personConfig(t, operator, ""), "-o", "json")
	require.Equal(t, ExitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.True(t, doc.Encrypted)
	require.False(t, doc.Decrypted)
	require.Contains(t, string(doc.Value), `"opsdesk":"encrypted"`, "the envelope as stored")
	require.NotContains(t, out, "noted")
	before += 2

	for name, cfg := range map[string]string{
		"no reveal_keys":             personConfig(t, operator, ""),
		"another key id":             personConfig(t, operator, "    reveal_keys: "+keyFile(t, "2027-01", sealKey, 0o600)+"\n"),
		"another key under the same": personConfig(t, operator, "    reveal_keys: "+keyFile(t, "2026-12", bytes.Repeat([]byte{9}, ops.KeyBytes), 0o600)+"\n"),
	} {
		code, out, errOut := run("ops", "reveal", sealed, "--reason", "customer asks", "--config", cfg)
		require.Contains(t, out+errOut, `encrypted under key id "2026-12"`, name)
		require.Contains(t, out, `{"opsdesk":"encrypted"`, "%s: the envelope as stored", name)
		require.NotContains(t, out+errOut, "noted", "%s: plaintext shown", name)
		require.NotContains(t, errOut, "decrypted locally", name)
		if name != "another key under the same" {
			require.Equal(t, ExitOK, code, "%s: %s", name, errOut)
		}
	}

	code, out, errOut = run("ops", "reveal", tamperedID, "--reason", "customer asks", "--config", withKey)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, `encrypted under key id "2026-12"`)
	require.Contains(t, errOut, "does not authenticate")
	require.NotContains(t, out+errOut, "noted")
	require.Equal(t, before+6, audits(), "each reveal is audited")

	open := keyFile(t, "2026-12", sealKey, 0o644)
	code, _, errOut = run("ops", "reveal", sealed, "--reason", "x", "--config", personConfig(t, operator, "    reveal_keys: "+open+"\n"))
	require.NotEqual(t, ExitOK, code)
	require.Contains(t, errOut, open)
	require.Contains(t, errOut, "reveal_keys")
	require.Equal(t, before+6, audits(), "nothing revealed with a refused key file")

	// A conflicting attempt's request is sealed too: with the key both
	// sides open and are compared, in text and in JSON; without it each
	// side says why it stays sealed.
	_, err = ops.DoExternal(t.Context(), store, ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: "create-note", Key: "sealed-1"},
		Version: "1", Intent: json.RawMessage(`{"to":"other@example.com"}`)},
		func(context.Context, ops.Attempt) (string, error) { return "noted", nil })
	require.ErrorIs(t, err, ops.ErrIntentConflict)
	code, out, errOut = run("conflicts", "show", sealed, "--reveal", "--reason", "second note", "--config", withKey)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, 2, strings.Count(out, `decrypted here under key id "2026-12"`), out)
	require.Contains(t, out, "secret@example.com")
	require.Contains(t, out, "other@example.com")
	require.NotContains(t, out, "no differences to compute", out)
	require.NotContains(t, out, "does not hash to the fingerprint", out)
	code, out, errOut = run("conflicts", "show", sealed, "--reveal", "--reason", "second note", "-o", "json", "--config", withKey)
	require.Equal(t, ExitOK, code, errOut)
	var rev struct {
		Original, Attempted struct {
			Decrypted bool   `json:"decrypted"`
			KeyID     string `json:"key_id"`
		}
		Differences []struct {
			Path string `json:"path"`
		} `json:"differences"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rev), out)
	require.True(t, rev.Original.Decrypted && rev.Attempted.Decrypted, out)
	require.Equal(t, "2026-12", rev.Attempted.KeyID, out)
	require.Len(t, rev.Differences, 1, out)
	require.Equal(t, "/intent/to", rev.Differences[0].Path, out)
	code, out, errOut = run("conflicts", "show", sealed, "--reveal", "--reason", "second note", "--config", personConfig(t, operator, ""))
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, 2, strings.Count(out, "this context has no reveal_keys; it is not compared"), out)
	require.NotContains(t, out, "other@example.com")
	require.Equal(t, before+9, audits(), "each reveal is audited")

	// A superuser moves sealed-1's attempted request onto another record's
	// conflict: bound to sealed-1, it does not open there, and nothing of
	// it is shown or compared.
	_, err = ops.DoExternal(t.Context(), store, ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: "create-note", Key: "tampered-1"},
		Version: "1", Intent: json.RawMessage(`{"to":"third@example.com"}`)},
		func(context.Context, ops.Attempt) (string, error) { return "noted", nil })
	require.ErrorIs(t, err, ops.ErrIntentConflict)
	_, err = d.Admin.Exec(t.Context(), `UPDATE opsdesk.conflicts SET intent = (SELECT intent FROM opsdesk.conflicts WHERE key = 'sealed-1')
WHERE key = 'tampered-1'`)
	require.NoError(t, err)
	code, out, errOut = run("conflicts", "show", tamperedID, "--reveal", "--reason", "moved", "--config", withKey)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, `does not open with this context's key "2026-12" (altered, or moved from another record); it is not compared`, out)
	require.Equal(t, 1, strings.Count(out, `decrypted here under key id "2026-12"`), "only the original opens: %s", out)
	require.NotContains(t, out, "other@example.com")
	require.NotContains(t, out, "third@example.com", "the moved request replaced the attempt's")
	require.Equal(t, before+10, audits(), "each reveal is audited")
}
