package storeview

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/ops"
)

// TestExtremeTimes: records a superuser or a restored backup gave
// infinite or absurd times (no service may, migration 00024) are read by
// every query a viewer of their tenant runs, and a list sorted by such a
// time pages through them once each: its cursor sends the time back as it
// came. Every read of the tenant failed with "cannot scan Infinity into
// *time.Time".
func TestExtremeTimes(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	dbtest.InsertExtremeTimes(t, d)
	// Ties at the infinities, after them in id order, and ordinary times.
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at)
SELECT 'acme', 'charge-card', k.key, '1', sha256(k.key::bytea), 'external_unknown', k.state, k.outcome, 'w',
    now(), k.lease, now(), k.completed, k.expires
FROM (VALUES
    ('never-2', 'pending', NULL, 'infinity'::timestamptz, NULL::timestamptz, NULL::timestamptz),
    ('always-2', 'pending', NULL, '-infinity', NULL, NULL),
    ('live', 'pending', NULL, now() + interval '1 minute', NULL, NULL),
    ('kept-2', 'completed', 'succeeded', now(), now(), 'infinity'),
    ('gone', 'completed', 'succeeded', now(), now(), '-infinity'),
    ('soon', 'completed', 'succeeded', now(), now(), now() + interval '1 day')
) AS k (key, state, outcome, lease, completed, expires)`)
	require.NoError(t, err)
	viewer := dbtest.NewPerson(t, d, "viewer", "acme")
	s := New(viewer.Pool, Config{})
	ctx := t.Context()
	total, err := s.Total(ctx, readmodel.Filter{})
	require.NoError(t, err)
	require.Equal(t, readmodel.Count{N: 11}, total)

	for _, sort := range readmodel.Sorts {
		var keys []string
		var after *readmodel.Cursor
		for range 20 {
			page, err := s.List(ctx, readmodel.Query{Sort: sort, Limit: 1, After: after})
			require.NoError(t, err, sort)
			for _, r := range page.Rows {
				keys = append(keys, r.Key)
			}
			if after = page.Next; after == nil {
				break
			}
		}
		require.ElementsMatch(t, append([]string{"never-2", "always-2", "live", "kept-2", "gone", "soon"}, dbtest.ExtremeKeys...),
			keys, "sorted by %s, one row a page", sort)
		switch sort {
		case readmodel.SortLease:
			require.Equal(t, []string{dbtest.LeaseEndedAlways, "always-2", "live", dbtest.LeaseToYear294276,
				dbtest.LeaseNeverEnds, "never-2"}, keys[:6])
		case readmodel.SortExpires:
			require.Equal(t, []string{"gone", "soon", dbtest.KeptToYear294276, dbtest.KeptForEver, "kept-2"}, keys[:5])
		}
	}

	byKey := func(tool, key string) readmodel.Detail {
		t.Helper()
		det, err := s.GetByIdentity(ctx, "acme", tool, key)
		require.NoError(t, err, key)
		return det
	}
	never := byKey("charge-card", dbtest.LeaseNeverEnds)
	require.True(t, ops.Infinity.Equal(never.LeaseExpiresAt))
	require.Equal(t, readmodel.StatePending, never.State)
	require.True(t, never.LeaseLive())
	always := byKey("charge-card", dbtest.LeaseEndedAlways)
	require.Equal(t, readmodel.StateStuck, always.State)
	require.True(t, ops.NegativeInfinity.Equal(always.LeasedAt))
	require.True(t, ops.NegativeInfinity.Equal(always.CreatedAt))
	require.Equal(t, time.Duration(1<<63-1), always.LeaseAge())
	kept := byKey("create-ticket", dbtest.KeptForEver)
	require.True(t, ops.Infinity.Equal(kept.ExpiresAt))
	require.True(t, ops.NegativeInfinity.Equal(kept.CompletedAt))
	_, err = s.Get(ctx, kept.ID)
	require.NoError(t, err)

	o, err := s.Overview(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), o.Pending)
	require.Equal(t, int64(2), o.Stuck)
	require.NotNil(t, o.OldestStuck)
	require.True(t, ops.NegativeInfinity.Equal(o.OldestStuck.LeaseExpiresAt))
	_, err = s.Signals(ctx, SignalsOpts{ByTenant: true})
	require.NoError(t, err)
	_, err = s.Review(ctx, nil)
	require.NoError(t, err)
}
