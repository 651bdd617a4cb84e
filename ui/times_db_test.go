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
	dbtest.InsertExtremeTimes(t, d)
	viewer := dbtest.NewPerson(t, d, "viewer", "acme")
	h := newSourceHarness(t, storeview.New(viewer.Pool, storeview.Config{StatementTimeout: 5 * time.Second}),
		Config{Context: "db"}, 160, 40)

	for _, sort := range []string{"", "s", "s"} { // newest, by lease, by expiry
		h.keys(":ops<enter>" + sort)
		v := h.view()
		requireNoRaw(t, v)
		require.NotContains(t, v, "cannot scan", v)
		for _, key := range dbtest.ExtremeKeys {
			require.Contains(t, v, key, "the list lacks %s:\n%s", key, v)
		}
		require.Contains(t, flat(v), "5 of 5", v)
		require.Contains(t, v, "never", v)
		require.Contains(t, v, "-infinity", v)
		h.keys("<esc>")
	}

	h.keys(":key acme/charge-card/" + dbtest.LeaseNeverEnds + "<enter>")
	v := flat(h.view())
	require.Contains(t, v, "pending", v)
	require.Contains(t, v, "infinity (never)", "the lease's end:\n%s", h.view())
	h.keys("<esc>:key acme/charge-card/" + dbtest.LeaseEndedAlways + "<enter>")
	v = flat(h.view())
	require.Contains(t, v, "stuck", v)
	require.Contains(t, v, "-infinity", "the lease's end:\n%s", h.view())
	h.keys("<esc>:key acme/create-ticket/" + dbtest.KeptToYear294276 + "<enter>")
	v = flat(h.view())
	require.Contains(t, v, "until infinity (never)", "the retention:\n%s", h.view())
	require.NotContains(t, v, "cannot scan", v)
}
