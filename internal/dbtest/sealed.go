package dbtest

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TamperSealedResult flips one bit of the ciphertext of the sealed result
// (ops.Config.Keyring) of the record whose key is key, as the superuser
// with the tables' triggers off: what opening it must then refuse.
func TamperSealedResult(t testing.TB, d *DB, key string) {
	t.Helper()
	ctx := t.Context()
	var stored []byte
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT result::text FROM opsdesk.operations WHERE key = $1`, key).Scan(&stored))
	var env struct{ CT string }
	require.NoError(t, json.Unmarshal(stored, &env))
	ct, err := base64.StdEncoding.DecodeString(env.CT)
	require.NoError(t, err)
	require.NotEmpty(t, ct, "the result of %s is sealed", key)
	ct[len(ct)/2] ^= 1
	tampered := strings.Replace(string(stored), env.CT, base64.StdEncoding.EncodeToString(ct), 1)
	tx, err := d.Admin.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	_, err = tx.Exec(ctx, `ALTER TABLE opsdesk.operations DISABLE TRIGGER USER`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE opsdesk.operations SET result = $1::json WHERE key = $2`, tampered, key)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `ALTER TABLE opsdesk.operations ENABLE TRIGGER USER`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}
