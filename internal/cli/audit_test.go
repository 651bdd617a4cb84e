package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// auditStore is a store whose audit trail holds acme's chain of 6 records
// and globex's of 2 (refusals: its record is completed), written by an
// operator who sees every tenant, and a config that connects as them.
type auditStore struct {
	d        *dbtest.DB
	operator *dbtest.Person
	cfg      string
}

func newAuditStore(t *testing.T) *auditStore {
	t.Helper()
	_, d := storeConfig(t)
	s := &auditStore{d: d, operator: dbtest.NewPerson(t, d, "operator", "*")}
	s.cfg = personConfig(t, s.operator, "")
	s.decide(t, "run-42:create-ticket", 6)
	s.decide(t, "mail-1", 2)
	return s
}

// decide appends n records to key's tenant chain: deferrals, and every
// second one a refusal for a stale version.
func (s *auditStore) decide(t *testing.T, key string, n int) {
	t.Helper()
	id, err := strconv.ParseInt(idOf(t, s.d, key), 10, 64)
	require.NoError(t, err)
	for i := range n {
		version := 1
		if i%2 == 1 {
			version = 9
		}
		// In FROM: `SELECT (opsdesk.decide(…)).*` would call it once per
		// result column, appending as many audit records.
		_, err := s.operator.Pool.Exec(t.Context(), `
SELECT * FROM opsdesk.decide(p_id => $1, p_decision => 'defer', p_expect_version => $2, p_reason => 'r',
    p_snooze_until => now() + interval '1 hour')`, id, version)
		require.NoError(t, err)
	}
}

// tamper runs sql as the superuser with the append-only trigger off.
func (s *auditStore) tamper(t *testing.T, sql string) {
	t.Helper()
	ctx := t.Context()
	tx, err := s.d.Admin.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for _, stmt := range []string{`ALTER TABLE opsdesk.audit DISABLE TRIGGER audit_no_change`, sql,
		`ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_change`} {
		_, err := tx.Exec(ctx, stmt)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))
}

func TestAuditVerify(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t)

	code, out, errOut := run("audit", "verify", "--config", s.cfg)
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "audit trail as "+s.operator.Role+" (every tenant)")
	require.Regexp(t, `(?m)^acme\s+6\s+6\s+[0-9a-f]{16}…\s+-\s+✓ ok$`, out)
	require.Regexp(t, `(?m)^globex\s+2\s+2\s+`, out)
	require.Contains(t, out, "✓ 8 records in 2 chains verified")

	code, out, _ = run("audit", "verify", "--config", s.cfg, "--tenant", "globex", "-o", "json")
	require.Equal(t, ExitOK, code)
	var rep auditreport.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.OK)
	require.Len(t, rep.Chains, 1)
	require.Equal(t, "globex", rep.Chains[0].Tenant)
	require.Equal(t, int64(2), rep.Chains[0].HeadSeq)
	require.Len(t, rep.Chains[0].HeadHash, 32)

	// An edited record: exit 1, naming it on stdout and stderr.
	s.tamper(t, `UPDATE opsdesk.audit SET reason = 'approved' WHERE tenant = 'acme' AND seq = 3;
UPDATE opsdesk.audit a SET hash = opsdesk.audit_hash(a) WHERE tenant = 'acme' AND seq = 3`)
	code, out, errOut = run("audit", "verify", "--config", s.cfg)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Contains(t, out, "✗ prev_hash of seq 4 is not the hash of seq 3")
	require.Contains(t, out, "first broken record: tenant acme prev_hash of seq 4 is not the hash of seq 3\n")
	require.Equal(t, "opsdesk: the audit trail does not verify: tenant acme prev_hash of seq 4 is not the hash of seq 3\n", errOut)

	code, out, _ = run("audit", "verify", "--config", s.cfg, "-o", "json")
	require.Equal(t, ExitFailure, code)
	var broken map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &broken))
	require.Equal(t, false, broken["ok"])
	require.Equal(t, map[string]any{"tenant": "acme", "seq": float64(4), "reason": "prev_hash of seq 4 is not the hash of seq 3"},
		broken["first_break"])

	// The other chain alone still verifies.
	code, _, errOut = run("audit", "verify", "--config", s.cfg, "--tenant", "globex")
	require.Equal(t, ExitOK, code, errOut)
}

func TestAuditCheckpoint(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "audit.key")

	code, out, errOut := run("audit", "keygen", "--out", key)
	require.Equal(t, ExitOK, code, errOut)
	pub, err := audit.ReadPublicKey(key + ".pub")
	require.NoError(t, err)
	fingerprint := audit.Fingerprint(pub)
	require.Contains(t, out, "fingerprint  "+fingerprint+"\n")
	info, err := os.Stat(key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	cpPath := filepath.Join(dir, "cp.json")
	code, out, errOut = run("audit", "checkpoint", "--config", s.cfg, "--key", key, "--out", cpPath)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "signed the heads of 2 chains (8 records) at ")
	require.Contains(t, out, "with key "+fingerprint+" to "+cpPath)
	cp, err := audit.ReadCheckpoint(cpPath)
	require.NoError(t, err)
	require.Equal(t, []string{"acme", "globex"}, []string{cp.Chains[0].Tenant, cp.Chains[1].Tenant})
	_, err = cp.CheckSignature(pub)
	require.NoError(t, err)

	// To standard output, the note on standard error.
	code, out, errOut = run("audit", "checkpoint", "--config", s.cfg, "--key", key, "--tenant", "acme")
	require.Equal(t, ExitOK, code, errOut)
	var single audit.Checkpoint
	require.NoError(t, json.Unmarshal([]byte(out), &single))
	require.Len(t, single.Chains, 1)
	require.Contains(t, errOut, "signed the heads of 1 chain (6 records)")

	// The chains grow; the checkpoint still holds.
	s.decide(t, "run-42:create-ticket", 2)
	code, out, errOut = run("audit", "verify", "--config", s.cfg, "--checkpoint", cpPath)
	require.Equal(t, ExitOK, code, out+errOut)
	require.Regexp(t, `(?m)^acme\s+8\s+8\s+\S+\s+seq 6 ✓\s+✓ ok$`, out)
	require.Contains(t, out, "signature verified with the checkpoint's own key "+fingerprint)
	require.Contains(t, out, "pin the expected key with --public-key")
	code, out, errOut = run("audit", "verify", "--config", s.cfg, "--checkpoint", cpPath, "--public-key", key+".pub")
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "signature verified with the pinned key "+fingerprint+"\n")

	// Another key is refused when pinned.
	other := filepath.Join(dir, "other.key")
	code, _, _ = run("audit", "keygen", "--out", other)
	require.Equal(t, ExitOK, code)
	code, out, errOut = run("audit", "verify", "--config", s.cfg, "--checkpoint", cpPath, "--public-key", other+".pub")
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, out, "✗ the checkpoint was signed with key "+fingerprint)
	require.Contains(t, errOut, "opsdesk: the checkpoint does not verify: the checkpoint was signed with key "+fingerprint)

	// A tail cut back to seq 4 and re-chained past the checkpoint: the
	// chain alone verifies, the checkpoint does not.
	s.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'acme' AND seq > 4`)
	_, err = s.d.Admin.Exec(t.Context(), `UPDATE opsdesk.audit_heads
SET seq = 4, hash = (SELECT hash FROM opsdesk.audit WHERE tenant = 'acme' AND seq = 4) WHERE tenant = 'acme'`)
	require.NoError(t, err)
	s.decide(t, "run-42:create-ticket", 3)
	code, _, errOut = run("audit", "verify", "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	code, out, errOut = run("audit", "verify", "--config", s.cfg, "--checkpoint", cpPath, "--public-key", key+".pub")
	require.Equal(t, ExitFailure, code, out)
	require.Regexp(t, `first broken record: tenant acme seq 6: hash [0-9a-f]{16}… is not the [0-9a-f]{16}… the checkpoint signed: `+
		`the chain was rewritten at or before seq 6\n`, out)
	require.Contains(t, errOut, "tenant acme seq 6: hash ")

	// A tail cut without re-chaining: its head row betrays it, until it
	// is moved back too.
	s.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'globex' AND seq = 2`)
	code, out, _ = run("audit", "verify", "--config", s.cfg, "--tenant", "globex")
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, out, "first broken record: tenant globex seq 2 missing: the chain ends at seq 1, but its head row says seq 2: its tail was removed\n")
	_, err = s.d.Admin.Exec(t.Context(), `UPDATE opsdesk.audit_heads
SET seq = 1, hash = (SELECT hash FROM opsdesk.audit WHERE tenant = 'globex' AND seq = 1) WHERE tenant = 'globex'`)
	require.NoError(t, err)
	code, out, _ = run("audit", "verify", "--config", s.cfg, "--checkpoint", cpPath, "--tenant", "globex")
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, out, "first broken record: tenant globex seq 2 missing: the chain ends at seq 1, but the checkpoint signed seq 2: its tail was removed\n")

	// The cut and re-chained tails verify on their own, so they can be
	// signed; an edited record cannot.
	code, _, errOut = run("audit", "checkpoint", "--config", s.cfg, "--key", key)
	require.Equal(t, ExitOK, code, errOut)
	s.tamper(t, `UPDATE opsdesk.audit SET reason = 'approved' WHERE tenant = 'acme' AND seq = 2`)
	code, out, errOut = run("audit", "checkpoint", "--config", s.cfg, "--key", key)
	require.Equal(t, ExitFailure, code, out)
	require.Empty(t, out)
	require.Equal(t, "opsdesk: not signed: the audit trail does not verify: tenant acme seq 2: hash does not match its contents\n", errOut)
}

// TestAuditScopedOperator: a person mapped to acme verifies acme's chain
// only, and a full checkpoint's other chains are reported as not visible.
func TestAuditScopedOperator(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "audit.key")
	code, _, _ := run("audit", "keygen", "--out", key)
	require.Equal(t, ExitOK, code)
	cpPath := filepath.Join(dir, "cp.json")
	code, _, errOut := run("audit", "checkpoint", "--config", s.cfg, "--key", key, "--out", cpPath)
	require.Equal(t, ExitOK, code, errOut)

	scoped := dbtest.NewPerson(t, s.d, "operator", "acme")
	cfg := personConfig(t, scoped, "")
	// The checkpoint's chain it cannot see fails, unless a partial check
	// is asked for.
	code, out, errOut := run("audit", "verify", "--config", cfg, "--checkpoint", cpPath)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Contains(t, errOut, "so they were not checked: globex (verify as a role that sees every chain the checkpoint signed, "+
		"or add --partial to check only the chains this role sees)\n")
	code, out, errOut = run("audit", "verify", "--config", cfg, "--checkpoint", cpPath, "--partial")
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "audit trail as "+scoped.Role+" (tenants acme)")
	require.Regexp(t, `(?m)^acme\s+6\s+6\s+\S+\s+seq 6 ✓\s+✓ ok$`, out)
	require.NotContains(t, out, "\nglobex ")
	require.Contains(t, out, "not checked, not visible to "+scoped.Role+" (or gone): globex\n")

	// Its own checkpoint holds its chain alone.
	code, out, errOut = run("audit", "checkpoint", "--config", cfg, "--key", key)
	require.Equal(t, ExitOK, code, errOut)
	var cp audit.Checkpoint
	require.NoError(t, json.Unmarshal([]byte(out), &cp))
	require.Len(t, cp.Chains, 1)
	require.Equal(t, "acme", cp.Chains[0].Tenant)

	// Someone who sees no tenant has nothing to sign.
	nobody := dbtest.NewPerson(t, s.d, "viewer", "initech")
	code, out, errOut = run("audit", "checkpoint", "--config", personConfig(t, nobody, ""), "--key", key)
	require.Equal(t, ExitFailure, code, out)
	require.Equal(t, "opsdesk: nothing to sign: no audit chain visible to "+nobody.Role+"\n", errOut)
}

func TestAuditUsageErrors(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "audit.key")
	code, _, _ := run("audit", "keygen", "--out", key)
	require.Equal(t, ExitOK, code)
	existing := filepath.Join(dir, "exists.json")
	require.NoError(t, os.WriteFile(existing, []byte("{}"), 0o600))
	cpPath := filepath.Join(dir, "cp.json")
	code, _, errOut := run("audit", "checkpoint", "--config", s.cfg, "--key", key, "--out", cpPath)
	require.Equal(t, ExitOK, code, errOut)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"audit"}, "audit needs a command"},
		{[]string{"audit", "verify", "-o", "yaml"}, `-o "yaml"`},
		{[]string{"audit", "verify", "--public-key", key + ".pub"}, "give --checkpoint too"},
		{[]string{"audit", "verify", "--partial"}, "--partial accepts a checkpoint's chains left unchecked: give --checkpoint too"},
		{[]string{"audit", "verify", "--checkpoint", filepath.Join(dir, "missing.json")}, "missing.json"},
		{[]string{"audit", "verify", "--checkpoint", existing}, "not an opsdesk audit checkpoint"},
		{[]string{"audit", "verify", "--checkpoint", cpPath, "--public-key", existing}, "--public-key: " + existing + " is not a PEM key file"},
		{[]string{"audit", "verify", "extra"}, "accepts 0 arg"},
		{[]string{"audit", "checkpoint"}, "--key is required"},
		{[]string{"audit", "checkpoint", "--key", key + ".pub"}, `not a "PRIVATE KEY"`},
		{[]string{"audit", "checkpoint", "--key", key, "--out", existing}, "is never overwritten"},
		{[]string{"audit", "keygen"}, "--out is required"},
		{[]string{"audit", "keygen", "--out", key}, "keygen never overwrites a key"},
	} {
		code, out, errOut := run(append(tc.args, "--config", s.cfg)...)
		require.Equal(t, ExitUsage, code, "%v: %s%s", tc.args, out, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
	data, err := os.ReadFile(existing)
	require.NoError(t, err)
	require.Equal(t, "{}", string(data), "an existing file is left alone")
}
