package audit

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func ptr[T any](v T) *T { return &v }

// TestHashEncoding pins version 1's byte string, written out by hand here
// rather than by the code under test.
func TestHashEncoding(t *testing.T) {
	t.Parallel()
	r := Record{
		Tenant: "acme", Seq: 7, EventID: "0b6f4c7e-2b1a-4c3d-9e8f-0123456789ab",
		At:   time.UnixMicro(1700000000000001),
		Role: "alice", DisplayName: nil, Action: "decide:defer", Outcome: "succeeded",
		Tool: ptr("create-ticket"), Key: ptr(""), OperationID: ptr(int64(42)),
		StateBefore: ptr("stuck"), StateAfter: ptr("stuck"), VersionBefore: ptr(int64(3)), VersionAfter: ptr(int64(3)),
		Reason: ptr("Zoë"), Forced: true, Override: false,
		Details:  ptr(`{"a": 1}`),
		PrevHash: []byte{0xab, 0x01},
	}
	want := "opsdesk-audit-v1" +
		"4:acme" + "1:7" + "36:0b6f4c7e-2b1a-4c3d-9e8f-0123456789ab" + "16:1700000000000001" +
		"5:alice" + "-" + "12:decide:defer" + "9:succeeded" +
		"13:create-ticket" + "0:" + "2:42" +
		"5:stuck" + "5:stuck" + "1:3" + "1:3" +
		"4:Zoë" + "-" + "-" + // the length is in bytes: ë is two
		"1:t" + "1:f" +
		`8:{"a": 1}` +
		"4:ab01"
	sum := sha256.Sum256([]byte(want))
	require.Equal(t, sum[:], Hash(r))

	// NULL and the empty string differ, for text and for prev_hash.
	empty := r
	empty.DisplayName = ptr("")
	require.NotEqual(t, Hash(r), Hash(empty))
	noPrev, emptyPrev := r, r
	noPrev.PrevHash, emptyPrev.PrevHash = nil, []byte{}
	require.NotEqual(t, Hash(noPrev), Hash(emptyPrev))
	// Hash and HashVersion are not hashed.
	other := r
	other.Hash, other.HashVersion = []byte{1}, 9
	require.Equal(t, Hash(r), Hash(other))
}

// TestHashMatchesDatabase inserts records by hand and checks Go's hash
// against opsdesk.audit_hash's for each, through Read.
func TestHashMatchesDatabase(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	_, err := d.Admin.Exec(ctx, `
INSERT INTO opsdesk.audit (tenant, seq, event_id, at, role, display_name, action, outcome, tool, key, operation_id,
    state_before, state_after, version_before, version_after, reason, evidence_digest, evidence_summary,
    forced, override, details, prev_hash, hash, hash_version)
VALUES
 -- every nullable column NULL
 ('nulls', 1, gen_random_uuid(), now(), 'alice', NULL, 'decide:defer', 'failed', NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, false, NULL, NULL, '\x00', 1),
 -- every text column empty (not NULL), an empty prev_hash, an empty JSON string
 ('', 2, gen_random_uuid(), now(), '', '', '', 'denied', '', '', 0,
  '', '', 0, 0, '', '', '', true, false, '""', '\x', '\x00', 1),
 -- non-ASCII, control characters, separators inside values
 ('zoë', 3, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '2024-02-29 23:59:59.999999+05:30', 'rôle_ü', 'Zoë Ångström 日本語 🚀',
  'decide:completed', 'succeeded', 'tool:with:colons', E'key\nwith newline\t-', 9223372036854775807,
  'stuck', 'completed', -1, 9223372036854775807, E'naïve “reason” 12:3 -', 'sha256:' || repeat('ab', 32), 'résumé ✓',
  false, true,
  '{"z": "héllo 🚀", "a": [1, 1.50, null, true, {"b": "x\"y"}], "snooze_until": "2024-01-01T00:00:00+00:00", "e": "\u00e9"}',
  sha256('x'), '\x00', 1),
 -- a time before the epoch, large numbers, a JSON scalar
 ('acme', 9223372036854775807, gen_random_uuid(), '1969-12-31 23:59:59.999999+00', 'bob', NULL,
  'reveal:result', 'succeeded', 'charge-card', 'ord-1', -9223372036854775808,
  NULL, NULL, NULL, NULL, repeat('é', 1000), NULL, NULL, true, true, '12345678901234567890.5', sha256('y'), '\x00', 1)`)
	require.NoError(t, err)

	want := map[string][]byte{}
	rows, err := d.Admin.Query(ctx, `SELECT tenant, opsdesk.audit_hash(a) FROM opsdesk.audit a`)
	require.NoError(t, err)
	for rows.Next() {
		var tenant string
		var h []byte
		require.NoError(t, rows.Scan(&tenant, &h))
		want[tenant] = h
	}
	require.NoError(t, rows.Err())
	require.Len(t, want, 4)

	var got []Record
	require.NoError(t, Read(ctx, d.Admin, ReadOpts{}, func(r Record) error {
		got = append(got, r)
		return nil
	}))
	require.Len(t, got, 4)
	for _, r := range got {
		require.Equal(t, want[r.Tenant], Hash(r), "tenant %q", r.Tenant)
	}

	// Read keeps NULL and empty apart, and event_id in its text form.
	byTenant := map[string]Record{}
	for _, r := range got {
		byTenant[r.Tenant] = r
	}
	require.Nil(t, byTenant["nulls"].Reason)
	require.Nil(t, byTenant["nulls"].PrevHash)
	require.Nil(t, byTenant["nulls"].Details)
	require.Equal(t, ptr(""), byTenant[""].Reason)
	require.NotNil(t, byTenant[""].PrevHash)
	require.Empty(t, byTenant[""].PrevHash)
	require.Equal(t, ptr(`""`), byTenant[""].Details)
	require.Equal(t, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", byTenant["zoë"].EventID)
}

// TestHashMatchesAppendedRecords checks Go's hash against the one stored by
// opsdesk.audit_append for records the decision functions wrote.
func TestHashMatchesAppendedRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.chain(t, "acme", 4)
	b.chain(t, "", 2)
	n := 0
	require.NoError(t, Read(t.Context(), b.operator.Pool, ReadOpts{}, func(r Record) error {
		n++
		require.Equal(t, r.Hash, Hash(r), "tenant %q seq %d", r.Tenant, r.Seq)
		return nil
	}))
	require.Equal(t, 6, n)
}
