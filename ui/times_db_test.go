package ui

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

// TestExtremeTimesRealDatabase: records a superuser or a restored backup
// gave infinite or absurd times (no service may, migration 00024) are
// listed and shown by the console on a real store, to a viewer of their
// tenant: every read of the tenant failed with "cannot scan Infinity into
// *time.Time". A lease that never ends reads "never", one that ended at
// -infinity is stuck.
func TestExtremeTimesRealDatabase(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at)
VALUES
 ('acme', 'charge-card', 'lease-never-ends', '1', decode(repeat('04', 32), 'hex'), 'external_unknown', 'pending', NULL, 'w',
  now(), 'infinity', now(), NULL, NULL),
 ('acme', 'charge-card', 'lease-ended-always', '1', decode(repeat('06', 32), 'hex'), 'external_unknown', 'pending', NULL, 'w',
  '-infinity', '-infinity', '4713-01-01 00:00:00+00 BC', NULL, NULL),
 ('acme', 'create-ticket', 'kept-to-294276', '1', decode(repeat('08', 32), 'hex'), 'local', 'completed', 'succeeded', 'w',
  now(), now(), now(), 'infinity', '294276-12-31 23:59:59+00')`)
	require.NoError(t, err)
	viewer := dbtest.NewPerson(t, d, "viewer", "acme")
	h := newSourceHarness(t, storeview.New(viewer.Pool, storeview.Options{StatementTimeout: 5 * time.Second}),
		Options{Context: "db"}, 160, 40)

	for _, sort := range []string{"", "s", "s"} { // newest, by lease, by expiry
		h.keys(":ops<enter>" + sort)
		v := h.view()
		requireNoRaw(t, v)
		require.NotContains(t, v, "cannot scan", v)
		for _, key := range []string{"lease-never-ends", "lease-ended-always", "kept-to-294276"} {
			require.Contains(t, v, key, "the list lacks %s:\n%s", key, v)
		}
		require.Contains(t, flat(v), "3 of 3", v)
		require.Contains(t, v, "never", v)
		require.Contains(t, v, "-infinity", v)
		h.keys("<esc>")
	}

	h.keys(":key acme/charge-card/lease-never-ends<enter>")
	v := flat(h.view())
	require.Contains(t, v, "pending", v)
	require.Contains(t, v, "infinity (never)", "the lease's end:\n%s", h.view())
	h.keys("<esc>:key acme/charge-card/lease-ended-always<enter>")
	v = flat(h.view())
	require.Contains(t, v, "stuck", v)
	require.Contains(t, v, "-infinity", "the lease's end:\n%s", h.view())
	h.keys("<esc>:key acme/create-ticket/kept-to-294276<enter>")
	v = flat(h.view())
	require.Contains(t, v, "until infinity (never)", "the retention:\n%s", h.view())
	require.NotContains(t, v, "cannot scan", v)
}
