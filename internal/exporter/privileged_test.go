package exporter

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// TestPrivilegedLoginsGauge: opsdesk_privileged_logins counts, by class,
// the logins that can bypass the database, as a one-tenant viewer's
// exporter sees them: one more of each class once an attacker of each
// is made, none for plain people, and one more member of opsdesk_owner
// when the CREATEROLE login grants itself opsdesk_owner (PostgreSQL
// before 16). The counts are the cluster's, so it runs on a cluster of its
// own: make test's other packages, sharing one server, make such logins
// meanwhile (internal/cli's bypassers, opsmigrate's database owner).
func TestPrivilegedLoginsGauge(t *testing.T) {
	t.Parallel()
	d := dbtest.NewOnOwnCluster(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "acme")
	e := newExporter(viewer.Pool, Config{})
	before := scrape(t, e).series("opsdesk_privileged_logins")
	require.Len(t, before, 5, "every class, zero or not: %v", before)
	require.GreaterOrEqual(t, before["class=superuser"], 1.0, "the cluster's own superuser")

	b := dbtest.NewBypassers(t, d)
	dbtest.NewPerson(t, d, "viewer", "*")
	dbtest.NewPerson(t, d, "operator", "*")
	dbtest.NewPerson(t, d, "admin", "*")
	dbtest.NewService(t, d)
	want := map[string]float64{}
	for class, n := range before {
		want[class] = n + 1
	}
	if !b.PrePG16 {
		want["class=createrole"] = before["class=createrole"]
	}
	m := scrape(t, e)
	require.Equal(t, want, m.series("opsdesk_privileged_logins"))
	require.Equal(t, 0.0, m.value(t, "opsdesk_scrape_partial", ""))

	_, err := b.CreateRole.Pool.Exec(t.Context(), `GRANT opsdesk_owner TO `+pgx.Identifier{b.CreateRole.Role}.Sanitize())
	if !b.PrePG16 {
		require.Error(t, err)
		return
	}
	require.NoError(t, err, "CREATEROLE grants itself opsdesk_owner")
	want["class=opsdesk_owner"]++
	require.Equal(t, want, scrape(t, e).series("opsdesk_privileged_logins"))
}
