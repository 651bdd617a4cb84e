package exporter

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// ages of the fixtures' oldest stuck records, by tool (and tenant).
const (
	threeHours = 3 * 60 * 60
	twentyMin  = 20 * 60
	tenMin     = 10 * 60
)

// requireAge checks an oldest-stuck age: the fixtures were written a few
// seconds before the scrape.
func requireAge(t *testing.T, want float64, got float64, what string) {
	t.Helper()
	require.GreaterOrEqual(t, got, want, what)
	require.Less(t, got, want+30, what)
}

// TestMetricsMatchHandCountedFixtures checks every metric, by tool and by
// tenant and tool, against the fixtures, as a viewer of every tenant.
func TestMetricsMatchHandCountedFixtures(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")

	t.Run("ByTool", func(t *testing.T) {
		t.Parallel()
		m := scrape(t, newExporter(viewer.Pool, Config{}))
		want := map[string]map[string]float64{
			"charge-card":   {"pending": 1, "stuck": 5, "deferred": 1, "completed": 0, "rejected": 1, "released": 0},
			"send-email":    {"pending": 0, "stuck": 0, "deferred": 0, "completed": 4, "rejected": 0, "released": 1},
			"create-ticket": {"pending": 0, "stuck": 1, "deferred": 0, "completed": 1, "rejected": 1, "released": 0},
		}
		ops := m.series("opsdesk_operations")
		require.Len(t, ops, 18, "3 tools, 6 states")
		for tool, states := range want {
			for state, n := range states {
				labels := "state=" + state + ",tool=" + tool
				require.Equal(t, n, ops[labels], labels)
				require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", labels), labels)
			}
		}
		for tool, n := range map[string]float64{"charge-card": 1} {
			require.Equal(t, n, m.value(t, "opsdesk_deferred_due", "tool="+tool))
		}
		require.Equal(t, map[string]float64{"tool=charge-card": 1, "tool=send-email": 0, "tool=create-ticket": 0},
			m.series("opsdesk_deferred_due"))
		require.Equal(t, map[string]float64{"tool=charge-card": 0, "tool=send-email": 1, "tool=create-ticket": 1},
			m.series("opsdesk_conflicts_unreviewed"))
		require.Equal(t, map[string]float64{"tool=charge-card": 0, "tool=send-email": 1, "tool=create-ticket": 2},
			m.series("opsdesk_retention_expired"))
		for _, state := range []string{"conflicts_unreviewed", "deferred_due", "retention_expired"} {
			require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", "state="+state+",tool=send-email"))
		}
		oldest := m.series("opsdesk_oldest_stuck_seconds")
		require.Len(t, oldest, 3)
		requireAge(t, threeHours, oldest["tool=charge-card"], "d3: its deferral is stale; d1 (2h) is deferred")
		requireAge(t, twentyMin, oldest["tool=create-ticket"], "t3")
		require.Zero(t, oldest["tool=send-email"], "nothing stuck")

		require.Equal(t, 1.0, m.value(t, "opsdesk_purge_unfinished_runs", ""))
		require.Equal(t, map[string]float64{"tenant=acme": 3, "tenant=": 1}, m.series("opsdesk_audit_chain_head_seq"),
			"acme: the three deferrals; '': the purge's start record")
		require.Equal(t, 1.0, m.value(t, "opsdesk_store_up", ""))
		require.Equal(t, 0.0, m.value(t, "opsdesk_scrape_partial", ""))
		require.Equal(t, 0.0, m.value(t, "opsdesk_scrape_errors_total", ""))
		require.Greater(t, m.value(t, "opsdesk_scrape_duration_seconds", ""), 0.0)
		require.Empty(t, m.series("opsdesk_audit_verify_ok"), "only with --verify-every")
		require.NotEmpty(t, m.series("go_goroutines"), "and the process's own metrics")
	})

	t.Run("ByTenant", func(t *testing.T) {
		t.Parallel()
		m := scrape(t, newExporter(viewer.Pool, Config{TenantLabels: true}))
		want := map[string]map[string]float64{
			"acme/charge-card":     {"pending": 0, "stuck": 4, "deferred": 1, "rejected": 0},
			"globex/charge-card":   {"pending": 1, "stuck": 1, "deferred": 0, "rejected": 1},
			"acme/send-email":      {"completed": 3, "released": 1},
			"globex/send-email":    {"completed": 1, "released": 0},
			"acme/create-ticket":   {"stuck": 1, "completed": 0},
			"globex/create-ticket": {"stuck": 0, "completed": 1, "rejected": 1},
		}
		ops := m.series("opsdesk_operations")
		require.Len(t, ops, 6*6, "6 tenants' tools, 6 states")
		for group, states := range want {
			tenant, tool, _ := strings.Cut(group, "/")
			for state, n := range states {
				labels := "state=" + state + ",tenant=" + tenant + ",tool=" + tool
				require.Equal(t, n, ops[labels], labels)
			}
		}
		require.Equal(t, 1.0, m.value(t, "opsdesk_deferred_due", "tenant=acme,tool=charge-card"))
		require.Equal(t, 1.0, m.value(t, "opsdesk_conflicts_unreviewed", "tenant=acme,tool=send-email"))
		require.Equal(t, 0.0, m.value(t, "opsdesk_conflicts_unreviewed", "tenant=globex,tool=send-email"))
		require.Equal(t, 2.0, m.value(t, "opsdesk_retention_expired", "tenant=globex,tool=create-ticket"))
		oldest := m.series("opsdesk_oldest_stuck_seconds")
		requireAge(t, threeHours, oldest["tenant=acme,tool=charge-card"], "acme's d3")
		requireAge(t, tenMin, oldest["tenant=globex,tool=charge-card"], "globex's g1")
		require.Equal(t, map[string]float64{"tenant=acme": 3, "tenant=": 1}, m.series("opsdesk_audit_chain_head_seq"))
	})
}

// TestStuckAfterDelaysStuck: a context's stuck_after keeps a record whose
// lease expired less long ago pending, as the console does.
func TestStuckAfterDelaysStuck(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	m := scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{StuckAfter: 15 * time.Minute}))
	// s2 (5m) and g1 (10m) are pending, not stuck.
	require.Equal(t, 3.0, m.value(t, "opsdesk_operations", "state=stuck,tool=charge-card"))
	require.Equal(t, 3.0, m.value(t, "opsdesk_operations", "state=pending,tool=charge-card"))
}

// TestOneTenantViewerLearnsNothingOfOthers attacks from a viewer of acme:
// nothing in its exporter's answer may depend on globex's records, with
// tenant labels or without. Globex holds far more rejected records than
// the cap, and a tool acme does not have; acme holds a few more than the
// cap. An estimate from the planner's statistics would count globex's
// too: the viewer must get the lower bound it counted instead.
func TestOneTenantViewerLearnsNothingOfOthers(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at)
SELECT tenant, tool, tenant || '-' || i, '1', sha256((tenant || i)::bytea), 'local', 'completed', 'rejected', 'w',
    now() - interval '1d', now() - interval '1d', now() - interval '1d', now() - interval '1d', now() + interval '6d'
FROM (VALUES ('globex', 'charge-card', 5000), ('globex', 'secret-globex-tool', 7), ('acme', 'charge-card', 1005)) AS f (tenant, tool, n),
    generate_series(1, f.n) i;
ANALYZE opsdesk.operations;`)
	require.NoError(t, err)

	acme := dbtest.NewPerson(t, d, "viewer", "acme")
	for _, tenantLabels := range []bool{false, true} {
		t.Run(fmt.Sprintf("TenantLabels=%v", tenantLabels), func(t *testing.T) {
			t.Parallel()
			body, _ := scrapeBody(t, newExporter(acme.Pool, Config{TenantLabels: tenantLabels}))
			require.NotContains(t, body, "globex")
			m := parse(t, body)
			prefix := ""
			if tenantLabels {
				prefix = "tenant=acme,"
			}
			// acme's figures alone: 1005 rejected counted up to the cap.
			require.Equal(t, 1000.0, m.value(t, "opsdesk_operations", "state=rejected,"+prefix+"tool=charge-card"),
				"the lower bound, not an estimate of acme's and globex's 6006")
			require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=rejected,"+prefix+"tool=charge-card"))
			require.Equal(t, 4.0, m.value(t, "opsdesk_operations", "state=stuck,"+prefix+"tool=charge-card"), "without globex's g1")
			require.Equal(t, 0.0, m.value(t, "opsdesk_operations", "state=pending,"+prefix+"tool=charge-card"), "without globex's live1")
			require.Equal(t, 3.0, m.value(t, "opsdesk_operations", "state=completed,"+prefix+"tool=send-email"), "without globex's m5")
			require.Equal(t, 0.0, m.value(t, "opsdesk_retention_expired", prefix+"tool=create-ticket"), "globex's t1 and t2")
			requireAge(t, threeHours, m.value(t, "opsdesk_oldest_stuck_seconds", prefix+"tool=charge-card"), "acme's d3")
			require.Len(t, m.series("opsdesk_oldest_stuck_seconds"), 3, "acme's three tools")
			require.Equal(t, map[string]float64{"tenant=acme": 3}, m.series("opsdesk_audit_chain_head_seq"),
				"neither globex's chain nor the '' chain")
			require.Empty(t, m.series("opsdesk_purge_unfinished_runs"), "purge runs span tenants")
			require.Equal(t, 0.0, m.value(t, "opsdesk_scrape_errors_total", ""))
		})
	}

	// The attack is no attack on a viewer of every tenant: it gets the
	// planner's estimate, which counts both tenants.
	t.Run("EveryTenantEstimates", func(t *testing.T) {
		t.Parallel()
		m := scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{}))
		require.InDelta(t, 6006, m.value(t, "opsdesk_operations", "state=rejected,tool=charge-card"), 600)
		require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=rejected,tool=charge-card"))
		require.Equal(t, 7.0, m.value(t, "opsdesk_operations", "state=rejected,tool=secret-globex-tool"))
	})
}

// TestViewerOfSomeTenantsAddsThemUp: a role that sees some tenants
// counts tenant by tenant and adds each tool's groups up. A viewer of
// both of the fixture's tenants (scoped, yet seeing every record) gets
// the figures a viewer of every tenant gets; with both tenants above the
// cap, its tool's count is the sum of their lower bounds, and says so.
func TestViewerOfSomeTenantsAddsThemUp(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	both := newExporter(dbtest.NewPerson(t, d, "viewer", "acme", "globex").Pool, Config{Logf: t.Logf})
	every := scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{}))
	m := scrape(t, both)
	for _, name := range []string{"opsdesk_operations", "opsdesk_operations_exact", "opsdesk_deferred_due",
		"opsdesk_conflicts_unreviewed", "opsdesk_retention_expired"} {
		require.Equal(t, every.series(name), m.series(name), name)
	}
	oldest := every.series("opsdesk_oldest_stuck_seconds")
	require.Len(t, m.series("opsdesk_oldest_stuck_seconds"), len(oldest))
	for labels, age := range oldest {
		require.InDelta(t, age, m.value(t, "opsdesk_oldest_stuck_seconds", labels), 5, labels)
	}

	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at)
SELECT tenant, 'charge-card', 'cap-' || tenant || '-' || i, '1', sha256((tenant || i)::bytea), 'local', 'completed', 'rejected', 'w',
    now() - interval '1d', now() - interval '1d', now() - interval '1d', now() - interval '1d', now() + interval '6d'
FROM (VALUES ('globex', 5000), ('acme', 1005)) AS f (tenant, n), generate_series(1, f.n) i;
ANALYZE opsdesk.operations;`)
	require.NoError(t, err)
	m = scrape(t, both)
	require.Equal(t, 2000.0, m.value(t, "opsdesk_operations", "state=rejected,tool=charge-card"),
		"each tenant's 1,000 counted, a lower bound of their 6,006")
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=rejected,tool=charge-card"))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", "state=rejected,tool=create-ticket"))

	// Two tenants each under the cap add up past it, exactly.
	_, err = d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at)
SELECT tenant, 'refund-card', 'sum-' || tenant || '-' || i, '1', sha256((tenant || 'r' || i)::bytea), 'local', 'completed', 'rejected', 'w',
    now() - interval '1d', now() - interval '1d', now() - interval '1d', now() - interval '1d', now() + interval '6d'
FROM (VALUES ('globex', 600), ('acme', 600)) AS f (tenant, n), generate_series(1, f.n) i;
ANALYZE opsdesk.operations;`)
	require.NoError(t, err)
	m = scrape(t, both)
	require.Equal(t, 1200.0, m.value(t, "opsdesk_operations", "state=rejected,tool=refund-card"), "600 and 600, each counted")
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", "state=rejected,tool=refund-card"))
}

// bulkPending is a store of acme's 2,100 pending records of the tool bulk
// and globex's one, their leases ending at acme's (SQL over now() and i,
// the record's number) and globex's; and a viewer of every tenant.
func bulkPending(t *testing.T, acme, globex string) (*dbtest.DB, *dbtest.Person) {
	t.Helper()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT tenant, 'bulk', tenant || i, '1', sha256((tenant || i)::bytea), 'local', 'pending', 'w',
    least(now(), ends - interval '1m'), ends
FROM (SELECT 'acme', i, `+acme+` FROM generate_series(1, 2100) i
      UNION ALL SELECT 'globex', 1, `+globex+`) AS f (tenant, i, ends);
ANALYZE opsdesk.operations;`)
	require.NoError(t, err)
	return d, dbtest.NewPerson(t, d, "viewer", "*")
}

// TestStuckAboveTheCap: a tool with more stuck records than the exporter
// reads (1001 a tenant) reports estimates, says so, and still finds each
// group's oldest stuck record: globex's one record, younger than all of
// acme's 2,100, was not among those read.
func TestStuckAboveTheCap(t *testing.T) {
	t.Parallel()
	d, viewer := bulkPending(t, "now() - interval '2h' - i * interval '1s'", "now() - interval '5m'")

	m := scrape(t, newExporter(viewer.Pool, Config{TenantLabels: true, Logf: t.Logf}))
	requireAge(t, tenMin/2, m.value(t, "opsdesk_oldest_stuck_seconds", "tenant=globex,tool=bulk"), "globex's")
	requireAge(t, 2*60*60+2100, m.value(t, "opsdesk_oldest_stuck_seconds", "tenant=acme,tool=bulk"), "acme's")
	for _, tenant := range []string{"acme", "globex"} {
		require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=stuck,tenant="+tenant+",tool=bulk"))
	}
	require.InDelta(t, 2100, m.value(t, "opsdesk_operations", "state=stuck,tenant=acme,tool=bulk"), 210)

	m = scrape(t, newExporter(viewer.Pool, Config{}))
	require.InDelta(t, 2101, m.value(t, "opsdesk_operations", "state=stuck,tool=bulk"), 210)
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=stuck,tool=bulk"))
	requireAge(t, 2*60*60+2100, m.value(t, "opsdesk_oldest_stuck_seconds", "tool=bulk"), "acme's")

	// A viewer of globex reads globex's one record, exactly.
	m = scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "globex").Pool, Config{Logf: t.Logf}))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations", "state=stuck,tool=bulk"))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", "state=stuck,tool=bulk"))
	requireAge(t, tenMin/2, m.value(t, "opsdesk_oldest_stuck_seconds", "tool=bulk"), "globex's")

	// A viewer of acme walks acme's records of each tool alone: bulk's
	// 2,100 are a lower bound (no estimate for a scoped role), and another
	// tool's three stuck records, younger than all of them, are counted
	// exactly.
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT 'acme', 'small', 'small' || i, '1', sha256(('small' || i)::bytea), 'local', 'pending', 'w',
    now() - interval '1h', now() - interval '20m' - i * interval '1s'
FROM generate_series(1, 3) i`)
	require.NoError(t, err)
	m = scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{Logf: t.Logf}))
	require.Equal(t, 1001.0, m.value(t, "opsdesk_operations", "state=stuck,tool=bulk"), "the records read")
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=stuck,tool=bulk"))
	requireAge(t, 2*60*60+2100, m.value(t, "opsdesk_oldest_stuck_seconds", "tool=bulk"), "acme's")
	require.Equal(t, 3.0, m.value(t, "opsdesk_operations", "state=stuck,tool=small"))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", "state=stuck,tool=small"))
	requireAge(t, 20*60+3, m.value(t, "opsdesk_oldest_stuck_seconds", "tool=small"), "acme's small3")
	require.Len(t, m.series("opsdesk_oldest_stuck_seconds"), 2, "acme's two tools")
}

// TestLiveAboveTheCap: the live records are read one walk a tool, up to
// 1001 a tenant; a tenant the walk stopped short of is counted alone, and
// exactly: globex's one record, leased after all of acme's 2,100.
func TestLiveAboveTheCap(t *testing.T) {
	t.Parallel()
	d, viewer := bulkPending(t, "now() + interval '1h' + i * interval '1s'", "now() + interval '3h'")

	m := scrape(t, newExporter(viewer.Pool, Config{TenantLabels: true, Logf: t.Logf}))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations", "state=pending,tenant=globex,tool=bulk"))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", "state=pending,tenant=globex,tool=bulk"))
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=pending,tenant=acme,tool=bulk"))
	require.InDelta(t, 2100, m.value(t, "opsdesk_operations", "state=pending,tenant=acme,tool=bulk"), 210)

	m = scrape(t, newExporter(viewer.Pool, Config{}))
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=pending,tool=bulk"))
	require.InDelta(t, 2101, m.value(t, "opsdesk_operations", "state=pending,tool=bulk"), 210)

	// A viewer of globex walks globex's one record, exactly.
	m = scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "globex").Pool, Config{Logf: t.Logf}))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations", "state=pending,tool=bulk"))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", "state=pending,tool=bulk"))

	// A viewer of acme counts acme's 2,100 up to the cap, a lower bound.
	m = scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{Logf: t.Logf}))
	require.Equal(t, 1000.0, m.value(t, "opsdesk_operations", "state=pending,tool=bulk"))
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=pending,tool=bulk"))
}

// TestCompletedOnALargeTable: past 100,000 records the completed count
// is the planner's estimate for a viewer of every tenant, and for a viewer
// of one tenant a count up to the cap, never an estimate from statistics
// that count the other tenants too.
func TestCompletedOnALargeTable(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at)
SELECT tenant, 'bulk', tenant || '-' || i, '1', sha256((tenant || i)::bytea), 'local', 'completed', 'succeeded', 'w',
    now() - interval '1d', now() - interval '1d', now() - interval '1d', now() - interval '1d', now() + interval '6d'
FROM (VALUES ('acme', 1100), ('globex', 100000)) AS f (tenant, n), generate_series(1, f.n) i;
-- acme's tools of few succeeded records: one with a few rejected, one
-- with more rejected than the cap.
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at)
SELECT 'acme', tool, outcome || '-' || i, '1', sha256((tool || outcome || i)::bytea), 'local', 'completed', outcome, 'w',
    now() - interval '1d', now() - interval '1d', now() - interval '1d', now() - interval '1d', now() + interval '6d'
FROM (VALUES ('few', 'succeeded', 30), ('few', 'rejected', 20), ('refused', 'succeeded', 5), ('refused', 'rejected', 1100))
    AS f (tool, outcome, n), generate_series(1, f.n) i;
ANALYZE opsdesk.operations;`)
	require.NoError(t, err)

	m := scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{Logf: t.Logf}))
	require.InDelta(t, 101100, m.value(t, "opsdesk_operations", "state=completed,tool=bulk"), 10000)
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=completed,tool=bulk"))
	// By tenant, each tenant's share of the tool's estimate. (The
	// planner takes tenant and tool to be independent: acme's share of
	// bulk is taken to be its share of the table, 2%, not its 1%.)
	m = scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{TenantLabels: true, Logf: t.Logf}))
	require.InDelta(t, 100000, m.value(t, "opsdesk_operations", "state=completed,tenant=globex,tool=bulk"), 10000)
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=completed,tenant=acme,tool=bulk"))

	m = scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{Logf: t.Logf}))
	require.Equal(t, 1000.0, m.value(t, "opsdesk_operations", "state=completed,tool=bulk"), "acme's 1,100, counted up to the cap")
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=completed,tool=bulk"))
	// refused's 1,100 rejected are counted on from the index.
	for tool, want := range map[string]float64{"few": 30, "refused": 5} {
		require.Equal(t, want, m.value(t, "opsdesk_operations", "state=completed,tool="+tool), tool)
		require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", "state=completed,tool="+tool), tool)
	}
	require.Equal(t, 20.0, m.value(t, "opsdesk_operations", "state=rejected,tool=few"))
}

// TestSucceededBeyondTheRejectedCounted: a one-tenant viewer's tool with
// more rejected records than it counts on from the index (ten times the
// cap) has its succeeded ones counted from the heap, exactly.
func TestSucceededBeyondTheRejectedCounted(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at)
SELECT tenant, tool, outcome || '-' || i, '1', sha256((tenant || tool || outcome || i)::bytea), 'local', 'completed', outcome, 'w',
    now() - interval '1d', now() - interval '1d', now() - interval '1d', now() - interval '1d', now() + interval '6d'
FROM (VALUES ('globex', 'bulk', 'succeeded', 100000), ('acme', 'all-but-7', 'succeeded', 7), ('acme', 'all-but-7', 'rejected', 10100))
    AS f (tenant, tool, outcome, n), generate_series(1, f.n) i;
ANALYZE opsdesk.operations;`)
	require.NoError(t, err)
	m := scrape(t, newExporter(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{Logf: t.Logf}))
	require.Equal(t, 7.0, m.value(t, "opsdesk_operations", "state=completed,tool=all-but-7"))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations_exact", "state=completed,tool=all-but-7"))
	require.Equal(t, 1000.0, m.value(t, "opsdesk_operations", "state=rejected,tool=all-but-7"), "the cap, a lower bound")
	require.Equal(t, 0.0, m.value(t, "opsdesk_operations_exact", "state=rejected,tool=all-but-7"))
}

// TestHostileNames: tool and tenant names are stored text; whatever they
// hold (quotes, backslashes, newlines, control characters, braces, 32 KiB),
// the exposition stays valid and each label reads back as stored.
func TestHostileNames(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	var controls strings.Builder
	for c := rune(1); c < 0x20; c++ {
		controls.WriteRune(c)
	}
	names := []string{
		`quote"d`, `back\slash`, "new\nline", "tab\there", "cr\rlf\n", controls.String() + "\x7f",
		`brace}{tool="x"} 1`, "# HELP opsdesk_store_up lies\nopsdesk_store_up 0", "ideo\u3000space", " ", "\t\n",
		"é\u200b\u202eevil", strings.Repeat(`"\`+"\n", 32<<10/3),
	}
	for i, name := range names {
		_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
VALUES ($1, $1, 'k', '1', sha256($2::bytea), 'local', 'pending', 'w', now() - interval '1h', now() - $3 * interval '1 minute')`,
			name, fmt.Sprint(i), i+1)
		require.NoError(t, err, "name %d", i)
	}
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	for _, tenantLabels := range []bool{false, true} {
		t.Run(fmt.Sprintf("TenantLabels=%v", tenantLabels), func(t *testing.T) {
			t.Parallel()
			m := scrape(t, newExporter(viewer.Pool, Config{TenantLabels: tenantLabels}))
			got := map[string]bool{}
			for _, s := range m["opsdesk_operations"].GetMetric() {
				var tool, tenant, state string
				for _, l := range s.GetLabel() {
					switch l.GetName() {
					case "tool":
						tool = l.GetValue()
					case "tenant":
						tenant = l.GetValue()
					case "state":
						state = l.GetValue()
					}
				}
				if tenantLabels {
					require.Equal(t, tool, tenant, "each record's tenant is its tool's name")
				}
				if state == "stuck" {
					require.Equal(t, 1.0, s.GetGauge().GetValue(), "%q", tool)
					got[tool] = true
				}
			}
			require.Len(t, got, len(names))
			for _, name := range names {
				require.True(t, got[name], "%q reads back as stored", name)
			}
			require.Equal(t, 1.0, m.value(t, "opsdesk_store_up", ""), "no record forged it")
		})
	}
}

// TestBudgetCutsASlowStoreShort: a session holding an ACCESS EXCLUSIVE
// lock on the operations blocks every read of them; the scrape still
// answers within its budget, with what it could read (the chain heads,
// the unfinished purges), and says that it is partial.
func TestBudgetCutsASlowStoreShort(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	const budget = 1500 * time.Millisecond
	e := newExporter(viewer.Pool, Config{Budget: budget, Logf: t.Logf})

	tx, err := d.Admin.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), `LOCK TABLE opsdesk.operations IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	body, took := scrapeBody(t, e)
	require.Less(t, took, budget+250*time.Millisecond, "answered within the budget")
	require.Greater(t, took, budget/2, "it did wait for the reads")
	m := parse(t, body)
	require.Equal(t, 1.0, m.value(t, "opsdesk_scrape_partial", ""))
	require.Equal(t, 1.0, m.value(t, "opsdesk_store_up", ""), "the store answers, the table is locked")
	require.Empty(t, m.series("opsdesk_operations"), "the operations' reads were cut short")
	require.Empty(t, m.series("opsdesk_oldest_stuck_seconds"))
	require.Equal(t, map[string]float64{"tenant=acme": 3, "tenant=": 1}, m.series("opsdesk_audit_chain_head_seq"))
	require.Equal(t, 1.0, m.value(t, "opsdesk_purge_unfinished_runs", ""))
	require.GreaterOrEqual(t, m.value(t, "opsdesk_scrape_errors_total", ""), 1.0)
	require.NoError(t, tx.Rollback(t.Context()))

	m = scrape(t, e)
	require.Equal(t, 0.0, m.value(t, "opsdesk_scrape_partial", ""))
	require.Equal(t, 5.0, m.value(t, "opsdesk_operations", "state=stuck,tool=charge-card"))
}

// TestReadKilledMidScrape: the store ends the sessions of a scrape's
// reads while they run (an administrator, a failover, a replica's
// recovery conflict): the scrape answers at once with what it read, and
// says that metrics are missing, as a read the budget cut short does, so
// that an alert on them not firing is itself seen; the next scrape reads
// them all again.
func TestReadKilledMidScrape(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	e := newExporter(viewer.Pool, Config{Budget: time.Minute, Logf: t.Logf})

	tx, err := d.Admin.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(t.Context(), `LOCK TABLE opsdesk.operations IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	type answer struct {
		rec  *httptest.ResponseRecorder
		took time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		rec, start := httptest.NewRecorder(), time.Now()
		e.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/metrics", nil))
		done <- answer{rec, time.Since(start)}
	}()
	require.Eventually(t, func() bool {
		var killed int
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE usename = $1 AND wait_event_type = 'Lock'`, viewer.Role).Scan(&killed))
		return killed > 0
	}, 10*time.Second, 10*time.Millisecond, "the scrape's reads wait for the lock")
	a := <-done
	require.Less(t, a.took, 10*time.Second, "answered when its reads failed, not at the budget")
	require.Equal(t, http.StatusOK, a.rec.Code, a.rec.Body.String())
	m := parse(t, a.rec.Body.String())
	require.Empty(t, m.series("opsdesk_operations"), "the killed read's metrics are missing")
	require.Equal(t, 1.0, m.value(t, "opsdesk_scrape_partial", ""), "and the scrape says so")
	require.GreaterOrEqual(t, m.value(t, "opsdesk_scrape_errors_total", ""), 1.0)
	require.Equal(t, map[string]float64{"tenant=acme": 3, "tenant=": 1}, m.series("opsdesk_audit_chain_head_seq"))
	require.NoError(t, tx.Rollback(t.Context()))

	m = scrape(t, e)
	require.Equal(t, 0.0, m.value(t, "opsdesk_scrape_partial", ""))
	require.Equal(t, 1.0, m.value(t, "opsdesk_store_up", ""))
	require.Equal(t, 5.0, m.value(t, "opsdesk_operations", "state=stuck,tool=charge-card"))
}

// TestUnreachableStore: a store that does not answer gives store_up 0 in
// a 200 answer with the exporter's own metrics, and /healthz 503; one
// that answers gives /healthz 200, after a scrape or by a ping.
func TestUnreachableStore(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	pool := lazyPool(t, fmt.Sprintf("host=%s port=%s user=nobody dbname=nothing connect_timeout=2", host, port))
	e := newExporter(pool, Config{Budget: time.Second, Logf: t.Logf})

	body, took := scrapeBody(t, e)
	require.Less(t, took, 1250*time.Millisecond)
	m := parse(t, body)
	require.Equal(t, 0.0, m.value(t, "opsdesk_store_up", ""))
	require.GreaterOrEqual(t, m.value(t, "opsdesk_scrape_errors_total", ""), 1.0)
	require.Contains(t, m, "opsdesk_scrape_duration_seconds")
	require.Contains(t, m, "opsdesk_scrape_partial")
	require.NotContains(t, m, "opsdesk_operations")
	require.Equal(t, http.StatusServiceUnavailable, health(t, e))

	d := dbtest.New(t)
	up := newExporter(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})
	require.Equal(t, http.StatusOK, health(t, up), "a ping reached the store")
	require.Equal(t, 1.0, scrape(t, up).value(t, "opsdesk_store_up", ""))
	require.Equal(t, http.StatusOK, health(t, up), "the scrape reached the store")
}

func health(t *testing.T, e *Exporter) int {
	t.Helper()
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/healthz", nil))
	return rec.Code
}

// TestScrapeTimeoutHeaderShortensTheBudget: Prometheus says how long it
// waits; an answer after that is no answer.
func TestScrapeTimeoutHeaderShortensTheBudget(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	e := newExporter(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{Budget: time.Minute, Logf: t.Logf})
	tx, err := d.Admin.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(t.Context(), `LOCK TABLE opsdesk.operations IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/metrics", nil)
	req.Header.Set(scrapeTimeoutHeader, "1")
	rec := httptest.NewRecorder()
	start := time.Now()
	e.Handler().ServeHTTP(rec, req)
	require.Less(t, time.Since(start), time.Second)
	require.Equal(t, 1.0, parse(t, rec.Body.String()).value(t, "opsdesk_scrape_partial", ""))
}

// TestVerifyEvery: the background verification reports each chain's
// result and time, and a chain that is tampered with fails at the next
// verification.
func TestVerifyEvery(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	var mu sync.Mutex
	var logged []string
	e := newExporter(viewer.Pool, Config{VerifyPool: viewer.Pool, VerifyEvery: 100 * time.Millisecond,
		Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, fmt.Sprintf(format, args...))
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.RunVerification(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	start := time.Now()
	var m metrics
	require.Eventually(t, func() bool {
		m = scrape(t, e)
		return len(m.series("opsdesk_audit_verify_ok")) == 2
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, map[string]float64{"tenant=acme": 1, "tenant=": 1}, m.series("opsdesk_audit_verify_ok"))
	at := m.value(t, "opsdesk_audit_verify_timestamp_seconds", "tenant=acme")
	require.InDelta(t, float64(start.Unix()), at, 30)

	_, err := d.Admin.Exec(t.Context(), `
BEGIN;
ALTER TABLE opsdesk.audit DISABLE TRIGGER audit_no_change;
UPDATE opsdesk.audit SET reason = 'nothing to see' WHERE tenant = 'acme' AND seq = 2;
ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_change;
COMMIT;`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return scrape(t, e).series("opsdesk_audit_verify_ok")["tenant=acme"] == 0
	}, 30*time.Second, 50*time.Millisecond)
	m = scrape(t, e)
	require.Equal(t, 1.0, m.value(t, "opsdesk_audit_verify_ok", "tenant="), "the other chain still verifies")
	require.Greater(t, m.value(t, "opsdesk_audit_verify_timestamp_seconds", "tenant=acme"), at)
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, strings.Join(logged, "\n"), "audit chain acme does not verify: seq 2")
}

// TestExtremeTimes: records a superuser or a restored backup gave
// infinite or absurd times (no service may, migration 00024) are counted
// like any other, and the scrape is whole: the reads failed ("cannot scan
// Infinity into *time.Time") and the store's figures went missing. A
// lease that ended at -infinity is the oldest stuck, as old as a duration
// can say.
func TestExtremeTimes(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	dbtest.InsertExtremeTimes(t, d)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at)
VALUES ('acme', 'create-ticket', 'gone', '1', sha256('gone'), 'local', 'completed', 'succeeded', 'w',
    now(), now(), now(), '-infinity')`)
	require.NoError(t, err)
	viewer := dbtest.NewPerson(t, d, "viewer", "acme")
	m := scrape(t, newExporter(viewer.Pool, Config{}))
	require.Equal(t, 1.0, m.value(t, "opsdesk_store_up", ""))
	require.Equal(t, 0.0, m.value(t, "opsdesk_scrape_partial", ""))
	for state, n := range map[string]float64{"pending": 2, "stuck": 1} {
		require.Equal(t, n, m.value(t, "opsdesk_operations", "state="+state+",tool=charge-card"), state)
	}
	require.Equal(t, 3.0, m.value(t, "opsdesk_operations", "state=completed,tool=create-ticket"))
	require.Equal(t, 1.0, m.value(t, "opsdesk_retention_expired", "tool=create-ticket"))
	require.Equal(t, time.Duration(1<<63-1).Seconds(), m.value(t, "opsdesk_oldest_stuck_seconds", "tool=charge-card"))
}

// The exporter says when an admin paused the reconcilers.
func TestReconcilerPause(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	admin := dbtest.NewPerson(t, d, "admin", "*")
	e := newExporter(viewer.Pool, Config{Budget: 5 * time.Second, Logf: t.Logf})
	require.Equal(t, 0.0, scrape(t, e).value(t, "opsdesk_reconciler_store_paused", ""))
	_, err := desk.SetReconcilerPause(t.Context(), admin.Pool, true, "provider incident", "")
	require.NoError(t, err)
	m := scrape(t, e)
	require.Equal(t, 1.0, m.value(t, "opsdesk_reconciler_store_paused", ""))
	require.Equal(t, 0.0, m.value(t, "opsdesk_scrape_partial", ""))
}
