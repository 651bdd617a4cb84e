package ops_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, ops.KeyBytes)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

// keyring builds a LocalKeyring whose current key is current, over keys.
func keyring(t *testing.T, current string, fingerprint []string, keys map[string][]byte) *ops.LocalKeyring {
	t.Helper()
	kr, err := ops.NewLocalKeyring(current, fingerprint, keys)
	require.NoError(t, err)
	return kr
}

// storedValues reads a record's stored intent and result as the superuser
// sees them.
func (b *bundle) storedValues(t *testing.T, tenant, key string) (intent, result []byte, fp []byte) {
	t.Helper()
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT intent::text, result::text, fingerprint FROM opsdesk.operations
WHERE tenant = $1 AND tool = $2 AND key = $3`, tenant, toolTicket, key).Scan(&intent, &result, &fp))
	return intent, result, fp
}

func TestEncryption(t *testing.T) {
	t.Parallel()

	all := map[string][]byte{"k1": newKey(t), "k2": newKey(t), "fp": newKey(t), "fp2": newKey(t)}
	secret := ticketIntent{Title: "Printer at 42 Secret Street", Priority: 2}
	// sealing is a store on b sealing under current, fingerprinting under
	// fps[0], and holding the keys named in fps and held.
	sealing := func(t *testing.T, b *bundle, current string, fps []string, held ...string) *ops.Store {
		keys := map[string][]byte{current: all[current]}
		for _, id := range append(fps, held...) {
			keys[id] = all[id]
		}
		return newStore(t, b.db.Service, ops.Config{Owner: "w", Keyring: keyring(t, current, fps, keys)})
	}
	fp := []string{"fp"}

	t.Run("RoundTripStoresNoPlaintextAndReplaysExactly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		store := sealing(t, b, "k1", fp)
		// A result with odd spacing and escapes: the replay gives these
		// bytes back, not a re-encoding.
		raw := json.RawMessage(`{"ticket" : "T-\u0031",  "note":"Secret Street"}`)
		fn := func(context.Context, pgx.Tx) (json.RawMessage, error) { return raw, nil }
		req := ticketReq("acme", "k-enc", secret)
		first, err := ops.DoTx(b.ctx, store, req, fn)
		require.NoError(t, err)
		require.Equal(t, ops.Created, first.Disposition)
		again, err := ops.DoTx(b.ctx, store, req, fn)
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, again.Disposition)
		// The same bytes a store without encryption replays (the stored
		// JSON as encoding/json wrote it, escapes kept).
		plainReq := ticketReq("acme", "k-plain", secret)
		_, err = ops.DoTx(b.ctx, b.store, plainReq, fn)
		require.NoError(t, err)
		plain, err := ops.DoTx(b.ctx, b.store, plainReq, fn)
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, plain.Disposition)
		require.Equal(t, string(plain.Result), string(again.Result))
		require.Equal(t, `{"ticket":"T-\u0031","note":"Secret Street"}`, string(again.Result))

		intent, result, _ := b.storedValues(t, "acme", "k-enc")
		kid, ok := opsmodel.EncryptedKeyID(intent)
		require.True(t, ok, "intent stored sealed: %s", intent)
		require.Equal(t, "k1", kid)
		kid, ok = opsmodel.EncryptedKeyID(result)
		require.True(t, ok, "result stored sealed: %s", result)
		require.Equal(t, "k1", kid)
		kid, ok = opsmodel.EncryptedKeyID(result[:60]) // a reveal's start
		require.True(t, ok)
		require.Equal(t, "k1", kid)
	})

	t.Run("SuperuserDumpShowsNoPlaintext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		store := sealing(t, b, "k1", fp)
		_, err := ops.DoTx(b.ctx, store, ticketReq("acme", "k-dump", secret), createTicket("acme", "k-dump", "x"))
		require.NoError(t, err)
		// A conflicting request is stored sealed too.
		_, err = ops.DoTx(b.ctx, store, ticketReq("acme", "k-dump", ticketIntent{Title: "Other Secret Street", Priority: 2}), createTicket("acme", "k-dump", "x"))
		require.ErrorIs(t, err, ops.ErrIntentConflict)
		// A rejection payload, and an external call's result.
		_, err = ops.DoTx(b.ctx, store, ticketReq("acme", "k-rej", secret), func(context.Context, pgx.Tx) (ticketResult, error) {
			return ticketResult{}, ops.Reject(map[string]string{"why": "Secret Street is closed"})
		})
		require.ErrorIs(t, err, ops.ErrRejected)
		mail := ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: toolEmail, Key: "k-mail"}, Version: "1",
			Intent: map[string]string{"to": "boss@Secret Street"}}
		send := func(context.Context, ops.Attempt) (map[string]string, error) {
			return map[string]string{"sent": "to Secret Street"}, nil
		}
		_, err = ops.DoExternal(b.ctx, store, mail, send)
		require.NoError(t, err)
		sent, err := ops.DoExternal(b.ctx, store, mail, send)
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, sent.Disposition)
		require.Equal(t, "to Secret Street", sent.Result["sent"])
		_, err = ops.DoTx(b.ctx, store, ticketReq("acme", "k-rej", secret), func(context.Context, pgx.Tx) (ticketResult, error) {
			return ticketResult{}, nil
		})
		var rej *ops.RejectedError
		require.ErrorAs(t, err, &rej)
		require.True(t, rej.Replayed)
		require.JSONEq(t, `{"why":"Secret Street is closed"}`, string(rej.Payload))

		var dump string
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT
    (SELECT string_agg(row_to_json(o)::text, E'\n') FROM opsdesk.operations o) || E'\n' ||
    (SELECT string_agg(row_to_json(c)::text, E'\n') FROM opsdesk.conflicts c)`).Scan(&dump))
		require.Contains(t, dump, `"opsdesk":"encrypted"`)
		require.NotContains(t, dump, "Secret")
		require.NotContains(t, dump, "Printer")
		require.NotContains(t, dump, "ticket_id")
	})

	t.Run("RotationKeepsOldKeyIDsReadable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := sealing(t, b, "k1", fp)
		first, err := ops.DoTx(b.ctx, old, ticketReq("acme", "k-old", secret), createTicket("acme", "k-old", "x"))
		require.NoError(t, err)

		// k2 becomes current; k1 stays for the records sealed under it.
		rotated := sealing(t, b, "k2", fp, "k1")
		again, err := ops.DoTx(b.ctx, rotated, ticketReq("acme", "k-old", secret), createTicket("acme", "k-old", "x"))
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, again.Disposition)
		require.Equal(t, first.Result, again.Result)
		_, err = ops.DoTx(b.ctx, rotated, ticketReq("acme", "k-new", secret), createTicket("acme", "k-new", "x"))
		require.NoError(t, err)

		intent, result, _ := b.storedValues(t, "acme", "k-old")
		for _, v := range [][]byte{intent, result} {
			kid, _ := opsmodel.EncryptedKeyID(v)
			require.Equal(t, "k1", kid, "an old record is not rewritten")
		}
		intent, result, _ = b.storedValues(t, "acme", "k-new")
		for _, v := range [][]byte{intent, result} {
			kid, _ := opsmodel.EncryptedKeyID(v)
			require.Equal(t, "k2", kid, "new writes use the current key")
		}
		require.Equal(t, 2, b.tickets(t))
	})

	t.Run("MissingKeyIDIsClearError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := sealing(t, b, "k1", fp)
		_, err := ops.DoTx(b.ctx, old, ticketReq("acme", "k-gone", secret), createTicket("acme", "k-gone", "x"))
		require.NoError(t, err)

		// k1 dropped from the keyring too early.
		dropped := sealing(t, b, "k2", fp)
		out, err := ops.DoTx(b.ctx, dropped, ticketReq("acme", "k-gone", secret), createTicket("acme", "k-gone", "x"))
		require.ErrorIs(t, err, ops.ErrNotDecrypted)
		var nd *ops.NotDecryptedError
		require.ErrorAs(t, err, &nd)
		require.Equal(t, "k1", nd.KeyID)
		require.Equal(t, "result", nd.Field)
		require.ErrorContains(t, err, `encrypted under key id "k1"`)
		require.ErrorContains(t, err, `key id "k1" is not in this keyring`)
		require.Empty(t, out.Disposition)
		require.Equal(t, 1, b.tickets(t), "nothing ran again")

		// A store without any keyring says so too.
		plain := newStore(t, b.db.Service, ops.Config{Owner: "w"})
		_, err = ops.DoTx(b.ctx, plain, ticketReq("acme", "k-gone", secret), createTicket("acme", "k-gone", "x"))
		// Its fingerprint is plain SHA-256: the keyed record is not
		// recognized as the same intent (see README, security).
		require.ErrorIs(t, err, ops.ErrIntentConflict)
	})

	t.Run("TamperedOrMovedCiphertextRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		store := sealing(t, b, "k1", fp)
		for _, key := range []string{"k-a", "k-b", "k-t"} {
			_, err := ops.DoTx(b.ctx, store, ticketReq("acme", key, secret), createTicket("acme", key, key))
			require.NoError(t, err)
		}
		// A superuser (or a restored backup) moves k-a's result into k-b,
		// and flips one bit of k-t's ciphertext. The state machine lets
		// only a superuser do either, with its triggers off.
		_, result, _ := b.storedValues(t, "acme", "k-t")
		var env struct{ CT string }
		require.NoError(t, json.Unmarshal(result, &env))
		ct, err := base64.StdEncoding.DecodeString(env.CT)
		require.NoError(t, err)
		ct[len(ct)/2] ^= 1
		tampered := strings.Replace(string(result), env.CT, base64.StdEncoding.EncodeToString(ct), 1)
		tx, err := b.db.Admin.Begin(b.ctx)
		require.NoError(t, err)
		defer tx.Rollback(b.ctx) //nolint:errcheck // a no-op after Commit
		_, err = tx.Exec(b.ctx, `ALTER TABLE opsdesk.operations DISABLE TRIGGER USER`)
		require.NoError(t, err)
		_, err = tx.Exec(b.ctx, `UPDATE opsdesk.operations SET result = $1::json WHERE tenant = 'acme' AND key = 'k-t'`, tampered)
		require.NoError(t, err)
		_, err = tx.Exec(b.ctx, `UPDATE opsdesk.operations SET result = (SELECT result FROM opsdesk.operations WHERE tenant = 'acme' AND key = 'k-a')
WHERE tenant = 'acme' AND key = 'k-b'`)
		require.NoError(t, err)
		_, err = tx.Exec(b.ctx, `ALTER TABLE opsdesk.operations ENABLE TRIGGER USER`)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(b.ctx))

		for _, key := range []string{"k-b", "k-t"} {
			_, err := ops.DoTx(b.ctx, store, ticketReq("acme", key, secret), createTicket("acme", key, key))
			require.ErrorIs(t, err, ops.ErrNotDecrypted, key)
			require.ErrorContains(t, err, "does not authenticate: it was altered, or moved from another record", key)
		}
		_, err = ops.DoTx(b.ctx, store, ticketReq("acme", "k-a", secret), createTicket("acme", "k-a", "k-a"))
		require.NoError(t, err, "the original still opens")
		require.Equal(t, 3, b.tickets(t))
	})

	t.Run("KeyedFingerprintDiffersAndDetectsConflicts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		store := sealing(t, b, "k1", fp)
		_, err := ops.DoTx(b.ctx, store, ticketReq("acme", "k-fp", secret), createTicket("acme", "k-fp", "x"))
		require.NoError(t, err)
		canon, plainFP, err := ops.Canonical(toolTicket, "1", secret)
		require.NoError(t, err)
		_, _, stored := b.storedValues(t, "acme", "k-fp")
		require.NotEqual(t, plainFP[:], stored, "not the plain SHA-256 a dictionary could match")
		require.NotEqual(t, sha256.Sum256(canon), [32]byte(stored))
		rec := b.lookup(t, toolTicket, "acme", "k-fp")
		require.Equal(t, stored, rec.Fingerprint[:])

		_, err = ops.DoTx(b.ctx, store, ticketReq("acme", "k-fp", ticketIntent{Title: "Changed", Priority: 2}), createTicket("acme", "k-fp", "x"))
		var conflict *ops.IntentConflictError
		require.ErrorAs(t, err, &conflict)
		require.Equal(t, rec.Fingerprint, conflict.Stored)
		require.Equal(t, 1, b.tickets(t))

		// A retired fingerprint key still recognizes its records; a new
		// one keys new records.
		next := sealing(t, b, "k1", []string{"fp2", "fp"})
		again, err := ops.DoTx(b.ctx, next, ticketReq("acme", "k-fp", secret), createTicket("acme", "k-fp", "x"))
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, again.Disposition)
		_, err = ops.DoTx(b.ctx, next, ticketReq("acme", "k-fp", ticketIntent{Title: "Changed", Priority: 2}), createTicket("acme", "k-fp", "x"))
		require.ErrorIs(t, err, ops.ErrIntentConflict)
	})

	t.Run("SwitchingOnReplaysRecordsWrittenBefore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := b.doTicket(t, "acme", "k-before", secret) // no keyring
		require.NoError(t, err)
		intent, _, stored := b.storedValues(t, "acme", "k-before")
		_, ok := opsmodel.EncryptedKeyID(intent)
		require.False(t, ok)

		on := sealing(t, b, "k1", fp)
		again, err := ops.DoTx(b.ctx, on, ticketReq("acme", "k-before", secret), createTicket("acme", "k-before", secret.Title))
		require.NoError(t, err)
		require.Equal(t, ops.Replayed, again.Disposition)
		require.Equal(t, first.Result, again.Result)
		_, err = ops.DoTx(b.ctx, on, ticketReq("acme", "k-before", ticketIntent{Title: "Changed", Priority: 2}), createTicket("acme", "k-before", "x"))
		require.ErrorIs(t, err, ops.ErrIntentConflict, "a changed intent is still a conflict")
		_, _, after := b.storedValues(t, "acme", "k-before")
		require.Equal(t, stored, after, "the old record keeps its plain fingerprint")
		require.Equal(t, 1, b.tickets(t))
	})

	t.Run("EnvelopeShapedResultIsNotStoredAsItIs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		fake := json.RawMessage(`{"opsdesk":"encrypted","alg":"A256GCM","kid":"k1","ct":"AAAA"}`)
		_, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "k-fake", secret), func(context.Context, pgx.Tx) (json.RawMessage, error) { return fake, nil })
		require.ErrorIs(t, err, ops.ErrInvalidRequest)
		require.ErrorContains(t, err, "encrypted value")
	})
}

func TestKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k1 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, ops.KeyBytes))
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	good := `{"current":"k1","fingerprint":["k1"],"keys":{"k1":"` + k1 + `"}}`

	kr, err := ops.LoadKeyFile(write("good.json", good, 0o600))
	require.NoError(t, err)
	require.Equal(t, "k1", kr.CurrentKeyID())
	key, err := kr.Key("k1")
	require.NoError(t, err)
	require.Len(t, key, ops.KeyBytes)

	for name, c := range map[string]struct {
		body string
		mode os.FileMode
		want string
	}{
		"readable.json":  {good, 0o644, "must not be readable by group or others"},
		"short.json":     {`{"current":"k1","fingerprint":["k1"],"keys":{"k1":"AAAA"}}`, 0o600, "keys are 32"},
		"nocurrent.json": {`{"current":"k9","fingerprint":["k1"],"keys":{"k1":"` + k1 + `"}}`, 0o600, `current key "k9"`},
		"nofp.json":      {`{"current":"k1","keys":{"k1":"` + k1 + `"}}`, 0o600, "no fingerprint key"},
		"unknown.json":   {`{"current":"k1","fingerprint":["k1"],"keys":{"k1":"` + k1 + `"},"extra":1}`, 0o600, "unknown field"},
	} {
		_, err := ops.LoadKeyFile(write(name, c.body, c.mode))
		require.ErrorContains(t, err, c.want, name)
	}
}

// shortKeyring is a service's own Keyring whose current key is too short.
type shortKeyring struct{}

func (shortKeyring) CurrentKeyID() string        { return "short" }
func (shortKeyring) Key(string) ([]byte, error)  { return []byte("16 bytes of key!"), nil }
func (shortKeyring) FingerprintKeyIDs() []string { return []string{"short"} }

func TestNewRefusesUnusableKeyring(t *testing.T) {
	t.Parallel()
	d := setup(t)
	_, err := ops.New(d.db.Service, ops.Config{Tools: testTools, Keyring: shortKeyring{}})
	require.ErrorContains(t, err, `Config.Keyring: key "short" is 16 bytes; keys are 32`)
	var nilRing *ops.LocalKeyring
	_, err = ops.New(d.db.Service, ops.Config{Tools: testTools, Keyring: nilRing})
	require.ErrorContains(t, err, "a nil *ops.LocalKeyring")
}

// OpenStored opens what a reveal returns: with the key, the plaintext;
// without it, or bound to another record or field, or altered, an error
// naming the key id and no plaintext; a plain value as it is.
func TestOpenStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k1 := newKey(t)
	store := newStore(t, b.db.Service, ops.Config{Owner: "w", Keyring: keyring(t, "k1", []string{"fp"}, map[string][]byte{"k1": k1, "fp": newKey(t)})})
	fn := func(context.Context, pgx.Tx) (json.RawMessage, error) {
		return json.RawMessage(`{"note":"Secret Street"}`), nil
	}
	_, err := ops.DoTx(b.ctx, store, ticketReq("acme", "k-open", ticketIntent{Title: "Secret title", Priority: 1}), fn)
	require.NoError(t, err)
	intent, result, _ := b.storedValues(t, "acme", "k-open")
	id := ops.Identity{Tenant: "acme", Tool: toolTicket, Key: "k-open"}
	reader := keyring(t, "k1", []string{"k1"}, map[string][]byte{"k1": k1})

	plain, kid, err := opsmodel.OpenStored(reader, "result", id, result)
	require.NoError(t, err)
	require.Equal(t, "k1", kid)
	require.JSONEq(t, `{"note":"Secret Street"}`, string(plain))
	plain, _, err = opsmodel.OpenStored(reader, "intent", id, intent)
	require.NoError(t, err)
	require.Contains(t, string(plain), "Secret title")

	other := keyring(t, "k1", []string{"k1"}, map[string][]byte{"k1": newKey(t)})
	for name, try := range map[string]func() ([]byte, string, error){
		"no keyring":  func() ([]byte, string, error) { return opsmodel.OpenStored(nil, "result", id, result) },
		"wrong key":   func() ([]byte, string, error) { return opsmodel.OpenStored(other, "result", id, result) },
		"other field": func() ([]byte, string, error) { return opsmodel.OpenStored(reader, "intent", id, result) },
		"other record": func() ([]byte, string, error) {
			return opsmodel.OpenStored(reader, "result", ops.Identity{Tenant: "acme", Tool: toolTicket, Key: "x"}, result)
		},
	} {
		plain, kid, err := try()
		require.Error(t, err, name)
		require.Equal(t, "k1", kid, name)
		require.Nil(t, plain, name)
	}
	_, _, err = opsmodel.OpenStored(other, "result", id, result)
	require.ErrorContains(t, err, "does not authenticate")

	plain, kid, err = opsmodel.OpenStored(nil, "result", id, []byte(`{"plain":true}`))
	require.NoError(t, err)
	require.Empty(t, kid)
	require.Equal(t, `{"plain":true}`, string(plain))
}
