package bulk_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// The run is handed the desk and the store behind its interfaces, so
// that bulk does not depend on pgx.
var (
	_ bulk.Decider      = (*desk.Desk)(nil)
	_ bulk.BatchStarter = (*desk.Desk)(nil)
	_ bulk.Lister       = (*storeview.Store)(nil)
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const charge = demo.ToolChargeCard

// bundle is a store, and a lookup spec and client to ask a provider
// with.
type bundle struct {
	ctx    context.Context
	db     *dbtest.DB
	spec   reconcile.LookupSpec
	client *http.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{ctx: t.Context(), db: dbtest.New(t), client: bulk.HTTPClient(bulk.DefaultConcurrency)}
}

// withDemoProvider starts the demo's simulated provider (on a store of its
// own) and asks it as the demo's catalog does.
func (b *bundle) withDemoProvider(t *testing.T) *demo.Provider {
	t.Helper()
	p, err := demo.StartProvider(demo.ProviderConfig{Pool: dbtest.New(t).Service})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	// Before the provider closes, which waits for a connection the client
	// dialled and never used (a spare one) for up to 5 s.
	t.Cleanup(b.client.CloseIdleConnections)
	b.spec = reconcile.LookupSpec{URL: p.URL() + demo.LookupPath, ResultRef: "/ref", Timeout: 5 * time.Second}
	return p
}

// outage leaves n charges stuck through the demo's workers and provider,
// and waits for their leases to run out.
func (b *bundle) outage(t *testing.T, p *demo.Provider, n int, seed uint64, tenants ...string) []demo.Abandoned {
	t.Helper()
	recs, err := demo.Outage(b.ctx, demo.OutageConfig{Pool: b.db.Service, Provider: p, Records: n, Seed: seed,
		Tenants: tenants, Lease: 300 * time.Millisecond})
	require.NoError(t, err)
	b.waitStuck(t)
	return recs
}

// waitStuck waits until no pending record has a live lease (inspection
// as the superuser).
func (b *bundle) waitStuck(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		var live int
		require.NoError(t, b.db.Admin.QueryRow(b.ctx,
			`SELECT count(*) FROM opsdesk.operations WHERE state = 'pending' AND lease_expires_at > now()`).Scan(&live))
		return live == 0
	}, 10*time.Second, 20*time.Millisecond)
}

// desk is person p's desk, with charge-card's lookup asking b.spec.
func (b *bundle) desk(p *dbtest.Person) *desk.Desk {
	spec := b.spec
	return &desk.Desk{Pool: p.Pool, DisplayName: "Bulk Tester", Client: b.client,
		Tools: map[string]reconcile.Tool{charge: {Lookup: &spec}, "create-ticket": {}}}
}

func (b *bundle) reconciler(t *testing.T, p *dbtest.Person, cfg bulk.Config) *bulk.Reconciler {
	t.Helper()
	if cfg.Desk == nil {
		cfg.Desk = b.desk(p)
	}
	if cfg.Lister == nil {
		cfg.Lister = storeview.New(p.Pool, storeview.Config{})
	}
	r, err := bulk.New(cfg)
	require.NoError(t, err)
	return r
}

func filter(t *testing.T, s string) readmodel.Filter {
	t.Helper()
	f, err := readmodel.ParseFilter(s)
	require.NoError(t, err)
	return f
}

// plan lists and looks up f's records as r.
func plan(t *testing.T, ctx context.Context, r *bulk.Reconciler, f string) *bulk.Plan {
	t.Helper()
	rows, err := r.List(ctx, filter(t, f))
	require.NoError(t, err)
	p, err := r.Lookup(ctx, f, rows, nil)
	require.NoError(t, err)
	return p
}

// record is a record as the superuser reads it (inspection only).
type record struct {
	ID                   int64
	Tenant, Key, State   string
	ResultRef            *string
	Version              int64
	BatchAudits, Audited int
}

func (b *bundle) records(t *testing.T, batch string) map[string]record {
	t.Helper()
	// What was decided in plain SQL is read once sealed.
	_, err := auditlog.Seal(b.ctx, b.db.Admin, "", 0)
	require.NoError(t, err)
	rows, err := b.db.Admin.Query(b.ctx, `
SELECT o.id, o.tenant, o.key, opsdesk.view_state(o), o.result_ref, o.version,
    (SELECT count(*) FROM opsdesk.audit a WHERE a.operation_id = o.id AND a.details->>'batch' = $1),
    (SELECT count(*) FROM opsdesk.audit a WHERE a.operation_id = o.id)
FROM opsdesk.operations o ORDER BY o.id`, batch)
	require.NoError(t, err)
	recs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (record, error) {
		var rec record
		err := r.Scan(&rec.ID, &rec.Tenant, &rec.Key, &rec.State, &rec.ResultRef, &rec.Version, &rec.BatchAudits, &rec.Audited)
		return rec, err
	})
	require.NoError(t, err)
	out := map[string]record{}
	for _, rec := range recs {
		out[rec.Tenant+"/"+rec.Key] = rec
	}
	return out
}

func verifyChains(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	rep, err := auditlog.Verify(ctx, pool, auditlog.VerifyOpts{})
	require.NoError(t, err)
	require.True(t, rep.OK, "audit verify: %+v", rep.Break)
}

// Several hundred stuck charges left by the demo's workers dying around
// the simulated provider's calls: every one is decided as the provider's
// ledger says, each by a decision of its own with its own audit record,
// all sharing the run's batch id.
func TestBulkMatchesTheProvidersTruth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	provider := b.withDemoProvider(t)
	truth := b.outage(t, provider, 400, 13)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	r := b.reconciler(t, operator, bulk.Config{})

	rows, err := r.List(b.ctx, filter(t, "state:stuck tool:charge-card"))
	require.NoError(t, err)
	require.Len(t, rows, len(truth))
	var looked []bulk.Progress
	p, err := r.Lookup(b.ctx, "state:stuck tool:charge-card", rows, func(pr bulk.Progress) { looked = append(looked, pr) })
	require.NoError(t, err)
	require.Len(t, looked, len(truth), "one progress report per record")
	require.Equal(t, len(truth), looked[len(looked)-1].Done)

	acted := 0
	for _, a := range truth {
		if _, ok := provider.Effect(demo.ProviderIdentity(a.Identity)); ok {
			acted++
		}
	}
	require.Positive(t, acted)
	require.Less(t, acted, len(truth))
	require.Equal(t, acted, p.Group(bulk.Found).Count())
	require.Equal(t, len(truth)-acted, p.Group(bulk.NotFound).Count())
	require.Zero(t, p.Group(bulk.NoAnswer).Count())
	require.Zero(t, p.Group(bulk.Error).Count())
	require.Equal(t, reconcile.Completed, p.Group(bulk.Found).Proposal)
	require.Equal(t, reconcile.NotExecuted, p.Group(bulk.NotFound).Proposal)
	require.Len(t, p.Group(bulk.Found).Samples(5), 5)

	for _, v := range []bulk.Verdict{bulk.Found, bulk.NotFound} {
		n := p.Group(v).Count()
		res, err := r.Accept(b.ctx, p, v, bulk.AcceptParams{Reason: "provider outage of 13 May: lookups after recovery", Confirm: n}, nil)
		require.NoError(t, err)
		require.Equal(t, n, res.Counts[bulk.Decided], "%s: %+v", v, res.Counts)
	}

	recs := b.records(t, p.BatchID)
	for _, a := range truth {
		rec := recs[a.Tenant+"/"+a.Key]
		ref, ok := provider.Effect(demo.ProviderIdentity(a.Identity))
		if ok {
			require.Equal(t, "completed", rec.State, a.Key)
			require.NotNil(t, rec.ResultRef)
			require.Equal(t, ref, *rec.ResultRef, a.Key)
		} else {
			require.Equal(t, "released", rec.State, a.Key)
		}
		require.Equal(t, 1, rec.BatchAudits, "%s: one audit record of its own, with the batch id", a.Key)
		require.Equal(t, 1, rec.Audited, a.Key)
	}
	// Each audit record is the person's, a succeeded decision naming its
	// record, with the lookup's verdict.
	var n, good int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT count(*), count(*) FILTER (WHERE role = $2 AND outcome = 'succeeded' AND reason = 'provider outage of 13 May: lookups after recovery'
    AND ((action = 'decide:completed' AND details->>'lookup' = 'found' AND details->>'result_ref' = details->>'lookup_ref')
      OR (action = 'decide:not-executed' AND details->>'lookup' = 'not_found'))
    AND evidence_digest LIKE 'sha256:%' AND display_name = 'Bulk Tester')
FROM opsdesk.audit WHERE details->>'batch' = $1`, p.BatchID, operator.Role).Scan(&n, &good))
	require.Equal(t, len(truth), n)
	require.Equal(t, n, good)
	verifyChains(t, b.ctx, admin.Pool)
}

// stuckFixtures inserts n stuck charge records in tenant as fixtures (the
// superuser sets up; the tests act as people), keyed prefix-1…, and
// returns their ids.
func (b *bundle) stuckFixtures(t *testing.T, tenant, prefix string, n int) []int64 {
	t.Helper()
	rows, err := b.db.Admin.Query(b.ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT $1, 'charge-card', $2 || i, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM generate_series(1, $3) i RETURNING id`, tenant, prefix, n)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

// stuckKeys inserts a stuck charge record in tenant for each key, as
// fixtures.
func (b *bundle) stuckKeys(t *testing.T, tenant string, keys ...string) {
	t.Helper()
	_, err := b.db.Admin.Exec(b.ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT $1, 'charge-card', k, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM unnest($2::text[]) k`, tenant, keys)
	require.NoError(t, err)
}

// fakeProvider answers lookups at /lookup/{tenant}/{tool}/{key} with
// answer(key); b.spec asks it.
func (b *bundle) fakeProvider(t *testing.T, timeout time.Duration, answer func(w http.ResponseWriter, r *http.Request, key string)) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.EscapedPath(), "/")
		answer(w, r, parts[len(parts)-1])
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(b.client.CloseIdleConnections)
	b.spec = reconcile.LookupSpec{URL: srv.URL + "/lookup/{tenant}/{tool}/{key}", ResultRef: "/ref", Timeout: timeout}
}

// found answers found with ref for keys starting "f", not found for the
// others.
func found(w http.ResponseWriter, _ *http.Request, key string) {
	if strings.HasPrefix(key, "f") {
		writeJSON(w, http.StatusOK, map[string]any{"found": true, "ref": "CH-" + key})
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"found": false})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (b *bundle) auditCount(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.audit`).Scan(&n))
	return n
}

// Bad input is an error that says what to fix, and nothing is decided or
// audited.
func TestBulkRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakeProvider(t, time.Second, found)
	b.stuckFixtures(t, "acme", "f", 3)
	b.stuckFixtures(t, "acme", "n", 2)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	r := b.reconciler(t, operator, bulk.Config{})

	for _, f := range []string{"", "tool:charge-card", "state:stuck", "state:pending tool:charge-card",
		"state:stuck,completed tool:charge-card", "state:stuck,conflicted tool:charge-card",
		"state:stuck tool:create-ticket", "state:stuck tool:charge-card,create-ticket", "state:stuck tool:unknown"} {
		_, err := r.List(b.ctx, filter(t, f))
		require.ErrorIs(t, err, bulk.ErrFilter, "%q", f)
	}
	for _, c := range []bulk.Config{{Concurrency: -1}, {Concurrency: bulk.MaxConcurrency + 1}, {MaxRecords: -5},
		{MaxRecords: bulk.DefaultMaxRecords + 1}, {DecideTimeout: -time.Second}} {
		c.Desk, c.Lister = b.desk(operator), storeview.New(operator.Pool, storeview.Config{})
		_, err := bulk.New(c)
		require.ErrorIs(t, err, bulk.ErrConfig, "%+v", c)
	}
	small := b.reconciler(t, operator, bulk.Config{MaxRecords: 4})
	_, err := small.List(b.ctx, filter(t, "state:stuck tool:charge-card"))
	require.ErrorIs(t, err, bulk.ErrTooMany)

	p := plan(t, b.ctx, r, "state:stuck tool:charge-card")
	require.Equal(t, 3, p.Group(bulk.Found).Count())
	for _, reason := range []string{"", " ", "\t\n", "\u3000", "\ufeff\u200b ", strings.Repeat("x", 2001), "a\x00b", "a\xffb"} {
		_, err := r.Accept(b.ctx, p, bulk.Found, bulk.AcceptParams{Reason: reason, Confirm: 3}, nil)
		require.ErrorIs(t, err, bulk.ErrNoReason, "%q", reason)
	}
	for _, n := range []int{0, 2, 4, -3, 5} {
		_, err := r.Accept(b.ctx, p, bulk.Found, bulk.AcceptParams{Reason: "outage", Confirm: n}, nil)
		require.ErrorIs(t, err, bulk.ErrNotConfirmed, "%d", n)
	}
	for _, v := range []bulk.Verdict{bulk.NoAnswer, bulk.Error, "bogus"} {
		_, err := r.Accept(b.ctx, p, v, bulk.AcceptParams{Reason: "outage", Confirm: 0}, nil)
		require.ErrorIs(t, err, bulk.ErrNoProposal, v)
	}
	require.Zero(t, b.auditCount(t))
	for _, rec := range b.records(t, p.BatchID) {
		require.Equal(t, "stuck", rec.State)
	}
}

// A viewer may look, not decide: its run cannot start (opsdesk.start_batch
// refuses it), so nothing is looked up, decided or audited, and the error
// says why. decide's own refusal of a viewer, under a batch or not, is
// desk's TestDecisionsCarryTheirBatch.
func TestBulkViewerIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var asked atomic.Int32
	b.fakeProvider(t, time.Second, func(w http.ResponseWriter, r *http.Request, key string) {
		asked.Add(1)
		found(w, r, key)
	})
	b.stuckFixtures(t, "acme", "f", 20)
	viewer := dbtest.NewPerson(t, b.db, "viewer", "*")
	r := b.reconciler(t, viewer, bulk.Config{Concurrency: 1})
	rows, err := r.List(b.ctx, filter(t, "state:stuck tool:charge-card"))
	require.NoError(t, err)
	require.Len(t, rows, 20, "a viewer lists")
	p, err := r.Lookup(b.ctx, "state:stuck tool:charge-card", rows, nil)
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	require.ErrorContains(t, err, "may not start a run")
	require.Empty(t, p.BatchID)
	require.Len(t, p.NotAsked, 20)
	require.Zero(t, asked.Load(), "no lookup ran")
	_, err = r.Accept(b.ctx, p, bulk.Found, bulk.AcceptParams{Reason: "outage", Confirm: 0}, nil)
	require.ErrorIs(t, err, bulk.ErrConfig, "a plan whose run never started decides nothing")
	require.Zero(t, b.auditCount(t))
	var n int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.batches`).Scan(&n))
	require.Zero(t, n)
}

// A run records the filter it was listed with, for the login that
// started it; a filter longer than a run keeps is recorded cut, on a
// character, rather than refusing the run.
func TestBulkRunRecordsItsFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakeProvider(t, time.Second, found)
	b.stuckFixtures(t, "acme", "f", 3)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	r := b.reconciler(t, operator, bulk.Config{Concurrency: 1})
	p := plan(t, b.ctx, r, "state:stuck tool:charge-card tenant:acme")
	var role, got string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT role, filter FROM opsdesk.batches WHERE id = $1`, p.BatchID).Scan(&role, &got))
	require.Equal(t, operator.Role, role)
	require.Equal(t, p.Filter, got)
	require.Contains(t, got, "tool:charge-card")
	require.Contains(t, got, "tenant:acme")

	rows, err := r.List(b.ctx, filter(t, "state:stuck tool:charge-card"))
	require.NoError(t, err)
	long := "state:stuck tool:charge-card key:" + strings.Repeat("é", 600) + "\t"
	q, err := r.Lookup(b.ctx, long, rows[:2], nil)
	require.NoError(t, err)
	require.NotEqual(t, p.BatchID, q.BatchID, "each run its own")
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT filter FROM opsdesk.batches WHERE id = $1`, q.BatchID).Scan(&got))
	require.Equal(t, q.Filter, got, "a long filter is recorded cut, not refused")
	require.Equal(t, reconcile.MaxBatchFilterBytes, len(got))
	require.True(t, strings.HasSuffix(got, "é…"), got[len(got)-10:])
}

// otherTenant is every column of tenant's records and the number of audit
// records in its chain (inspection as the superuser): what a run of
// another tenant's person must leave exactly as it was.
func (b *bundle) otherTenant(t *testing.T, tenant string) ([]string, int) {
	t.Helper()
	rows, err := b.db.Admin.Query(b.ctx, `SELECT o::text FROM opsdesk.operations o WHERE tenant = $1 ORDER BY id`, tenant)
	require.NoError(t, err)
	recs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	var audits int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.audit WHERE tenant = $1`, tenant).Scan(&audits))
	return recs, audits
}

// atTheCap is prefix followed by as many g's as make the longest filter
// storeview parses.
func atTheCap(prefix string) string {
	return prefix + strings.Repeat("g", readmodel.MaxFilterBytes-len(prefix))
}

// A person of one tenant, operator or admin, lists, asks about and
// decides its tenant's records only, whatever the filter names: hostile
// filters that parse (another tenant's name with &, a tenant as long as
// a filter may be (a 1 MiB one is refused by the parser), a
// dot-segment tool, the other tenant's ids) list nothing or are refused,
// a forged plan naming another tenant's record skips it, and the other
// tenant's stuck charges stay byte for byte as they were, with no audit
// record in its chain.
func TestBulkOneTenantRoles(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"operator", "admin"} {
		t.Run(strings.ToUpper(level[:1])+level[1:], func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var mu sync.Mutex
			var asked []string
			b.fakeProvider(t, time.Second, func(w http.ResponseWriter, r *http.Request, key string) {
				mu.Lock()
				asked = append(asked, r.URL.Path)
				mu.Unlock()
				found(w, r, key)
			})
			b.stuckFixtures(t, "acme", "f", 3)
			b.stuckFixtures(t, "acme", "n", 2)
			b.stuckFixtures(t, "globex", "f", 4)
			b.stuckFixtures(t, "globex", "n", 2)
			globexBefore, globexAudits := b.otherTenant(t, "globex")
			require.Len(t, globexBefore, 6)
			require.Zero(t, globexAudits)
			person := dbtest.NewPerson(t, b.db, level, "acme")
			r := b.reconciler(t, person, bulk.Config{})

			rows, err := r.List(b.ctx, filter(t, "state:stuck tool:charge-card id:1,2,3,4,5,6,7,8,9,10,11 tenant:globex,initech"))
			require.NoError(t, err)
			require.Empty(t, rows, "globex's ids named outright")
			for _, f := range []string{"state:stuck tool:charge-card tenant:globex", "state:stuck tool:charge-card tenant:acme&globex",
				"state:stuck tool:charge-card tenant:globex&", atTheCap("state:stuck tool:charge-card tenant:")} {
				rows, err := r.List(b.ctx, filter(t, f))
				require.NoError(t, err, f[:min(len(f), 60)])
				require.Empty(t, rows, f[:min(len(f), 60)])
			}
			_, err = readmodel.ParseFilter("state:stuck tool:charge-card tenant:" + strings.Repeat("g", 1<<20))
			require.ErrorContains(t, err, "write at most", "a 1 MiB filter is refused before it is read")
			for _, f := range []string{"state:stuck tool:../charge-card", "state:stuck tool:charge-card/..", "state:stuck tool:./charge-card"} {
				_, err := r.List(b.ctx, filter(t, f))
				require.ErrorIs(t, err, bulk.ErrFilter, f)
			}
			require.Empty(t, asked, "listing asks no provider")

			p := plan(t, b.ctx, r, "state:stuck tool:charge-card tenant:acme,globex")
			require.Equal(t, 3, p.Group(bulk.Found).Count())
			require.Equal(t, 2, p.Group(bulk.NotFound).Count())
			require.Len(t, asked, 5)
			for _, path := range asked {
				require.Contains(t, path, "/acme/", "only acme's records are asked about")
			}
			for _, v := range []bulk.Verdict{bulk.Found, bulk.NotFound} {
				res, err := r.Accept(b.ctx, p, v, bulk.AcceptParams{Reason: "outage", Confirm: p.Group(v).Count()}, nil)
				require.NoError(t, err)
				require.Equal(t, p.Group(v).Count(), res.Counts[bulk.Decided], "%s: %+v", v, res.Counts)
			}
			for _, rec := range b.records(t, p.BatchID) {
				if rec.Tenant == "acme" {
					require.Equal(t, 1, rec.BatchAudits, rec.Key)
				}
			}
			// Even a plan naming another tenant's record (a forged one)
			// decides nothing there: the record is not visible, so it is
			// skipped.
			var globex int64
			require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT id FROM opsdesk.operations WHERE tenant = 'globex' LIMIT 1`).Scan(&globex))
			forged := &bulk.Plan{BatchID: p.BatchID, Groups: []bulk.Group{{Verdict: bulk.NotFound, Proposal: reconcile.NotExecuted,
				Items: []bulk.Item{{ID: globex, Tenant: "globex", Tool: charge, Key: "f1", Version: 1, Verdict: bulk.NotFound}}}}}
			res, err := r.Accept(b.ctx, forged, bulk.NotFound, bulk.AcceptParams{Reason: "outage", Confirm: 1}, nil)
			require.NoError(t, err)
			require.Equal(t, 1, res.Counts[bulk.Skipped])

			globexAfter, globexAudits := b.otherTenant(t, "globex")
			require.Equal(t, globexBefore, globexAfter, "globex's records byte for byte")
			require.Zero(t, globexAudits, "no audit record in globex's chain")
		})
	}
}

// staleLister reads records as they were at its first listing: the run's
// second read then misses a change, and decide's own check of the version
// must catch it.
type staleLister struct {
	bulk.Lister
	mu    sync.Mutex
	first map[int64]readmodel.Row
}

func (s *staleLister) List(ctx context.Context, q readmodel.Query) (readmodel.Page, error) {
	page, err := s.Lister.List(ctx, q)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == nil {
		s.first = map[int64]readmodel.Row{}
		for _, row := range page.Rows {
			s.first[row.ID] = row
		}
		return page, err
	}
	for i, row := range page.Rows {
		if old, ok := s.first[row.ID]; ok {
			page.Rows[i] = old
		}
	}
	return page, err
}

// A record that changed between the lookup and the decision is skipped
// and reported, never decided: by the run's second read, or, if that read
// missed the change, by decide's check of the version seen.
func TestBulkSkipsRecordsThatChanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakeProvider(t, time.Second, found)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	other := dbtest.NewPerson(t, b.db, "operator", "*")

	for _, c := range []struct {
		name  string
		stale bool
	}{{"SeenByTheSecondRead", false}, {"CaughtByDecide", true}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := bulk.Config{}
			if c.stale {
				cfg.Lister = &staleLister{Lister: storeview.New(operator.Pool, storeview.Config{})}
			}
			r := b.reconciler(t, operator, cfg)
			prefix := "f-" + c.name + "-"
			b.stuckFixtures(t, "acme", prefix, 6)
			p := plan(t, b.ctx, r, "state:stuck tool:charge-card key:"+prefix+"*")
			items := p.Group(bulk.Found).Items
			require.Len(t, items, 6)
			// Another operator decides one of them meanwhile.
			changed := items[0]
			_, err := desk.Decide(b.ctx, other.Pool, reconcile.DecideParams{OperationID: changed.ID, Decision: reconcile.Failed,
				ExpectVersion: changed.Version, Reason: "card reported stolen"})
			require.NoError(t, err)
			// And a new stuck record appears that the run never listed.
			late := b.stuckFixtures(t, "acme", prefix+"late-", 1)[0]

			res, err := r.Accept(b.ctx, p, bulk.Found, bulk.AcceptParams{Reason: "outage", Confirm: len(items)}, nil)
			require.NoError(t, err)
			require.Equal(t, 1, res.Counts[bulk.Skipped])
			require.Equal(t, len(items)-1, res.Counts[bulk.Decided])
			skipped := res.Only(bulk.Skipped)[0]
			require.Equal(t, changed.ID, skipped.ID)
			require.Contains(t, skipped.Message, "changed since the lookup")
			var state, by string
			require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT opsdesk.view_state(o), (SELECT coalesce(string_agg(role || ':' || outcome, ',' ORDER BY seq), '') FROM opsdesk.audit a
    WHERE a.operation_id = o.id AND a.details->>'batch' = $2)
FROM opsdesk.operations o WHERE id = $1`, changed.ID, p.BatchID).Scan(&state, &by))
			require.Equal(t, "rejected", state, "the other operator's decision stands")
			if c.stale {
				require.Equal(t, operator.Role+":failed", by, "decide refused it as changed, and audited the refusal")
			} else {
				require.Empty(t, by, "skipped before any attempt")
			}
			require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT opsdesk.view_state(o) FROM opsdesk.operations o WHERE id = $1`, late).Scan(&state))
			require.Equal(t, "stuck", state, "a record the run did not list is not touched")
		})
	}
}

// A lookup's hostile answer is never recorded: a found answer whose
// reference is too long, carries control or invisible characters, or is
// missing lands in the error group, without a proposal, and its note is
// safe to print.
func TestBulkHostileReferences(t *testing.T) {
	t.Parallel()
	b := setup(t)
	refs := map[string]any{
		"long":   strings.Repeat("A", 501),
		"huge":   strings.Repeat("B", 2<<20), // cut at 1 MiB: no JSON
		"giant":  nil,                        // 32 MiB, written raw below: encoding it would outlast the lookup's timeout on a busy machine
		"escape": "CH-1\x1b[31m",
		"bidi":   "CH-\u202e1",
		"nul":    "CH-\x001",
		"zwsp":   "CH-\u200b1",
		"space":  " CH-1",
		"empty":  "",
		"object": map[string]any{"id": 1},
		"good":   "CH-ok",
		"number": 42,
	}
	b.fakeProvider(t, time.Second, func(w http.ResponseWriter, _ *http.Request, key string) {
		name := strings.TrimPrefix(key, "h")
		if name == "giant" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"found": true, "ref": "` + strings.Repeat("C\u0000\u001b", 32<<20/13+1) + `"}`))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"found": true, "ref": refs[name]})
	})
	for name := range refs {
		b.stuckKeys(t, "acme", "h"+name)
	}
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	r := b.reconciler(t, operator, bulk.Config{})
	p := plan(t, b.ctx, r, "state:stuck tool:charge-card")

	got := map[string]bulk.Verdict{}
	for _, g := range p.Groups {
		for _, item := range g.Items {
			got[item.Key] = g.Verdict
			require.LessOrEqual(t, len(item.Note), 300, item.Key)
			for _, c := range item.Note {
				require.True(t, unicode.IsGraphic(c), "%s: note %q", item.Key, item.Note)
			}
		}
	}
	require.Equal(t, map[string]bulk.Verdict{"hlong": bulk.Error, "hhuge": bulk.Error, "hgiant": bulk.Error, "hescape": bulk.Error, "hbidi": bulk.Error,
		"hnul": bulk.Error, "hzwsp": bulk.Error, "hspace": bulk.Error, "hempty": bulk.Error, "hobject": bulk.Error,
		"hgood": bulk.Found, "hnumber": bulk.Found}, got)
	res, err := r.Accept(b.ctx, p, bulk.Found, bulk.AcceptParams{Reason: "outage", Confirm: 2}, nil)
	require.NoError(t, err)
	require.Equal(t, 2, res.Counts[bulk.Decided])
	var refsStored []string
	rows, err := b.db.Admin.Query(b.ctx, `SELECT result_ref FROM opsdesk.operations WHERE state = 'completed' ORDER BY result_ref`)
	require.NoError(t, err)
	refsStored, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"42", "CH-ok"}, refsStored)
}

// A provider that hangs costs each lookup its timeout and no more; a
// cancelled run stops at once and says which records were not asked.
func TestBulkHangingProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakeProvider(t, 300*time.Millisecond, func(_ http.ResponseWriter, r *http.Request, _ string) {
		<-r.Context().Done()
	})
	b.stuckFixtures(t, "acme", "f", 16)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	r := b.reconciler(t, operator, bulk.Config{Concurrency: 8})

	start := time.Now()
	p := plan(t, b.ctx, r, "state:stuck tool:charge-card")
	took := time.Since(start)
	require.Equal(t, 16, p.Group(bulk.NoAnswer).Count())
	require.Less(t, took, 3*time.Second, "two rounds of 300 ms timeouts")
	require.Contains(t, p.Group(bulk.NoAnswer).Items[0].Note, "no answer")

	// Cancelled while every lookup hangs (for up to 10 s each).
	b.spec.Timeout = 10 * time.Second
	r = b.reconciler(t, operator, bulk.Config{Concurrency: 4})
	rows, err := r.List(b.ctx, filter(t, "state:stuck tool:charge-card"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(b.ctx, 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	p, err = r.Lookup(ctx, "state:stuck", rows, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Len(t, p.NotAsked, 16, "cut-short lookups are not evidence of no answer")
	for _, g := range p.Groups {
		require.Zero(t, g.Count())
	}
}

// Cancelling an accepted group stops it cleanly: every record is either
// decided (and audited) or untouched, and the result says which.
func TestBulkAcceptCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakeProvider(t, time.Second, found)
	b.stuckFixtures(t, "acme", "n", 60)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	r := b.reconciler(t, operator, bulk.Config{Concurrency: 2})
	p := plan(t, b.ctx, r, "state:stuck tool:charge-card")
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	res, err := r.Accept(ctx, p, bulk.NotFound, bulk.AcceptParams{Reason: "outage", Confirm: 60}, func(pr bulk.Progress) {
		if pr.Done == 5 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, res.Counts[bulk.Failed])
	require.GreaterOrEqual(t, res.Counts[bulk.Decided], 5)
	require.Positive(t, res.Counts[bulk.NotAttempted])
	require.Equal(t, 60, res.Counts[bulk.Decided]+res.Counts[bulk.NotAttempted])
	recs := b.records(t, p.BatchID)
	for _, item := range res.Items {
		rec := recs["acme/"+item.Key]
		if item.Outcome == bulk.Decided {
			require.Equal(t, "released", rec.State)
			require.Equal(t, 1, rec.BatchAudits)
		} else {
			require.Equal(t, "stuck", rec.State)
			require.Zero(t, rec.Audited)
		}
	}
}

// Sessions that hold a record do not stall a run: a person's open
// transaction that decided a record, and a lock the library (here the
// superuser) holds, each cost their own record at most the functions'
// lock_timeout (2 s): refused as busy, audited, naming the holder. The
// other records are decided meanwhile, and nobody's session is ended.
func TestBulkLockedRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakeProvider(t, time.Second, found)
	ids := b.stuckFixtures(t, "acme", "n", 12)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	holder := dbtest.NewPerson(t, b.db, "operator", "*")
	r := b.reconciler(t, operator, bulk.Config{Concurrency: 4, DecideTimeout: 3 * time.Second})
	p := plan(t, b.ctx, r, "state:stuck tool:charge-card")

	// A person decides ids[0] in a transaction left open: it holds the
	// record's row.
	conn, err := pgx.Connect(b.ctx, holder.DSN)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(b.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, `SELECT opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => 1, p_reason => 'mine')`, ids[0])
	require.NoError(t, err)
	// The superuser (as the library would) holds ids[1]'s row.
	lib, err := b.db.Admin.Begin(b.ctx)
	require.NoError(t, err)
	defer lib.Rollback(context.Background()) //nolint:errcheck
	_, err = lib.Exec(b.ctx, `SELECT FROM opsdesk.operations WHERE id = $1 FOR UPDATE`, ids[1])
	require.NoError(t, err)
	var superuser string
	require.NoError(t, lib.QueryRow(b.ctx, `SELECT session_user`).Scan(&superuser))

	start := time.Now()
	res, err := r.Accept(b.ctx, p, bulk.NotFound, bulk.AcceptParams{Reason: "outage", Confirm: 12}, nil)
	took := time.Since(start)
	require.NoError(t, err)
	require.Less(t, took, 10*time.Second)
	t.Logf("accepted 12 records around two held locks in %s: %v", took.Round(time.Millisecond), res.Counts)
	require.Equal(t, 10, res.Counts[bulk.Decided], "%+v", res.Items)
	require.Equal(t, 2, res.Counts[bulk.Refused])
	for _, item := range res.Only(bulk.Refused) {
		who := holder.Role
		if item.ID == ids[1] {
			who = superuser
		}
		require.Contains(t, item.Message, "held by "+who, "the refusal names the holder")
		require.NotEmpty(t, item.Audit, "the busy refusal is audited")
	}
	require.NoError(t, tx.Commit(b.ctx), "the holder's session was not ended")
	require.NoError(t, lib.Rollback(b.ctx))

	recs := b.records(t, p.BatchID)
	for _, rec := range recs {
		switch rec.ID {
		case ids[0]:
			require.Equal(t, "rejected", rec.State, "the holder's own decision stands")
			require.Equal(t, 1, rec.BatchAudits, "the run's busy refusal")
		case ids[1]:
			require.Equal(t, "stuck", rec.State)
			require.Equal(t, 1, rec.BatchAudits, "the run's busy refusal")
		default:
			require.Equal(t, "released", rec.State, rec.Key)
			require.Equal(t, 1, rec.BatchAudits, rec.Key)
			require.Equal(t, 1, rec.Audited, rec.Key)
		}
	}
	verifyChains(t, b.ctx, dbtest.NewPerson(t, b.db, "admin", "*").Pool)
}

// errDesk is a desk whose decisions fail (a store that went away).
type errDesk struct{ *desk.Desk }

func (errDesk) Decide(context.Context, string, reconcile.DecideParams) (reconcile.Result, error) {
	return reconcile.Result{}, errors.New("connection reset by peer")
}

// A group whose decisions keep failing stops after ten in a row.
func TestBulkStopsWhenDecisionsKeepFailing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakeProvider(t, time.Second, found)
	b.stuckFixtures(t, "acme", "n", 30)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	r := b.reconciler(t, operator, bulk.Config{Concurrency: 1, Desk: errDesk{b.desk(operator)}})
	p := plan(t, b.ctx, r, "state:stuck tool:charge-card")
	res, err := r.Accept(b.ctx, p, bulk.NotFound, bulk.AcceptParams{Reason: "outage", Confirm: 30}, nil)
	require.ErrorContains(t, err, "10 failed decisions in a row")
	require.Equal(t, 10, res.Counts[bulk.Failed])
	require.Equal(t, 20, res.Counts[bulk.NotAttempted])
}

// failingLister lists once, then fails: the store went away between the
// lookups and the acceptance.
type failingLister struct {
	bulk.Lister
	mu    sync.Mutex
	calls int
}

func (f *failingLister) List(ctx context.Context, q readmodel.Query) (readmodel.Page, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if n > 1 {
		return readmodel.Page{}, errors.New("connection refused")
	}
	return f.Lister.List(ctx, q)
}

// A group whose records cannot be read again (the store went away, or
// the person stopped it at once) decides nothing, and its counts say that
// every record was not attempted, as its items do: a screen reading the
// counts must not take it for a group that was accepted.
func TestBulkAcceptBeforeAnyDecision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakeProvider(t, time.Second, found)
	operator := dbtest.NewPerson(t, b.db, "operator", "*")
	for _, c := range []struct {
		name      string
		cancelled bool
	}{{"StoreGone", false}, {"StoppedAtOnce", true}} {
		t.Run(c.name, func(t *testing.T) {
			prefix := "f-" + c.name + "-"
			b.stuckFixtures(t, "acme", prefix, 4)
			cfg := bulk.Config{}
			if !c.cancelled {
				cfg.Lister = &failingLister{Lister: storeview.New(operator.Pool, storeview.Config{})}
			}
			r := b.reconciler(t, operator, cfg)
			p := plan(t, b.ctx, r, "state:stuck tool:charge-card key:"+prefix+"*")
			require.Equal(t, 4, p.Group(bulk.Found).Count())
			audits := b.auditCount(t)
			accept, cancel := context.WithCancel(b.ctx)
			defer cancel()
			if c.cancelled {
				cancel()
			}
			res, err := r.Accept(accept, p, bulk.Found, bulk.AcceptParams{Reason: "outage", Confirm: 4}, nil)
			require.Error(t, err)
			require.Len(t, res.Items, 4)
			require.Len(t, res.Only(bulk.NotAttempted), 4)
			require.Equal(t, map[bulk.ItemOutcome]int{bulk.NotAttempted: 4}, res.Counts, "the counts agree with the items")
			require.Equal(t, audits, b.auditCount(t), "nothing was decided or audited")
		})
	}
}
