package ui

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

// The fault tests run the console on a storeview.Store over a real
// PostgreSQL that they stop and start again: no fake stands in for the
// database. They start their own cluster (not dbtest's shared server,
// which nobody may stop). Like the rest of the package they do not import
// pgx (TestNoPgxImport): they reach the server through internal/db.

// faultFixtures is a small hand-counted store. Live leases run for an
// hour and expired ones ended minutes ago, so no record changes state
// while a test runs.
const faultFixtures = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner, attempt,
    leased_at, lease_expires_at, created_at, completed_at, expires_at, result, result_ref, conflict_count)
VALUES
 -- 2 pending with live leases
 ('acme',    'charge-card',    'ord-1',  '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', NULL, 'worker-1', 1,
  now() - interval '3s',  now() + interval '1h', now() - interval '3s', NULL, NULL, NULL, NULL, 0),
 ('globex',  'send-email',     'mail-1', '1', decode(repeat('02', 32), 'hex'), 'external_idempotent', 'pending', NULL, 'worker-2', 1,
  now() - interval '1s',  now() + interval '1h', now() - interval '1s', NULL, NULL, NULL, NULL, 0),
 -- 2 stuck: leases expired 41m and 5m ago
 ('acme',    'create-ticket',  'run-42', '1', decode(repeat('03', 32), 'hex'), 'external_unknown', 'pending', NULL, 'worker-3', 1,
  now() - interval '42m', now() - interval '41m', now() - interval '42m', NULL, NULL, NULL, NULL, 0),
 ('initech', 'deploy-service', 'dep-7',  '1', decode(repeat('04', 32), 'hex'), 'external_unknown', 'pending', NULL, 'worker-1', 2,
  now() - interval '6m',  now() - interval '5m', now() - interval '20m', NULL, NULL, NULL, NULL, 0),
 -- 3 succeeded (one expiring within 24h, one conflicted), 1 rejected, 1 released
 ('acme',    'create-ticket',  'run-43', '1', decode(repeat('05', 32), 'hex'), 'local', 'completed', 'succeeded', 'worker-1', 1,
  now() - interval '2d', now() - interval '2d', now() - interval '2d', now() - interval '2d', now() + interval '5h', '{"id":1}', 'T-1', 1),
 ('acme',    'create-ticket',  'run-44', '1', decode(repeat('06', 32), 'hex'), 'local', 'completed', 'succeeded', 'worker-2', 1,
  now() - interval '1h', now() - interval '1h', now() - interval '1h', now() - interval '1h', now() + interval '6d', '{"id":2}', 'T-2', 0),
 ('globex',  'send-email',     'mail-0', '1', decode(repeat('07', 32), 'hex'), 'external_idempotent', 'completed', 'succeeded', 'worker-2', 1,
  now() - interval '1h', now() - interval '1h', now() - interval '1h', now() - interval '1h', now() + interval '3d', '{}', 'MSG-1', 0),
 ('initech', 'charge-card',    'ord-3',  '1', decode(repeat('08', 32), 'hex'), 'external_unknown', 'completed', 'rejected', 'worker-1', 1,
  now() - interval '2h', now() - interval '2h', now() - interval '2h', now() - interval '2h', now() + interval '7d', '{"reason":"card declined"}', NULL, 0),
 ('acme',    'send-email',     'mail-2', '1', decode(repeat('09', 32), 'hex'), 'external_idempotent', 'released', NULL, 'worker-1', 1,
  now() - interval '3h', now() - interval '3h', now() - interval '3h', NULL, NULL, NULL, NULL, 0);

INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '2', decode(repeat('ff', 32), 'hex'), fingerprint, 'worker-9'
FROM opsdesk.operations WHERE key = 'run-43';
`

// faultStates is the overview's states line for faultFixtures.
const faultStates = "◷ 2 pending · ⚠ 2 stuck · ✓ 3 completed · ✗ 1 rejected · ○ 1 released"

// lateStuck is a stuck record inserted once the server is back: its lease
// expired before any other, so the overview names it as the oldest.
const lateStuck = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt,
    leased_at, lease_expires_at, created_at)
VALUES ('umbrella', 'charge-card', 'ord-99', '1', decode(repeat('0a', 32), 'hex'), 'external_unknown', 'pending', 'worker-4', 1,
    now() - interval '3h', now() - interval '2h', now() - interval '3h')`

// The stuck tile before and after lateStuck. Ages are in whole minutes,
// so a slow run may see a minute more.
var (
	oldestACME     = regexp.MustCompile(`⚠ stuck +2 +oldest lease expired 4[1-9]m ago \(create-ticket, acme\)`)
	oldestUmbrella = regexp.MustCompile(`⚠ stuck +3 +oldest lease expired 2h(\d\dm)? ago \(charge-card, umbrella\)`)
)

// faultDB is a real PostgreSQL that a test may stop and start, and a
// console's store on it.
type faultDB struct {
	cluster *pgcluster.Cluster
	dsn     string
	store   *storeview.Store
}

func newFaultDB(t *testing.T) *faultDB {
	t.Helper()
	ctx := t.Context()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	require.NoError(t, err, "start PostgreSQL: %v", err)
	t.Cleanup(func() {
		err := c.Stop()
		require.NoError(t, err, "stop PostgreSQL: %v", err)
	})
	sqlExec(t, c.DSN("postgres"), `CREATE DATABASE opsdesk`)
	d := &faultDB{cluster: c, dsn: c.DSN("opsdesk")}
	cfg, err := db.PoolConfig(d.dsn, "opsdesk-test")
	require.NoError(t, err)
	pool, err := db.Open(ctx, cfg)
	require.NoError(t, err)
	_, err = db.Migrate(ctx, pool, nil)
	pool.Close()
	require.NoError(t, err, "migrate: %v", err)
	sqlExec(t, d.dsn, faultFixtures)

	d.store = d.openStore(t)
	return d
}

// openStore opens a console's store as opsdesk does (named, every
// statement bounded, at most 4 connections, none kept open), with the
// server up. It then closes the pool's connections, so the store is
// what the console has before its first read: a pool with no
// connection, which may meet a server that is down. The pool closes when
// the test ends, before the cluster stops.
func (d *faultDB) openStore(t *testing.T) *storeview.Store {
	t.Helper()
	cfg, err := db.PoolConfig(d.dsn, "opsdesk")
	require.NoError(t, err)
	storeview.ConfigurePool(cfg, 5*time.Second)
	cfg.MaxConns = 4
	cfg.MinConns = 0
	pool, err := db.Open(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	pool.Reset()
	return storeview.New(pool, storeview.Config{StatementTimeout: 5 * time.Second})
}

// sqlExec runs SQL (several statements allowed) on its own connection.
func sqlExec(t *testing.T, dsn, sql string) {
	t.Helper()
	cfg, err := db.PoolConfig(dsn, "opsdesk-test")
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := db.Open(t.Context(), cfg)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(t.Context(), sql)
	require.NoError(t, err, "exec: %v", err)
}

func (d *faultDB) stop(t *testing.T) {
	t.Helper()
	err := d.cluster.StopServer()
	require.NoError(t, err, "stop the server: %v", err)
}

func (d *faultDB) start(t *testing.T) {
	t.Helper()
	err := d.cluster.StartServer(t.Context())
	require.NoError(t, err, "start the server again: %v", err)
}

// until delivers what step sends (refresh ticks, retry keys) until the
// view satisfies ok, and returns that view. The deadline only bounds a
// broken console; how many steps it takes is not asserted.
func (h *harness) until(t *testing.T, what string, step func(), ok func(view string) bool) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n := 1; ; n++ {
		step()
		v := h.view()
		if ok(v) {
			t.Logf("%s after %d step(s)", what, n)
			return v
		}
		require.False(t, time.Now().After(deadline), "%s: not after %d steps; the view:\n%s", what, n, v)
		time.Sleep(20 * time.Millisecond)
	}
}

// banner begins the message line while the database is unreachable.
const banner = "⚠ database unreachable since "

// tick delivers the newest refresh tick, as its timer would.
func tick(h *harness) func() { return func() { h.send(h.lastTick()) } }

// flat joins a view's wrapped lines: runs of spaces and line breaks
// become one space.
func flat(v string) string { return strings.Join(strings.Fields(v), " ") }

// TestFaultLostMidSession: the console shows a real store; the server
// stops; refresh ticks bring the unreachable banner while the last good
// counts stay on screen and the console still answers keys; the server
// starts again and ticks alone remove the banner and show data written
// after the restart.
func TestFaultLostMidSession(t *testing.T) {
	t.Parallel()
	d := newFaultDB(t)
	h := newSourceHarness(t, d.store, Config{Context: "fault"}, 120, 40)
	v := h.view()
	require.Equal(t, h.m.overview(), h.m.active(), "the overview does not show the store's counts:\n%s", v)
	require.Contains(t, v, faultStates, "the overview does not show the store's counts:\n%s", v)
	require.True(t, oldestACME.MatchString(v), "the overview does not show the store's counts:\n%s", v)
	require.Contains(t, v, "conflicted    1   unreviewed", "the overview does not show the store's counts:\n%s", v)
	require.Contains(t, v, "expiring     1", "the overview does not show the store's counts:\n%s", v)
	require.Contains(t, v, "fault · socket ", "the status bar does not name the server, database and role:\n%s", v)
	require.Contains(t, v, "/opsdesk · you: postgres", "the status bar does not name the server, database and role:\n%s", v)
	lastAnswer := h.m.dbTime
	require.False(t, lastAnswer.IsZero(), "no database time after connecting")

	d.stop(t)
	v = h.until(t, "the banner", tick(h), func(v string) bool { return strings.Contains(v, banner) })
	want := banner + clock(lastAnswer) + " UTC (last answer) · retrying every 2s"
	require.Contains(t, v, want, "the banner does not say since when and what it does (%q):\n%s", want, v)
	require.Contains(t, v, faultStates, "the last good counts are not on screen, or not marked as such:\n%s", v)
	require.True(t, oldestACME.MatchString(v), "the last good counts are not on screen, or not marked as such:\n%s", v)
	require.Contains(t, v, "✗ showing the last good counts: ", "the last good counts are not on screen, or not marked as such:\n%s", v)
	require.Contains(t, v, "db "+clock(lastAnswer)+" UTC", "the status bar does not keep the database time of the counts shown:\n%s", v)
	// More ticks while down keep it so.
	for range 3 {
		h.send(h.lastTick())
	}
	v = h.view()
	require.Contains(t, v, banner, "a later tick while down lost the banner or the counts:\n%s", v)
	require.Contains(t, v, faultStates, "a later tick while down lost the banner or the counts:\n%s", v)

	// The console keeps working: the stuck tile opens its list, which
	// says it could not read it, under the banner; back shows the last
	// good counts again.
	h.keys("<enter>")
	v = h.view()
	require.Equal(t, h.m.list(), h.m.active(), "the stuck list while down:\n%s", v)
	require.Contains(t, v, "filter: state:stuck", "the stuck list while down:\n%s", v)
	require.Contains(t, v, "could not list operations", "the stuck list while down:\n%s", v)
	require.Contains(t, v, banner, "the stuck list while down:\n%s", v)
	h.keys("q")
	v = h.view()
	require.Equal(t, h.m.overview(), h.m.active(), "back on the overview while down:\n%s", v)
	require.Contains(t, v, faultStates, "back on the overview while down:\n%s", v)
	require.Contains(t, v, banner, "back on the overview while down:\n%s", v)

	d.start(t)
	sqlExec(t, d.dsn, lateStuck) // only possible now the server is back
	v = h.until(t, "recovery", tick(h), func(v string) bool {
		return !strings.Contains(v, banner) && strings.Contains(v, "⚠ 3 stuck")
	})
	for _, stale := range []string{"unreachable", "last error", "showing the last good counts"} {
		require.NotContains(t, v, stale, "%q is still on screen after recovery:\n%s", stale, v)
	}
	require.Contains(t, v, "◷ 2 pending · ⚠ 3 stuck · ✓ 3 completed · ✗ 1 rejected · ○ 1 released", "the overview does not show the record written after the restart:\n%s", v)
	require.True(t, oldestUmbrella.MatchString(v), "the overview does not show the record written after the restart:\n%s", v)
	require.False(t, h.m.dbTime.Before(lastAnswer), "the database time went back from %v to %v", lastAnswer, h.m.dbTime)
	h.keys("<enter>")
	l := h.m.list()
	require.EqualValues(t, 3, len(l.page.Rows), "the stuck list after recovery:\n%s", h.view())
	require.Equal(t, "ord-99", l.page.Rows[0].Key, "the stuck list after recovery:\n%s", h.view())
}

// TestFaultRestartBetweenPolls: the server restarts between two polls,
// so the pool's connection to the old server is dead. The console
// recovers by itself within a few ticks, with no error left on screen.
func TestFaultRestartBetweenPolls(t *testing.T) {
	t.Parallel()
	d := newFaultDB(t)
	h := newSourceHarness(t, d.store, Config{Context: "fault"}, 80, 24)
	require.Contains(t, h.view(), faultStates, "no overview:\n%s", h.view())
	err := d.cluster.Restart(t.Context())
	require.NoError(t, err, "restart: %v", err)
	sqlExec(t, d.dsn, lateStuck)
	v := h.until(t, "fresh counts", tick(h), func(v string) bool {
		return strings.Contains(v, "⚠ 3 stuck") && !strings.Contains(v, "last error") &&
			!strings.Contains(v, banner) && !strings.Contains(v, "showing the last good counts")
	})
	require.True(t, oldestUmbrella.MatchString(v), "the oldest stuck record is not the new one:\n%s", v)
}

// TestFaultUnreachableAtStart: the console opened while the server is
// down shows what it cannot reach and why, with a retry; retries while
// down count attempts; once the server is up a retry (the r key or the
// automatic tick) reaches the overview with the store's counts.
func TestFaultUnreachableAtStart(t *testing.T) {
	t.Parallel()
	d := newFaultDB(t)
	for _, tc := range []struct {
		name  string
		retry func(h *harness) func()
	}{
		{"r key", func(h *harness) func() { return func() { h.keys("r") } }},
		{"automatic tick", tick},
	} {
		// The subtests stop and start one server: one at a time.
		t.Run(tc.name, func(t *testing.T) {
			// A console opened while the server is down: its own pool,
			// without a connection yet.
			store := d.openStore(t)
			d.stop(t)
			h := newSourceHarness(t, store, Config{Context: "fault"}, 80, 24)
			v := h.view()
			for _, want := range []string{
				"not connected",
				"✗ Cannot reach the database of context fault",
				"connect: no such file or directory", // why, from the driver
				"Retrying every 2s (attempt 1). Press r to retry now, ctrl+c to quit.",
				"r retry now",
			} {
				require.Contains(t, flat(v), want, "the start-up message lacks %q:\n%s", want, v)
			}
			h.keys("r")
			h.send(h.lastTick())
			v = h.view()
			require.False(t, h.m.connected, "retries while down:\n%s", v)
			require.Contains(t, v, "Cannot reach", "retries while down:\n%s", v)
			require.Contains(t, v, "(attempt 3)", "retries while down:\n%s", v)

			d.start(t)
			v = h.until(t, "the overview", tc.retry(h), func(v string) bool { return strings.Contains(v, "Needs attention") })
			require.Equal(t, h.m.overview(), h.m.active(), "the overview after connecting:\n%s", v)
			require.Contains(t, v, faultStates, "the overview after connecting:\n%s", v)
			for _, gone := range []string{"Cannot reach", "retry now", "not connected"} {
				require.NotContains(t, v, gone, "%q is still on screen once connected:\n%s", gone, v)
			}
		})
	}
}
