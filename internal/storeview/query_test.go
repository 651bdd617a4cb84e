package storeview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fixtures is a hand-counted store: the expected figures below are
// counted from this SQL, not computed by the code under test.
const fixtures = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner, attempt,
    leased_at, lease_expires_at, created_at, completed_at, expires_at, result, result_ref, conflict_count)
VALUES
 -- 2 pending with live leases
 ('acme',   'charge-card',   'ord-1',        '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', NULL, 'worker-1', 1,
  now() - interval '3s',  now() + interval '27s', now() - interval '3s', NULL, NULL, NULL, NULL, 0),
 ('globex', 'send-email',    'mail-1',       '1', decode(repeat('02', 32), 'hex'), 'external_idempotent', 'pending', NULL, 'worker-2', 1,
  now() - interval '1s',  now() + interval '29s', now() - interval '1s', NULL, NULL, NULL, NULL, 0),
 -- 3 stuck: leases expired 41m, 5m and 30s ago
 ('acme',   'create-ticket', 'run-42:create-ticket', '1', decode(repeat('03', 32), 'hex'), 'external_unknown', 'pending', NULL, 'worker-3', 1,
  now() - interval '42m', now() - interval '41m', now() - interval '42m', NULL, NULL, NULL, NULL, 0),
 ('acme',   'charge-card',   'ord-2',        '1', decode(repeat('04', 32), 'hex'), 'external_unknown', 'pending', NULL, 'worker-3', 2,
  now() - interval '6m',  now() - interval '5m',  now() - interval '20m', NULL, NULL, NULL, NULL, 0),
 ('initech','deploy-service','deploy-7',     '1', decode(repeat('05', 32), 'hex'), 'external_unknown', 'pending', NULL, 'worker-1', 1,
  now() - interval '90s', now() - interval '30s', now() - interval '90s', NULL, NULL, NULL, NULL, 0),
 -- 4 completed succeeded: one expiring within 24h; one with a 50%_off key
 ('acme',   'create-ticket', 'run-43:create-ticket', '1', decode(repeat('06', 32), 'hex'), 'local', 'completed', 'succeeded', 'worker-1', 1,
  now() - interval '2d', now() - interval '2d', now() - interval '2d', now() - interval '2d', now() + interval '5h', '{"id":1}', 'T-1', 2),
 ('acme',   'create-ticket', 'run-44:create-ticket', '1', decode(repeat('07', 32), 'hex'), 'local', 'completed', 'succeeded', 'worker-2', 1,
  now() - interval '1h', now() - interval '1h', now() - interval '1h', now() - interval '1h', now() + interval '6d', '{"id":2}', 'T-2', 0),
 ('globex', 'send-email',    'promo-50%_off','1', decode(repeat('08', 32), 'hex'), 'external_idempotent', 'completed', 'succeeded', 'worker-2', 3,
  now() - interval '1h', now() - interval '1h', now() - interval '3h', now() - interval '1h', now() + interval '3d', '{}', 'MSG-1', 0),
 ('globex', 'send-email',    'promo-5000-off','1', decode(repeat('09', 32), 'hex'), 'external_idempotent', 'completed', 'succeeded', 'worker-2', 1,
  now() - interval '1h', now() - interval '1h', now() - interval '1h', now() - interval '1h', now() + interval '3d', '{}', 'MSG-2', 0),
 -- 1 rejected, 1 released
 ('initech','charge-card',   'ord-3',        '1', decode(repeat('0a', 32), 'hex'), 'external_unknown', 'completed', 'rejected', 'worker-1', 1,
  now() - interval '2h', now() - interval '2h', now() - interval '2h', now() - interval '2h', now() + interval '7d', '{"reason":"card declined"}', NULL, 0),
 ('acme',   'send-email',    'mail-2',       '1', decode(repeat('0b', 32), 'hex'), 'external_idempotent', 'released', NULL, 'worker-1', 1,
  now() - interval '3h', now() - interval '3h', now() - interval '3h', NULL, NULL, NULL, NULL, 0);

-- run-43 has two conflicting attempts, one of them reviewed: it is conflicted.
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, reviewed_at, reviewed_by)
SELECT tenant, tool, key, id, '2', decode(repeat('ff', 32), 'hex'), fingerprint, 'worker-9', NULL, NULL
FROM opsdesk.operations WHERE key = 'run-43:create-ticket'
UNION ALL
SELECT tenant, tool, key, id, '1', decode(repeat('fe', 32), 'hex'), fingerprint, 'worker-8', now(), 'alice'
FROM opsdesk.operations WHERE key = 'run-43:create-ticket';
`

func setup(t *testing.T) (*Store, context.Context) {
	t.Helper()
	return New(fixtureDB(t).Admin, Config{}), t.Context()
}

// fixtureDB is a fresh database holding the fixtures.
func fixtureDB(t *testing.T) *dbtest.DB {
	t.Helper()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), fixtures)
	require.NoError(t, err)
	return d
}

func keys(rows []readmodel.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}

func list(t *testing.T, s *Store, filter string) []string {
	t.Helper()
	f, err := readmodel.ParseFilter(filter)
	require.NoError(t, err)
	page, err := s.List(t.Context(), readmodel.Query{Filter: f, Limit: 100})
	require.NoError(t, err)
	got := keys(page.Rows)
	slices.Sort(got)
	return got
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	cases := map[string][]string{
		"":                             nil, // all 11, checked below
		"state:pending":                {"mail-1", "ord-1"},
		"state:stuck":                  {"deploy-7", "ord-2", "run-42:create-ticket"},
		"state:completed":              {"promo-50%_off", "promo-5000-off", "run-43:create-ticket", "run-44:create-ticket"},
		"state:rejected":               {"ord-3"},
		"state:released":               {"mail-2"},
		"state:conflicted":             {"run-43:create-ticket"},
		"state:stuck,released":         {"deploy-7", "mail-2", "ord-2", "run-42:create-ticket"},
		"tenant:globex":                {"mail-1", "promo-50%_off", "promo-5000-off"},
		"tool:charge-card state:stuck": {"ord-2"},
		"key:run-42*":                  {"run-42:create-ticket"},
		"key:*:create-ticket":          {"run-42:create-ticket", "run-43:create-ticket", "run-44:create-ticket"},
		"key:promo-50%_off":            {"promo-50%_off"},
		"key:promo-50%_*":              {"promo-50%_off"}, // % and _ are literal, not wildcards
		"key:ord-1,mail-*":             {"mail-1", "mail-2", "ord-1"},
		"owner:worker-3":               {"ord-2", "run-42:create-ticket"},
		"state:stuck age>10m":          {"run-42:create-ticket"},
		"state:stuck age>2m age<1h":    {"ord-2", "run-42:create-ticket"},
		"tenant:nobody":                {},
		"expires<24h":                  {"run-43:create-ticket"},
		"state:stuck,conflicted":       {"deploy-7", "ord-2", "run-42:create-ticket", "run-43:create-ticket"},
		"state:conflicted,released":    {"mail-2", "run-43:create-ticket"},
		"expires>4d":                   {"ord-3", "run-44:create-ticket"},
	}
	for filter, want := range cases {
		got := list(t, s, filter)
		if filter == "" {
			require.Len(t, got, 11)
			continue
		}
		if len(want) == 0 {
			require.Empty(t, got, filter)
			continue
		}
		require.Equal(t, want, got, filter)
	}
}

func TestListRowFields(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	f, err := readmodel.ParseFilter("key:run-42:create-ticket")
	require.NoError(t, err)
	page, err := s.List(ctx, readmodel.Query{Filter: f})
	require.NoError(t, err)
	require.Len(t, page.Rows, 1)
	r := page.Rows[0]
	require.Equal(t, readmodel.StateStuck, r.State)
	require.True(t, r.Stuck())
	require.Equal(t, "worker-3", r.Owner)
	// Ages come from the database clock of the same query.
	require.InDelta(t, (42 * time.Minute).Seconds(), r.LeaseAge().Seconds(), 1)
	require.InDelta(t, (-41 * time.Minute).Seconds(), r.LeaseExpiresIn().Seconds(), 1)
	require.Equal(t, page.DBTime, r.DBTime)
}

func TestStuckAfterDelaysStuck(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	s := New(d.Admin, Config{StuckAfter: 2 * time.Minute})
	// deploy-7's lease expired 30s ago: not stuck yet under a 2m threshold.
	require.Equal(t, []string{"ord-2", "run-42:create-ticket"}, list(t, s, "state:stuck"))
	require.Equal(t, []string{"deploy-7", "mail-1", "ord-1"}, list(t, s, "state:pending"))
}

// Every sort pages through every matching row once, in its order, at any
// page size: the time sorts order the records with the time (pending
// leases, completed records' expiry) and follow with the others, newest
// first. The orders are read off the fixtures by hand.
// TestSortsPageThroughEveryRowInOrder pages through each sort as the
// superuser and as a viewer of two of the three tenants, which gets the
// same order without globex's records.
func TestSortsPageThroughEveryRowInOrder(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	ctx := t.Context()
	scoped := New(dbtest.NewPerson(t, d, "viewer", "acme", "initech").Pool, Config{})
	globex := map[string]bool{"mail-1": true, "promo-50%_off": true, "promo-5000-off": true}
	for _, tc := range []struct {
		sort   readmodel.Sort
		filter string
		want   []string
	}{
		{readmodel.SortNewest, "", []string{"mail-2", "ord-3", "promo-5000-off", "promo-50%_off", "run-44:create-ticket",
			"run-43:create-ticket", "deploy-7", "ord-2", "run-42:create-ticket", "mail-1", "ord-1"}},
		{readmodel.SortLease, "", []string{"run-42:create-ticket", "ord-2", "deploy-7", "ord-1", "mail-1",
			"mail-2", "ord-3", "promo-5000-off", "promo-50%_off", "run-44:create-ticket", "run-43:create-ticket"}},
		// Equal expiry (both now() + 3 days): the id decides.
		{readmodel.SortExpires, "", []string{"run-43:create-ticket", "promo-50%_off", "promo-5000-off", "run-44:create-ticket", "ord-3",
			"mail-2", "deploy-7", "ord-2", "run-42:create-ticket", "mail-1", "ord-1"}},
		{readmodel.SortLease, "state:pending,stuck", []string{"run-42:create-ticket", "ord-2", "deploy-7", "ord-1", "mail-1"}},
		{readmodel.SortLease, "state:completed", []string{"promo-5000-off", "promo-50%_off", "run-44:create-ticket", "run-43:create-ticket"}},
		{readmodel.SortLease, "tenant:acme", []string{"run-42:create-ticket", "ord-2", "ord-1",
			"mail-2", "run-44:create-ticket", "run-43:create-ticket"}},
		{readmodel.SortExpires, "state:stuck,released", []string{"mail-2", "deploy-7", "ord-2", "run-42:create-ticket"}},
		{readmodel.SortExpires, "state:rejected,released", []string{"ord-3", "mail-2"}},
		{readmodel.SortExpires, "expires<4d", []string{"run-43:create-ticket", "promo-50%_off", "promo-5000-off"}},
		{readmodel.SortExpires, "state:conflicted", []string{"run-43:create-ticket"}},
	} {
		f, err := readmodel.ParseFilter(tc.filter)
		require.NoError(t, err)
		var seen []string
		for _, k := range tc.want {
			if !globex[k] {
				seen = append(seen, k)
			}
		}
		for _, run := range []struct {
			who  string
			s    *Store
			want []string
		}{{"superuser", New(d.Admin, Config{}), tc.want}, {"viewer of acme and initech", scoped, seen}} {
			for _, size := range []int{1, 2, 3, 50} {
				s, want := run.s, run.want
				name := fmt.Sprintf("%s: %s %q by %d", run.who, tc.sort, tc.filter, size)
				var got []string
				q := readmodel.Query{Filter: f, Sort: tc.sort, Limit: size}
				for pages := 0; ; pages++ {
					require.Less(t, pages, 20, "%s: paging does not end", name)
					page, err := s.List(ctx, q)
					require.NoError(t, err, name)
					require.LessOrEqual(t, len(page.Rows), size, name)
					got = append(got, keys(page.Rows)...)
					if page.Next == nil {
						break
					}
					require.Len(t, page.Rows, size, "%s: a page before the last is short", name)
					q.After = page.Next
				}
				require.Equal(t, want, got, name)
			}
		}
	}
}

func TestOverviewMatchesHandCountedFixtures(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	o, err := s.Overview(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), o.Pending)
	require.Equal(t, int64(3), o.Stuck)
	require.Equal(t, int64(4), o.Completed)
	require.False(t, o.CompletedEstimated)
	require.Equal(t, int64(1), o.Rejected)
	require.Equal(t, int64(1), o.Released)
	require.Equal(t, int64(1), o.Conflicted)
	require.Equal(t, int64(1), o.ExpiringSoon)
	require.NotNil(t, o.OldestStuck)
	require.Equal(t, "run-42:create-ticket", o.OldestStuck.Key)
}

func TestDetail(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	d, err := s.GetByIdentity(ctx, "acme", "create-ticket", "run-43:create-ticket")
	require.NoError(t, err)
	require.Equal(t, readmodel.StateCompleted, d.State)
	require.True(t, d.Conflicted)
	// Tags are keyed by the database's secret, computed here by hand.
	tag := func(fp string) string {
		var out string
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT 'fp:' || encode(substr(sha256(value || decode(repeat($1, 32), 'hex')), 1, 6), 'hex')
FROM opsdesk.secrets WHERE name = 'fingerprint_tag'`, fp).Scan(&out))
		return out
	}
	require.Regexp(t, `^fp:[0-9a-f]{12}$`, d.FingerprintTag)
	require.Equal(t, tag("06"), d.FingerprintTag)
	require.NotEqual(t, "sha256:060606060606", d.FingerprintTag, "not the fingerprint itself")
	require.Equal(t, "T-1", d.ResultRef)
	require.True(t, d.HasResult)
	require.Len(t, d.Conflicts, 2)
	require.Equal(t, tag("ff"), d.Conflicts[0].FingerprintTag)
	require.Equal(t, tag("fe"), d.Conflicts[1].FingerprintTag)
	require.False(t, d.Conflicts[0].Reviewed)
	require.True(t, d.Conflicts[1].Reviewed)

	byID, err := s.Get(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, d.Key, byID.Key)

	_, err = s.Get(ctx, 999999)
	require.ErrorIs(t, err, readmodel.ErrNotFound)
	_, err = s.GetByIdentity(ctx, "acme", "create-ticket", "never")
	require.ErrorIs(t, err, readmodel.ErrNotFound)
}

func TestInfo(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	i, err := s.Info(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, i.Database)
	require.NotEmpty(t, i.Role)
	require.NotEmpty(t, i.Server)
	require.Positive(t, i.Schema)
	require.False(t, i.DBTime.IsZero())
}

// Each overview figure equals the number of rows of the list its tile
// opens: an operator who sees "3 stuck" finds three.
func TestOverviewCountsMatchTheirLists(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	o, err := s.Overview(ctx)
	require.NoError(t, err)
	for filter, count := range map[string]int64{
		"state:pending":    o.Pending,
		"state:stuck":      o.Stuck,
		"state:completed":  o.Completed,
		"state:rejected":   o.Rejected,
		"state:released":   o.Released,
		"state:conflicted": o.Conflicted,
		"expires<24h":      o.ExpiringSoon,
	} {
		require.Len(t, list(t, s, filter), int(count), filter)
	}
}

// Above CountCap the overview estimates instead of counting, and says so;
// at or below it, it counts exactly.
func TestOverviewEstimatesLargeCounts(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at, conflict_count)
SELECT 'acme', 'charge-card', 'ord-' || i, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'completed', 'rejected', 'w',
    now(), now(), now(), now() + interval '7 days', (i <= 1200)::int
FROM generate_series(1, 1500) i;
-- 1,200 records with an unreviewed conflict, 300 with a reviewed one.
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint,
    owner, reviewed_at, reviewed_by)
SELECT tenant, tool, key, id, '1', decode(repeat('02', 32), 'hex'), fingerprint, 'w',
    CASE WHEN conflict_count = 0 THEN now() END, CASE WHEN conflict_count = 0 THEN 'alice' END
FROM opsdesk.operations;
-- 1,100 stuck records and 1,000 live ones.
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner,
    leased_at, lease_expires_at)
SELECT 'acme', 'deploy-service', 'd-' || i, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 hours', now() + CASE WHEN i <= 1100 THEN interval '-1 hour' ELSE interval '1 hour' END
FROM generate_series(1, 2100) i`)
	require.NoError(t, err)
	_, err = d.Admin.Exec(t.Context(), `VACUUM (ANALYZE) opsdesk.operations, opsdesk.conflicts`)
	require.NoError(t, err)
	o, err := New(d.Admin, Config{}).Overview(t.Context())
	require.NoError(t, err)
	require.True(t, o.Estimated())
	require.True(t, o.RejectedEstimated)
	require.InDelta(t, 1500, o.Rejected, 150)
	require.True(t, o.StuckEstimated)
	require.InDelta(t, 1100, o.Stuck, 110)
	require.True(t, o.StuckByToolCut, "read among the 1,001 stuck longest")
	require.Len(t, o.StuckByTool, 1)
	require.Equal(t, "deploy-service", o.StuckByTool[0].Tool)
	require.EqualValues(t, readmodel.CountCap+1, o.StuckByTool[0].Stuck, "a lower bound")
	require.True(t, o.ConflictedEstimated)
	require.InDelta(t, 1200, o.Conflicted, 120)
	// Exactly CountCap is still a count.
	require.False(t, o.PendingEstimated)
	require.EqualValues(t, readmodel.CountCap, o.Pending)
	require.False(t, o.ReleasedEstimated)
	require.Zero(t, o.Released)
	require.False(t, o.Scoped)

	// A viewer of every tenant gets the same; a viewer of some tenants
	// gets lower bounds, since statistics span every tenant.
	every, err := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{}).Overview(t.Context())
	require.NoError(t, err)
	require.False(t, every.Scoped)
	require.InDelta(t, 1500, every.Rejected, 150)
	_, err = d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at)
SELECT 'globex', 'charge-card', 'ord-' || i, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'completed', 'rejected', 'w',
    now(), now(), now(), now() + interval '7 days'
FROM generate_series(1, 50) i`)
	require.NoError(t, err)
	scoped, err := New(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{}).Overview(t.Context())
	require.NoError(t, err)
	require.True(t, scoped.Scoped)
	require.True(t, scoped.RejectedEstimated)
	require.EqualValues(t, readmodel.CountCap+1, scoped.Rejected, "a lower bound, not the table's 1,550")
	require.True(t, scoped.StuckEstimated)
	require.EqualValues(t, readmodel.CountCap+1, scoped.Stuck)
	globex, err := New(dbtest.NewPerson(t, d, "viewer", "globex").Pool, Config{}).Overview(t.Context())
	require.NoError(t, err)
	require.False(t, globex.RejectedEstimated)
	require.EqualValues(t, 50, globex.Rejected, "counted exactly: globex's own")
	require.Zero(t, globex.Stuck)
}

// People's roles read every view: a viewer's column privileges leave out
// stored results, and the queries never need them.
func TestViewerReadsEveryView(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "acme")
	s := New(viewer.Pool, Config{})
	ctx := t.Context()

	o, err := s.Overview(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, o.Stuck, "acme's two stuck records, not initech's")
	for _, sort := range readmodel.Sorts {
		page, err := s.List(ctx, readmodel.Query{Sort: sort})
		require.NoError(t, err)
		for _, r := range page.Rows {
			require.Equal(t, "acme", r.Tenant)
		}
	}
	det, err := s.GetByIdentity(ctx, "acme", "create-ticket", "run-43:create-ticket")
	require.NoError(t, err)
	require.True(t, det.HasResult)
	require.Regexp(t, `^fp:[0-9a-f]{12}$`, det.FingerprintTag)
	require.Regexp(t, `^fp:[0-9a-f]{12}$`, det.Conflicts[0].FingerprintTag)
	// Fingerprints themselves, results and intents stay out of reach.
	for _, sql := range []string{
		`SELECT fingerprint FROM opsdesk.operations`, `SELECT result FROM opsdesk.operations`,
		`SELECT intent FROM opsdesk.operations`, `SELECT fingerprint FROM opsdesk.conflicts`,
		`SELECT original_fingerprint FROM opsdesk.conflicts`, `SELECT * FROM opsdesk.secrets`,
	} {
		_, err := viewer.Pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, sql)
		require.Equal(t, "42501", pgErr.Code, sql)
	}
	_, err = s.GetByIdentity(ctx, "initech", "charge-card", "ord-3")
	require.ErrorIs(t, err, readmodel.ErrNotFound, "another tenant's record is not there")
	_, err = s.Info(ctx)
	require.NoError(t, err)
}

// A record's detail says who decided what, when and why.
func TestDetailShowsDecisions(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	s := New(operator.Pool, Config{})
	ctx := t.Context()
	det, err := s.GetByIdentity(ctx, "acme", "charge-card", "ord-2")
	require.NoError(t, err)
	require.Empty(t, det.Decisions)

	snooze := det.DBTime.Add(time.Hour)
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: det.ID, Decision: reconcile.Defer,
		ExpectVersion: det.Version, Reason: "provider answers tomorrow", SnoozeUntil: snooze})
	require.NoError(t, err)
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: det.ID, Decision: reconcile.Failed,
		ExpectVersion: det.Version + 1, Reason: "refused"})
	require.ErrorIs(t, err, reconcile.ErrChanged, "a refusal is not a decision")
	_, err = desk.Decide(ctx, operator.Pool, reconcile.DecideParams{OperationID: det.ID, Decision: reconcile.NotExecuted,
		ExpectVersion: det.Version, Reason: "provider has no such charge", DisplayName: "Alice"})
	require.NoError(t, err)

	det, err = s.GetByIdentity(ctx, "acme", "charge-card", "ord-2")
	require.NoError(t, err)
	require.Equal(t, readmodel.StateReleased, det.State)
	require.Len(t, det.Decisions, 2)
	require.Equal(t, "decide:defer", det.Decisions[0].Action)
	require.WithinDuration(t, snooze, det.Decisions[0].SnoozeUntil, time.Millisecond)
	released := det.Decisions[1]
	require.Equal(t, "decide:not-executed", released.Action)
	require.Equal(t, operator.Role, released.Role)
	require.Equal(t, "Alice", released.DisplayName)
	require.Equal(t, "provider has no such charge", released.Reason)
	require.EqualValues(t, 3, released.AuditSeq)
	require.True(t, released.SnoozeUntil.IsZero())
}

// A purged identity is explained by its tombstone, to those who see its
// tenant; a tombstone that ran out explains nothing.
func TestLookupOfAPurgedIdentity(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.tombstones (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at) VALUES
 ('acme', 'create-ticket', 'gone-1', 77, decode(repeat('ab', 32), 'hex'), now() - interval '2 days', now() + interval '5 days'),
 ('acme', 'create-ticket', 'gone-2', 78, decode(repeat('ab', 32), 'hex'), now() - interval '9 days', now() - interval '1 day')`)
	require.NoError(t, err)
	acme := New(dbtest.NewPerson(t, d, "viewer", "acme").Pool, Config{})
	_, err = acme.GetByIdentity(t.Context(), "acme", "create-ticket", "gone-1")
	require.ErrorIs(t, err, readmodel.ErrNotFound)
	var purged *readmodel.PurgedError
	require.ErrorAs(t, err, &purged)
	require.EqualValues(t, 77, purged.OperationID)
	require.WithinDuration(t, purged.DBTime.Add(-48*time.Hour), purged.PurgedAt, time.Minute)
	require.WithinDuration(t, purged.DBTime.Add(5*24*time.Hour), purged.TombstoneUntil, time.Minute)

	_, err = acme.GetByIdentity(t.Context(), "acme", "create-ticket", "gone-2")
	require.ErrorIs(t, err, readmodel.ErrNotFound)
	require.False(t, errors.As(err, &purged), "a run-out tombstone explains nothing")

	globex := New(dbtest.NewPerson(t, d, "viewer", "globex").Pool, Config{})
	_, err = globex.GetByIdentity(t.Context(), "acme", "create-ticket", "gone-1")
	require.ErrorIs(t, err, readmodel.ErrNotFound)
	require.False(t, errors.As(err, &purged), "another tenant's tombstone is not there")
}

// An identity with no record says which part to check: the tenant, the
// tool in it, or the key; a one-tenant viewer learns nothing of the
// tenants it may not see.
func TestAbsentIdentitySaysWhatToCheck(t *testing.T) {
	t.Parallel()
	d := fixtureDB(t)
	every := New(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{})
	globexOnly := New(dbtest.NewPerson(t, d, "viewer", "globex").Pool, Config{})
	for _, c := range []struct {
		s                   *Store
		tenant, tool        string
		tenantKnown, toolOK bool
	}{
		{every, "acme", "create-ticket", true, true},
		{every, "acme", "create-tickett", true, false},
		{every, "acmee", "create-ticket", false, false},
		{globexOnly, "acme", "create-ticket", false, false}, // acme has it, unseen
		{globexOnly, "globex", "send-email", true, true},
	} {
		_, err := c.s.GetByIdentity(t.Context(), c.tenant, c.tool, "no-such-key")
		require.ErrorIs(t, err, readmodel.ErrNotFound)
		absent, ok := errors.AsType[*readmodel.AbsentError](err)
		require.True(t, ok, "%v", err)
		require.Equal(t, c.tenantKnown, absent.TenantKnown, "%q/%q", c.tenant, c.tool)
		require.Equal(t, c.toolOK, absent.ToolKnown, "%q/%q", c.tenant, c.tool)
	}
}
