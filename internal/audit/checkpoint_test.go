package audit

import (
	"crypto/ed25519"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/auditreport"
)

func TestCheckpointPayload(t *testing.T) {
	t.Parallel()
	c := &Checkpoint{
		At: time.UnixMicro(1700000000123456),
		Chains: []auditreport.Head{
			{Tenant: "", Seq: 2, Hash: auditreport.HexBytes{0x00, 0xff}},
			{Tenant: "acme corp\n", Seq: 10, Hash: auditreport.HexBytes{0xab}},
			{Tenant: "zoë", Seq: 1, Hash: auditreport.HexBytes{0x01}},
		},
	}
	payload, err := c.Payload()
	require.NoError(t, err)
	require.Equal(t, "opsdesk-audit-checkpoint-v1\n"+
		"at 1700000000123456\n"+
		"chain 0: 2 00ff\n"+
		"chain 10:acme corp\n 10 ab\n"+
		"chain 4:zoë 1 01\n", string(payload))

	c.Chains[0], c.Chains[1] = c.Chains[1], c.Chains[0]
	_, err = c.Payload()
	require.ErrorContains(t, err, "ascending tenant order")
	c.Chains = []auditreport.Head{{Tenant: "a"}, {Tenant: "a"}}
	_, err = c.Payload()
	require.ErrorContains(t, err, "each once")
}

func TestCheckpointSignature(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	pub := key.Public().(ed25519.PublicKey)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	heads := []auditreport.Head{{Tenant: "globex", Seq: 3, Hash: auditreport.HexBytes{3}}, {Tenant: "acme", Seq: 9, Hash: auditreport.HexBytes{9}}}
	c, err := Sign(at, heads, key)
	require.NoError(t, err)
	require.Equal(t, "acme", c.Chains[0].Tenant, "Sign sorts the chains")
	require.Equal(t, "globex", heads[0].Tenant, "and leaves the caller's alone")
	require.Equal(t, at.UTC().Truncate(time.Microsecond), c.At)
	require.Equal(t, Fingerprint(pub), c.KeyFingerprint)

	got, err := c.CheckSignature(nil)
	require.NoError(t, err)
	require.Equal(t, pub, got)
	_, err = c.CheckSignature(pub)
	require.NoError(t, err)

	// Through a file and back.
	path := filepath.Join(t.TempDir(), "cp.json")
	require.NoError(t, WriteCheckpoint(path, c))
	require.ErrorIs(t, WriteCheckpoint(path, c), fs.ErrExist, "a checkpoint is never overwritten")
	read, err := ReadCheckpoint(path)
	require.NoError(t, err)
	require.Equal(t, c, read)
	_, err = read.CheckSignature(pub)
	require.NoError(t, err)

	alter := func(f func(c *Checkpoint)) *Checkpoint {
		cp := *c
		cp.Chains = append([]auditreport.Head(nil), c.Chains...)
		f(&cp)
		return &cp
	}
	for name, bad := range map[string]*Checkpoint{
		"Seq":  alter(func(c *Checkpoint) { c.Chains[0].Seq = 8 }),
		"Hash": alter(func(c *Checkpoint) { c.Chains[1].Hash = auditreport.HexBytes{4} }),
		"At":   alter(func(c *Checkpoint) { c.At = c.At.Add(time.Microsecond) }),
		"Drop": alter(func(c *Checkpoint) { c.Chains = c.Chains[1:] }),
	} {
		_, err := bad.CheckSignature(nil)
		require.ErrorContains(t, err, "signature does not verify", name)
	}

	// Someone else's key, with a valid signature of its own: intact, but
	// only a pinned key tells it is not ours.
	forged, err := Sign(at, []auditreport.Head{{Tenant: "acme", Seq: 5, Hash: auditreport.HexBytes{5}}}, newKey(t))
	require.NoError(t, err)
	_, err = forged.CheckSignature(nil)
	require.NoError(t, err)
	_, err = forged.CheckSignature(pub)
	require.ErrorContains(t, err, "not the expected "+Fingerprint(pub))

	mismatched := alter(func(c *Checkpoint) { c.KeyFingerprint = forged.KeyFingerprint })
	_, err = mismatched.CheckSignature(nil)
	require.ErrorContains(t, err, "is not its public key's")
}

func TestReadCheckpointRejectsOtherFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"format":  `{"format": "something-else", "chains": []}`,
		"unknown": `{"format": "opsdesk-audit-checkpoint-v1", "chainz": []}`,
		"hex":     `{"format": "opsdesk-audit-checkpoint-v1", "chains": [{"tenant": "a", "seq": 1, "hash": "zz"}]}`,
		"json":    `not json`,
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		_, err := ReadCheckpoint(path)
		require.ErrorContains(t, err, "not an opsdesk audit checkpoint", name)
	}
	_, err := ReadCheckpoint(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestGenerateKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.key")
	pub, err := GenerateKey(path)
	require.NoError(t, err)

	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(data), "-----BEGIN PRIVATE KEY-----\n"))

	priv, err := ReadPrivateKey(path)
	require.NoError(t, err)
	require.Equal(t, pub, priv.Public())
	fromPub, err := ReadPublicKey(path + ".pub")
	require.NoError(t, err)
	require.Equal(t, pub, fromPub)
	fromPriv, err := ReadPublicKey(path)
	require.NoError(t, err)
	require.Equal(t, pub, fromPriv)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, Fingerprint(pub))

	// Never overwritten: neither the key nor, when only it exists, the .pub.
	_, err = GenerateKey(path)
	require.ErrorIs(t, err, fs.ErrExist)
	again, err := ReadPrivateKey(path)
	require.NoError(t, err)
	require.Equal(t, priv, again)

	other := filepath.Join(dir, "other.key")
	require.NoError(t, os.WriteFile(other+".pub", []byte("mine"), 0o644))
	_, err = GenerateKey(other)
	require.ErrorIs(t, err, fs.ErrExist)
	_, err = os.Stat(other)
	require.True(t, errors.Is(err, fs.ErrNotExist), "no private key is left without its public half")

	// Files that are not keys.
	_, err = ReadPrivateKey(path + ".pub")
	require.ErrorContains(t, err, `not a "PRIVATE KEY"`)
	_, err = ReadPublicKey(other + ".pub")
	require.ErrorContains(t, err, "not a PEM key file")
	_, err = ReadPrivateKey(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}
