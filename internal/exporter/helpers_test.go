package exporter

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fixtures is a hand-counted store: the expected figures of the tests are
// counted from this SQL, not computed by the code under test. Leases
// expired the given time ago (negative: still live). deferRecords defers
// d1, d2 and d3 after it runs.
//
//	charge-card  acme    s1 stuck 41m, s2 stuck 5m
//	                     d1 stuck 2h, deferred for an hour
//	                     d2 stuck 50m, deferred until a moment ago: due
//	                     d3 stuck 3h, deferred for an hour at a version
//	                        the record no longer has: stuck, the oldest
//	             globex  g1 stuck 10m, live1 pending (lease live), rj1 rejected
//	send-email   acme    m1 succeeded, expired 1h ago; m2 succeeded; m3 released;
//	                     m4 succeeded with an unreviewed and a reviewed conflict
//	             globex  m5 succeeded, a reviewed conflict only
//	create-ticket globex t1 succeeded, expired 2d ago, held; t2 rejected, expired 1d ago
//	             acme    t3 stuck 20m, an unreviewed conflict
const fixtures = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at, held, conflict_count)
SELECT tenant, tool, key, '1', sha256(key::bytea), 'external_unknown', state, outcome, 'w',
    least(now(), now() - lease_end - interval '1m'), now() - lease_end, now() - interval '10d',
    CASE WHEN state = 'completed' THEN now() - interval '10d' END,
    CASE WHEN state = 'completed' THEN now() + expires_in END, held, conflicts
FROM (VALUES
    ('acme',   'charge-card',   's1',    'pending',   NULL,        interval '41m', NULL::interval, false, 0),
    ('acme',   'charge-card',   's2',    'pending',   NULL,        interval '5m',  NULL,           false, 0),
    ('acme',   'charge-card',   'd1',    'pending',   NULL,        interval '2h',  NULL,           false, 0),
    ('acme',   'charge-card',   'd2',    'pending',   NULL,        interval '50m', NULL,           false, 0),
    ('acme',   'charge-card',   'd3',    'pending',   NULL,        interval '3h',  NULL,           false, 0),
    ('globex', 'charge-card',   'g1',    'pending',   NULL,        interval '10m', NULL,           false, 0),
    ('globex', 'charge-card',   'live1', 'pending',   NULL,        interval '-30m', NULL,          false, 0),
    ('globex', 'charge-card',   'rj1',   'completed', 'rejected',  interval '1d',  interval '7d',  false, 0),
    ('acme',   'send-email',    'm1',    'completed', 'succeeded', interval '1d',  interval '-1h', false, 0),
    ('acme',   'send-email',    'm2',    'completed', 'succeeded', interval '1d',  interval '3d',  false, 0),
    ('acme',   'send-email',    'm3',    'released',  NULL,        interval '1d',  NULL,           false, 0),
    ('acme',   'send-email',    'm4',    'completed', 'succeeded', interval '1d',  interval '3d',  false, 2),
    ('globex', 'send-email',    'm5',    'completed', 'succeeded', interval '1d',  interval '3d',  false, 1),
    ('globex', 'create-ticket', 't1',    'completed', 'succeeded', interval '3d',  interval '-2d', true,  0),
    ('globex', 'create-ticket', 't2',    'completed', 'rejected',  interval '3d',  interval '-1d', false, 0),
    ('acme',   'create-ticket', 't3',    'pending',   NULL,        interval '20m', NULL,           false, 1)
) AS f (tenant, tool, key, state, outcome, lease_end, expires_in, held, conflicts);

INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner,
    reviewed_at, reviewed_by)
SELECT o.tenant, o.tool, o.key, o.id, '2', sha256(('other' || c.n)::bytea), o.fingerprint, 'w',
    CASE WHEN c.reviewed THEN now() END, CASE WHEN c.reviewed THEN 'alice' END
FROM opsdesk.operations o
JOIN (VALUES ('m4', 1, false), ('m4', 2, true), ('m5', 1, true), ('t3', 1, false)) AS c (key, n, reviewed) ON c.key = o.key;
`

// fixtureDB is a fresh database with the fixtures, their deferrals, and
// an unfinished purge run.
func fixtureDB(t *testing.T) *dbtest.DB {
	t.Helper()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), fixtures)
	require.NoError(t, err)
	deferRecords(t, d)
	return d
}

// deferRecords defers d1 and d3 for an hour and d2 for a moment, as an
// operator does, waits for d2's deferral to come due, and takes d3 over
// (a new attempt: a new version), which ends its deferral. It starts a
// purge run that never finishes, as an admin of every tenant.
func deferRecords(t *testing.T, d *dbtest.DB) {
	t.Helper()
	ctx := t.Context()
	operator := dbtest.NewPerson(t, d, "operator", "*")
	for key, snooze := range map[string]string{"d1": "1 hour", "d2": "300 milliseconds", "d3": "1 hour"} {
		var outcome string
		var message *string
		err := operator.Pool.QueryRow(ctx, `
SELECT r.outcome, r.message FROM opsdesk.operations o,
    opsdesk.decide(p_id => o.id, p_decision => 'defer', p_expect_version => o.version,
        p_reason => 'the provider answers tomorrow', p_snooze_until => now() + $2::interval) r
WHERE o.tenant = 'acme' AND o.key = $1`, key, snooze).Scan(&outcome, &message)
		require.NoError(t, err)
		require.Equal(t, "succeeded", outcome, "%v", message)
	}
	_, err := d.Admin.Exec(ctx, `UPDATE opsdesk.operations SET attempt = attempt + 1, owner = 'w2', version = version + 1
WHERE tenant = 'acme' AND key = 'd3'`)
	require.NoError(t, err)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	_, err = admin.Pool.Exec(ctx, `SELECT opsdesk.purge_start('create-ticket', NULL, '{}', 'end of quarter', 3, 'Ann')`)
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond) // d2's snooze time passes
}

// lazyPool is a pool on dsn that connects only when used: dsn may name
// a server that is not there.
func lazyPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// newExporter returns an exporter over pool with cfg's other settings.
func newExporter(pool *pgxpool.Pool, cfg Config) *Exporter {
	cfg.Pool = pool
	return New(cfg)
}

// scrapeBody scrapes e through its handler and returns the exposition
// text and how long the answer took.
func scrapeBody(t testing.TB, e *Exporter) (string, time.Duration) {
	t.Helper()
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/metrics", nil)
	rec := httptest.NewRecorder()
	start := time.Now()
	e.Handler().ServeHTTP(rec, req)
	took := time.Since(start)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return rec.Body.String(), took
}

// metrics is a parsed scrape.
type metrics map[string]*dto.MetricFamily

// scrape scrapes e and parses the exposition, which must be valid.
func scrape(t testing.TB, e *Exporter) metrics {
	t.Helper()
	body, _ := scrapeBody(t, e)
	return parse(t, body)
}

func parse(t testing.TB, body string) metrics {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewBufferString(body))
	require.NoError(t, err, "the exposition parses")
	return fams
}

// series returns the values of a metric by its labels, written
// "k=v,k=v" in label-name order ("" for none).
func (m metrics) series(name string) map[string]float64 {
	out := map[string]float64{}
	f, ok := m[name]
	if !ok {
		return out
	}
	for _, s := range f.GetMetric() {
		var labels []string
		for _, l := range s.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(labels)
		var v float64
		switch {
		case s.Gauge != nil:
			v = s.GetGauge().GetValue()
		case s.Counter != nil:
			v = s.GetCounter().GetValue()
		default:
			v = s.GetUntyped().GetValue()
		}
		out[strings.Join(labels, ",")] = v
	}
	return out
}

// value is one series' value; the series must exist.
func (m metrics) value(t testing.TB, name, labels string) float64 {
	t.Helper()
	s := m.series(name)
	v, ok := s[labels]
	require.True(t, ok, "%s{%s} is missing; it has %v", name, labels, slices.Sorted(maps.Keys(s)))
	return v
}
