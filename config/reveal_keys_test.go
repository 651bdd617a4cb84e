package config

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeKeyFile writes a key file holding key id "k1" with mode perm.
func writeKeyFile(t *testing.T, perm os.FileMode) string {
	t.Helper()
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	path := filepath.Join(t.TempDir(), "keys.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"current":"k1","fingerprint":["k1"],"keys":{"k1":"`+key+`"}}`), 0o600))
	require.NoError(t, os.Chmod(path, perm))
	return path
}

// A context's reveal_keys is loaded as its keyring, from the file or
// OPSDESK_REVEAL_KEYS; none set is no keyring; a key file others can read
// is refused, naming the file and the key.
func TestRevealKeys(t *testing.T) {
	keys := writeKeyFile(t, 0o600)
	isolate(t, "contexts:\n  a:\n    dsn: file-dsn\n")
	cfg, err := Load(Options{})
	require.NoError(t, err)
	require.Empty(t, cfg.Context.RevealKeys)
	require.Nil(t, cfg.Context.Keyring)

	isolate(t, "contexts:\n  a:\n    dsn: file-dsn\n    reveal_keys: "+keys+"\n")
	cfg, err = Load(Options{})
	require.NoError(t, err)
	require.Equal(t, keys, cfg.Context.RevealKeys)
	require.NotNil(t, cfg.Context.Keyring)
	k, err := cfg.Context.Keyring.Key("k1")
	require.NoError(t, err)
	require.Equal(t, bytes.Repeat([]byte{7}, 32), k)

	open := writeKeyFile(t, 0o644)
	t.Setenv("OPSDESK_REVEAL_KEYS", open)
	_, err = Load(Options{})
	require.ErrorContains(t, err, "contexts.a.reveal_keys")
	require.ErrorContains(t, err, open)
	require.ErrorContains(t, err, "chmod 600")

	t.Setenv("OPSDESK_REVEAL_KEYS", filepath.Join(t.TempDir(), "missing.json"))
	_, err = Load(Options{})
	require.ErrorContains(t, err, "missing.json")
}
