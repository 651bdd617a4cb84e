package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// bundle is a fresh store and an operator who sees every tenant.
type bundle struct {
	d        *dbtest.DB
	operator *dbtest.Person
	ops      map[string]int64 // tenant → the operation decided on
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d := dbtest.New(t)
	return &bundle{d: d, operator: dbtest.NewPerson(t, d, "operator", "*"), ops: map[string]int64{}}
}

// chain appends n records to tenant's chain the real way: the operator's
// decisions on a stuck record, alternately a deferral and a refusal (a
// stale version). Tenant "" gets refusals of a record nobody can see.
func (b *bundle) chain(t *testing.T, tenant string, n int) {
	t.Helper()
	ctx := t.Context()
	id, ok := b.ops[tenant]
	if !ok && tenant != "" {
		err := b.d.Admin.QueryRow(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
VALUES ($1, 'create-ticket', 'run-1', '1', decode(repeat('03', 32), 'hex'), 'external_unknown', 'pending', 'worker-3',
        now() - interval '42m', now() - interval '41m')
RETURNING id`, tenant).Scan(&id)
		require.NoError(t, err)
		b.ops[tenant] = id
	}
	for i := range n {
		version := int64(1)
		want := "succeeded"
		if tenant == "" {
			id, want = 0, "failed"
		} else if i%2 == 1 {
			version, want = 7, "failed" // changed since you looked
		}
		decide(t, b.operator.Pool, id, version, want)
	}
}

func decide(t *testing.T, pool *pgxpool.Pool, id, version int64, want string) {
	t.Helper()
	var outcome string
	var message *string
	err := pool.QueryRow(t.Context(), `
SELECT outcome, message FROM opsdesk.decide(p_id => $1, p_decision => 'defer', p_expect_version => $2,
    p_reason => 'waiting for the provider', p_snooze_until => now() + interval '1 hour')`, id, version).Scan(&outcome, &message)
	require.NoError(t, err)
	require.Equal(t, want, outcome, "%v", message)
}

// tamper runs sql as the superuser with the append-only trigger off, as
// someone with the table's ownership could.
func (b *bundle) tamper(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx := t.Context()
	tx, err := b.d.Admin.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	_, err = tx.Exec(ctx, `ALTER TABLE opsdesk.audit DISABLE TRIGGER audit_no_change`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, sql, args...)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_change`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

func (b *bundle) verify(t *testing.T, opts VerifyOpts) *Report {
	t.Helper()
	rep, err := Verify(t.Context(), b.operator.Pool, opts)
	require.NoError(t, err)
	return rep
}

// checkpoint signs the chains' current heads, as `audit checkpoint` does.
func (b *bundle) checkpoint(t *testing.T, key ed25519.PrivateKey) *Checkpoint {
	t.Helper()
	rep := b.verify(t, VerifyOpts{})
	require.True(t, rep.OK)
	cp, err := Sign(rep.At, rep.Heads(), key)
	require.NoError(t, err)
	return cp
}

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return key
}

func chainOf(t *testing.T, rep *Report, tenant string) Chain {
	t.Helper()
	for _, c := range rep.Chains {
		if c.Tenant == tenant {
			return c
		}
	}
	t.Fatalf("no chain %q in %+v", tenant, rep.Chains)
	return Chain{}
}

func requireBreak(t *testing.T, rep *Report, want string) {
	t.Helper()
	require.False(t, rep.OK)
	require.NotNil(t, rep.Break, "the report names no broken record")
	require.Equal(t, want, rep.Break.Error())
}

func TestVerifyCleanChains(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tenants := []string{"acme", "globex", "initech", "umbrella", "zoë corp"}
	// Interleaved, so chains grow side by side as they would.
	for round := range 3 {
		for i, tenant := range tenants {
			b.chain(t, tenant, 1+(i+round)%3)
		}
	}
	b.chain(t, "", 2)

	rep := b.verify(t, VerifyOpts{})
	require.True(t, rep.OK, "%+v", rep.Break)
	require.Nil(t, rep.Break)
	require.Equal(t, b.operator.Role, rep.Role)
	require.True(t, rep.SeesEveryTenant)
	require.Len(t, rep.Chains, len(tenants)+1)
	require.Equal(t, "", rep.Chains[0].Tenant, "chains are in tenant order")

	// Each chain's head is the one the database's head table holds.
	rows, err := b.d.Admin.Query(t.Context(), `SELECT tenant, seq, hash FROM opsdesk.audit_heads`)
	require.NoError(t, err)
	heads := 0
	for rows.Next() {
		var tenant string
		var seq int64
		var hash []byte
		require.NoError(t, rows.Scan(&tenant, &seq, &hash))
		c := chainOf(t, rep, tenant)
		require.Equal(t, seq, c.HeadSeq, tenant)
		require.Equal(t, seq, c.Records, tenant)
		require.Equal(t, HexBytes(hash), c.HeadHash, tenant)
		require.Nil(t, c.Break)
		heads++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(tenants)+1, heads)
	require.Equal(t, int64(6), chainOf(t, rep, "acme").Records) // 1+2+3

	// One tenant's chain alone.
	acme := "acme"
	rep = b.verify(t, VerifyOpts{Tenant: &acme})
	require.True(t, rep.OK)
	require.Len(t, rep.Chains, 1)
	require.Equal(t, "acme", rep.Chains[0].Tenant)
}

func TestVerifyEmptyTrail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rep := b.verify(t, VerifyOpts{})
	require.True(t, rep.OK)
	require.Empty(t, rep.Chains)
	require.Empty(t, rep.Heads())
}

// TestVerifyDetectsTampering tampers with acme's chain of 8 records, next
// to untouched globex and "" chains, and checks that verify names the
// first bad record and that the other chains still verify.
func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()

	setupChains := func(t *testing.T) *bundle {
		b := setup(t)
		b.chain(t, "acme", 8)
		b.chain(t, "globex", 3)
		b.chain(t, "", 2)
		require.True(t, b.verify(t, VerifyOpts{}).OK)
		return b
	}
	othersIntact := func(t *testing.T, rep *Report) {
		t.Helper()
		require.Nil(t, chainOf(t, rep, "globex").Break)
		require.Nil(t, chainOf(t, rep, "").Break)
		require.Equal(t, int64(3), chainOf(t, rep, "globex").HeadSeq)
	}

	t.Run("EditField", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		b.tamper(t, `UPDATE opsdesk.audit SET reason = 'nothing to see' WHERE tenant = 'acme' AND seq = 5`)
		rep := b.verify(t, VerifyOpts{})
		requireBreak(t, rep, "tenant acme seq 5: hash does not match its contents")
		require.Equal(t, &Break{Tenant: "acme", Seq: 5, Reason: "seq 5: hash does not match its contents"}, chainOf(t, rep, "acme").Break)
		require.Equal(t, int64(8), chainOf(t, rep, "acme").Records)
		othersIntact(t, rep)
	})

	t.Run("EditRole", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		b.tamper(t, `UPDATE opsdesk.audit SET role = 'mallory' WHERE tenant = 'acme' AND seq = 1`)
		requireBreak(t, b.verify(t, VerifyOpts{}), "tenant acme seq 1: hash does not match its contents")
	})

	t.Run("EditDetails", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		b.tamper(t, `UPDATE opsdesk.audit SET details = details || '{"expect_version": 2}' WHERE tenant = 'acme' AND seq = 2`)
		requireBreak(t, b.verify(t, VerifyOpts{}), "tenant acme seq 2: hash does not match its contents")
	})

	t.Run("DeleteMiddle", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		cp := b.checkpoint(t, newKey(t))
		b.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'acme' AND seq = 5`)
		rep := b.verify(t, VerifyOpts{})
		requireBreak(t, rep, "tenant acme seq 5 missing: 4 is followed by 6")
		require.Equal(t, int64(5), rep.Break.Seq)
		require.Equal(t, int64(7), chainOf(t, rep, "acme").Records)
		othersIntact(t, rep)
		// Against a checkpoint: the same first break, and the signed head
		// is still there.
		rep = b.verify(t, VerifyOpts{Checkpoint: cp})
		requireBreak(t, rep, "tenant acme seq 5 missing: 4 is followed by 6")
		require.True(t, chainOf(t, rep, "acme").Checkpoint.Confirmed)
	})

	t.Run("DeleteSeveral", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		b.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'acme' AND seq BETWEEN 3 AND 5`)
		requireBreak(t, b.verify(t, VerifyOpts{}), "tenant acme seqs 3 to 5 missing: 2 is followed by 6")
	})

	t.Run("DeleteFirst", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		b.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'acme' AND seq = 1`)
		requireBreak(t, b.verify(t, VerifyOpts{}), "tenant acme seq 1 missing: the chain starts at seq 2")
	})

	t.Run("SwapTwoRecords", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		// Records 3 and 4 trade places, each keeping its contents and hash.
		b.tamper(t, `
UPDATE opsdesk.audit SET seq = -3 WHERE tenant = 'acme' AND seq = 3;
UPDATE opsdesk.audit SET seq = 3 WHERE tenant = 'acme' AND seq = 4;
UPDATE opsdesk.audit SET seq = 4 WHERE tenant = 'acme' AND seq = -3`)
		requireBreak(t, b.verify(t, VerifyOpts{}), "tenant acme seq 3: hash does not match its contents")
	})

	t.Run("SwapTwoRecordsRenumbered", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		// The same, with each record rehashed at its new seq: only the
		// links give it away.
		b.tamper(t, `
UPDATE opsdesk.audit SET seq = -3 WHERE tenant = 'acme' AND seq = 3;
UPDATE opsdesk.audit SET seq = 3 WHERE tenant = 'acme' AND seq = 4;
UPDATE opsdesk.audit SET seq = 4 WHERE tenant = 'acme' AND seq = -3;
UPDATE opsdesk.audit a SET hash = opsdesk.audit_hash(a) WHERE tenant = 'acme' AND seq IN (3, 4)`)
		requireBreak(t, b.verify(t, VerifyOpts{}), "tenant acme prev_hash of seq 3 is not the hash of seq 2")
	})

	t.Run("RehashEdited", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		// Seq 6 is edited and given a hash of its new contents: it verifies
		// alone, and its successor's link breaks.
		b.tamper(t, `
UPDATE opsdesk.audit SET reason = 'approved by the CFO' WHERE tenant = 'acme' AND seq = 6;
UPDATE opsdesk.audit a SET hash = opsdesk.audit_hash(a) WHERE tenant = 'acme' AND seq = 6`)
		rep := b.verify(t, VerifyOpts{})
		requireBreak(t, rep, "tenant acme prev_hash of seq 7 is not the hash of seq 6")
		require.Equal(t, int64(7), rep.Break.Seq)
		othersIntact(t, rep)
	})

	t.Run("RehashedHead", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		// The head has no successor to betray it: only a checkpoint does.
		key := newKey(t)
		cp := b.checkpoint(t, key)
		b.tamper(t, `
UPDATE opsdesk.audit SET reason = 'approved by the CFO' WHERE tenant = 'acme' AND seq = 8;
UPDATE opsdesk.audit a SET hash = opsdesk.audit_hash(a) WHERE tenant = 'acme' AND seq = 8`)
		// The head row still holds the old hash.
		rep := b.verify(t, VerifyOpts{})
		require.False(t, rep.OK)
		require.Regexp(t, `^seq 8: hash \S+ is not the \S+ its head row holds$`, rep.Break.Reason)
		// Rewritten too, only the checkpoint tells.
		b.tamper(t, `UPDATE opsdesk.audit_heads h SET hash = a.hash FROM opsdesk.audit a WHERE a.tenant = h.tenant AND a.seq = h.seq`)
		require.True(t, b.verify(t, VerifyOpts{}).OK)
		rep = b.verify(t, VerifyOpts{Checkpoint: cp})
		require.False(t, rep.OK)
		require.Equal(t, "acme", rep.Break.Tenant)
		require.Equal(t, int64(8), rep.Break.Seq)
		require.Contains(t, rep.Break.Reason, "is not the")
		require.Contains(t, rep.Break.Reason, "the checkpoint signed: the chain was rewritten at or before seq 8")
	})

	t.Run("PrevHashOnFirst", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		b.tamper(t, `
UPDATE opsdesk.audit SET prev_hash = sha256('x') WHERE tenant = 'acme' AND seq = 1;
UPDATE opsdesk.audit a SET hash = opsdesk.audit_hash(a) WHERE tenant = 'acme' AND seq = 1`)
		requireBreak(t, b.verify(t, VerifyOpts{}), "tenant acme seq 1: prev_hash is set, but seq 1 starts the chain and follows nothing")
	})

	t.Run("UnknownHashVersion", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		b.tamper(t, `UPDATE opsdesk.audit SET hash_version = 2 WHERE tenant = 'acme' AND seq = 4`)
		requireBreak(t, b.verify(t, VerifyOpts{}), "tenant acme seq 4: hash version 2 is unknown (this opsdesk verifies version 1)")
	})

	t.Run("TruncatedTail", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		cp := b.checkpoint(t, newKey(t))
		b.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'acme' AND seq > 5`)
		// The chain alone leaves no trace of its tail; the head row does.
		requireBreak(t, b.verify(t, VerifyOpts{}),
			"tenant acme seqs 6 to 8 missing: the chain ends at seq 5, but its head row says seq 8: its tail was removed")
		// With the head row moved back too, only the checkpoint tells.
		b.tamper(t, `
UPDATE opsdesk.audit_heads SET seq = 5, hash = (SELECT hash FROM opsdesk.audit WHERE tenant = 'acme' AND seq = 5)
WHERE tenant = 'acme'`)
		require.True(t, b.verify(t, VerifyOpts{}).OK)
		rep := b.verify(t, VerifyOpts{Checkpoint: cp})
		requireBreak(t, rep, "tenant acme seqs 6 to 8 missing: the chain ends at seq 5, but the checkpoint signed seq 8: its tail was removed")
		require.Equal(t, int64(6), rep.Break.Seq)
		require.True(t, chainOf(t, rep, "globex").Checkpoint.Confirmed)
		othersIntact(t, rep)
	})

	t.Run("TruncatedAndRechained", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		cp := b.checkpoint(t, newKey(t))
		// The tail from seq 6 is removed, the head moved back, and new
		// decisions re-chain the tail past the checkpoint's seq 8.
		b.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'acme' AND seq > 5`)
		_, err := b.d.Admin.Exec(t.Context(), `
UPDATE opsdesk.audit_heads SET seq = 5, hash = (SELECT hash FROM opsdesk.audit WHERE tenant = 'acme' AND seq = 5)
WHERE tenant = 'acme'`)
		require.NoError(t, err)
		b.chain(t, "acme", 4)
		require.True(t, b.verify(t, VerifyOpts{}).OK, "the re-chained tail verifies on its own")

		rep := b.verify(t, VerifyOpts{Checkpoint: cp})
		require.False(t, rep.OK)
		require.Equal(t, "acme", rep.Break.Tenant)
		require.Equal(t, int64(8), rep.Break.Seq)
		require.Regexp(t, `^seq 8: hash [0-9a-f]{16}… is not the [0-9a-f]{16}… the checkpoint signed: the chain was rewritten at or before seq 8$`,
			rep.Break.Reason)
		othersIntact(t, rep)
	})

	t.Run("ChainGone", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		cp := b.checkpoint(t, newKey(t))
		b.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'globex'`)
		rep := b.verify(t, VerifyOpts{Checkpoint: cp})
		requireBreak(t, rep, "tenant globex seqs 1 to 3 missing: the chain is gone, but the checkpoint signed seq 3")
		require.True(t, chainOf(t, rep, "acme").Checkpoint.Confirmed)
	})

	t.Run("FirstBreakInTenantOrder", func(t *testing.T) {
		t.Parallel()
		b := setupChains(t)
		b.tamper(t, `UPDATE opsdesk.audit SET outcome = 'succeeded' WHERE tenant = 'globex' AND seq = 2`)
		b.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'acme' AND seq = 7`)
		rep := b.verify(t, VerifyOpts{})
		requireBreak(t, rep, "tenant acme seq 7 missing: 6 is followed by 8")
		require.Equal(t, "tenant globex seq 2: hash does not match its contents", chainOf(t, rep, "globex").Break.Error())
		require.Nil(t, chainOf(t, rep, "").Break)
	})
}

func TestVerifyWithCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.chain(t, "acme", 3)
	b.chain(t, "globex", 2)
	key := newKey(t)
	cp := b.checkpoint(t, key)
	require.Equal(t, []Head{
		{Tenant: "acme", Seq: 3, Hash: chainOf(t, b.verify(t, VerifyOpts{}), "acme").HeadHash},
		{Tenant: "globex", Seq: 2, Hash: chainOf(t, b.verify(t, VerifyOpts{}), "globex").HeadHash},
	}, cp.Chains)

	// The chains grew since: the checkpoint's heads are still in them.
	b.chain(t, "acme", 2)
	b.chain(t, "initech", 1)
	pub := key.Public().(ed25519.PublicKey)
	for _, pinned := range []ed25519.PublicKey{nil, pub} {
		rep := b.verify(t, VerifyOpts{Checkpoint: cp, PublicKey: pinned})
		require.True(t, rep.OK, "%+v %+v", rep.Break, rep.Checkpoint)
		require.Equal(t, pinned != nil, rep.Checkpoint.KeyPinned)
		require.Equal(t, Fingerprint(pub), rep.Checkpoint.KeyFingerprint)
		require.Equal(t, &CheckedHead{Seq: 3, Hash: cp.Chains[0].Hash, Confirmed: true}, chainOf(t, rep, "acme").Checkpoint)
		require.True(t, chainOf(t, rep, "globex").Checkpoint.Confirmed)
		require.Nil(t, chainOf(t, rep, "initech").Checkpoint, "a chain newer than the checkpoint")
	}

	acme := "acme"
	rep := b.verify(t, VerifyOpts{Checkpoint: cp, Tenant: &acme})
	require.True(t, rep.OK)
	require.Len(t, rep.Chains, 1)
	require.Equal(t, []string{"globex"}, rep.Checkpoint.NotSelected)

	t.Run("AnotherKeyIsRefused", func(t *testing.T) {
		other := newKey(t).Public().(ed25519.PublicKey)
		rep := b.verify(t, VerifyOpts{Checkpoint: cp, PublicKey: other})
		require.False(t, rep.OK)
		require.Nil(t, rep.Break, "the chains themselves verify")
		require.Contains(t, rep.Checkpoint.Problem, "signed with key "+Fingerprint(pub)+", not the expected "+Fingerprint(other))
	})

	t.Run("AlteredCheckpointIsRefused", func(t *testing.T) {
		altered := *cp
		altered.Chains = []Head{{Tenant: "acme", Seq: 2, Hash: cp.Chains[0].Hash}, cp.Chains[1]}
		rep := b.verify(t, VerifyOpts{Checkpoint: &altered})
		require.False(t, rep.OK)
		require.Contains(t, rep.Checkpoint.Problem, "signature does not verify")
		require.Nil(t, chainOf(t, rep, "acme").Checkpoint, "an unverified checkpoint's heads are not compared")
	})
}

// TestVerifyScopedOperator: an operator mapped to acme verifies acme's
// chain only; row-level security hides the others, tampered or not.
func TestVerifyScopedOperator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.chain(t, "acme", 4)
	b.chain(t, "globex", 3)
	b.chain(t, "", 1)
	cp := b.checkpoint(t, newKey(t))
	b.tamper(t, `UPDATE opsdesk.audit SET reason = 'x' WHERE tenant = 'globex' AND seq = 2`)
	requireBreak(t, b.verify(t, VerifyOpts{}), "tenant globex seq 2: hash does not match its contents")

	scoped := dbtest.NewPerson(t, b.d, "operator", "acme")
	rep, err := Verify(t.Context(), scoped.Pool, VerifyOpts{Checkpoint: cp})
	require.NoError(t, err)
	require.True(t, rep.OK, "%+v", rep.Break)
	require.Equal(t, scoped.Role, rep.Role)
	require.False(t, rep.SeesEveryTenant)
	require.Equal(t, []string{"acme"}, rep.Tenants)
	require.Len(t, rep.Chains, 1)
	require.Equal(t, "acme", rep.Chains[0].Tenant)
	require.Equal(t, int64(4), rep.Chains[0].Records)
	require.True(t, rep.Chains[0].Checkpoint.Confirmed)
	require.Equal(t, []string{"", "globex"}, rep.Checkpoint.NotVisible)

	// Asking for a hidden chain finds nothing, not another tenant's records.
	globex := "globex"
	rep, err = Verify(t.Context(), scoped.Pool, VerifyOpts{Tenant: &globex})
	require.NoError(t, err)
	require.Empty(t, rep.Chains)
}

func TestVerifyNeedsReadAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.chain(t, "acme", 1)
	_, err := Verify(t.Context(), b.d.Service, VerifyOpts{})
	require.ErrorIs(t, err, ErrNoAccess)
	require.Contains(t, err.Error(), "may not read the audit trail")
}

func ExampleBreak_Error() {
	fmt.Println((&Break{Tenant: "acme", Seq: 7, Reason: "seq 7: hash does not match its contents"}).Error())
	// Output: tenant acme seq 7: hash does not match its contents
}
