package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// bulkFixtures are acme's stuck charges after an outage (f…: the provider
// has them, n…: it has not), and records the list leaves out: acme's
// charge with a live lease, acme's stuck ticket, globex's stuck charge.
const bulkFixtures = `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt,
    leased_at, lease_expires_at, created_at)
SELECT t, tool, k, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'worker-1', 1,
    now() - interval '20m', now() + lease, now() - interval '20m'
FROM (VALUES ('acme', 'charge-card', 'f1', interval '-19m'), ('acme', 'charge-card', 'f2', interval '-19m'),
    ('acme', 'charge-card', 'f3', interval '-19m'), ('acme', 'charge-card', 'f4', interval '-19m'),
    ('acme', 'charge-card', 'f5', interval '-19m'), ('acme', 'charge-card', 'n1', interval '-19m'),
    ('acme', 'charge-card', 'n2', interval '-19m'), ('acme', 'charge-card', 'n3', interval '-19m'),
    ('acme', 'charge-card', 'f-live', interval '1h'), ('acme', 'create-ticket', 'f-ticket', interval '-19m'),
    ('globex', 'charge-card', 'f-globex', interval '-19m')) v(t, tool, k, lease)`

// bulkRecord is a record as the superuser reads it back (inspection only).
type bulkRecord struct {
	State, Ref             string
	Version                int64
	BatchAudits, Audits    int
	BatchRole, BatchAction string
}

func bulkRecords(t *testing.T, d *dbtest.DB, batch string) map[string]bulkRecord {
	t.Helper()
	out := map[string]bulkRecord{}
	rows, err := d.Admin.Query(context.Background(), `
SELECT o.tenant || '/' || o.key, opsdesk.view_state(o), coalesce(o.result_ref, ''), o.version,
    (SELECT count(*) FROM opsdesk.audit a WHERE a.operation_id = o.id AND a.details->>'batch' = $1),
    (SELECT count(*) FROM opsdesk.audit a WHERE a.operation_id = o.id),
    coalesce((SELECT string_agg(a.role, ',') FROM opsdesk.audit a WHERE a.operation_id = o.id AND a.details->>'batch' = $1), ''),
    coalesce((SELECT string_agg(a.action, ',') FROM opsdesk.audit a WHERE a.operation_id = o.id AND a.details->>'batch' = $1), '')
FROM opsdesk.operations o`, batch)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var r bulkRecord
		require.NoError(t, rows.Scan(&id, &r.State, &r.Ref, &r.Version, &r.BatchAudits, &r.Audits, &r.BatchRole, &r.BatchAction))
		out[id] = r
	}
	require.NoError(t, rows.Err())
	return out
}

// bulkProvider answers lookups: found with reference CH-key for keys
// starting with f, not found for the others.
func bulkProvider(t *testing.T) reconcile.LookupSpec {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.EscapedPath(), "/")
		key := parts[len(parts)-1]
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(key, "f") {
			w.WriteHeader(http.StatusOK)
			_ = json.NewEncoder(w).Encode(map[string]any{"found": true, "ref": "CH-" + key})
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"found": false})
	}))
	t.Cleanup(srv.Close)
	return reconcile.LookupSpec{URL: srv.URL + "/lookup/{tenant}/{tool}/{key}", ResultRef: "/ref", Timeout: 5 * time.Second}
}

// bulkConsole is the console of person p over a real store, with the
// bulk reconciliation over the same desk and store.
func bulkConsole(t *testing.T, p *dbtest.Person, spec reconcile.LookupSpec) *harness {
	t.Helper()
	store := storeview.New(p.Pool, storeview.Config{StatementTimeout: 5 * time.Second})
	client := bulk.HTTPClient(4)
	t.Cleanup(client.CloseIdleConnections)
	desk := &desk.Desk{Pool: p.Pool, DisplayName: "Test Operator", Client: client,
		Tools: map[string]reconcile.Tool{"charge-card": {Lookup: &spec}, "create-ticket": {}}}
	r, err := bulk.New(bulk.Config{Desk: desk, Lister: store, Concurrency: 4})
	require.NoError(t, err)
	return newSourceHarness(t, store, Config{Context: "db", Decider: desk, Bulk: r}, 120, 40)
}

// TestBulkRealDatabase drives R end to end on a real PostgreSQL as an
// operator's own login: lookups at a provider, the found group accepted
// with its count, the not found group next. Each record of a group is
// decided with its own audit record, all sharing the run's batch id; a
// record changed between the lookup and the acceptance is skipped; the
// records the list leaves out are untouched. A viewer is not offered R.
func TestBulkRealDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(ctx, bulkFixtures)
	require.NoError(t, err)
	spec := bulkProvider(t)
	before := bulkRecords(t, d, "")

	operator := dbtest.NewPerson(t, d, "operator", "*")
	h := bulkConsole(t, operator, spec)
	require.True(t, h.m.canDecide(), "the role's capabilities: %+v", h.m.caps)
	h.keys(":stuck tool:charge-card tenant:acme<enter>")
	require.Contains(t, h.view(), "R reconcile all by lookup", "the list does not offer R:\n%s", h.view())
	h.keys("R")
	v := flat(h.view())
	require.Contains(t, v, "8 stuck records looked up", "the plan:\n%s", h.view())
	require.Contains(t, v, "▸ ✓ found 5 → completed, with the provider's reference", "the plan:\n%s", h.view())
	require.Contains(t, v, "○ not found 3 → not executed", "the plan:\n%s", h.view())
	batch := h.m.bulk().plan.BatchID
	require.NotEmpty(t, batch)

	// f3 completes behind the operator's back after its lookup.
	h.keys("<enter>provider outage, lookups after recovery<enter>")
	_, err = d.Admin.Exec(ctx, `
UPDATE opsdesk.operations SET state = 'completed', outcome = 'succeeded', result = '{"id": 3}', result_ref = 'CH-f3',
    completed_at = now(), expires_at = now() + interval '1 day', updated_at = now(), version = version + 1
WHERE key = 'f3'`)
	require.NoError(t, err)
	h.keys("5<enter>")
	v = flat(h.view())
	require.Contains(t, v, "found → completed: 4 decided, 1 skipped", "the result:\n%s", h.view())
	require.Contains(t, v, "Skipped: changed since the lookup, not decided (1)", "the result:\n%s", h.view())
	require.Contains(t, v, "acme f3", "the result:\n%s", h.view())
	require.Contains(t, v, batch, "the result:\n%s", h.view())

	// The next group: not found.
	h.keys("<enter>")
	require.Contains(t, flat(h.view()), "▸ ○ not found", "the plan after the first group:\n%s", h.view())
	h.keys("<enter>provider outage, lookups after recovery<enter>3<enter>")
	require.Contains(t, flat(h.view()), "not found → not executed: 3 decided", "the result:\n%s", h.view())

	after := bulkRecords(t, d, batch)
	for _, k := range []string{"f1", "f2", "f4", "f5"} {
		r := after["acme/"+k]
		require.Equal(t, bulkRecord{State: "completed", Ref: "CH-" + k, Version: before["acme/"+k].Version + 1, BatchAudits: 1, Audits: 1,
			BatchRole: operator.Role, BatchAction: "decide:completed"}, r, k)
	}
	for _, k := range []string{"n1", "n2", "n3"} {
		r := after["acme/"+k]
		require.Equal(t, bulkRecord{State: "released", Version: before["acme/"+k].Version + 1, BatchAudits: 1, Audits: 1,
			BatchRole: operator.Role, BatchAction: "decide:not-executed"}, r, k)
	}
	// Skipped: f3 has the change made behind the console's back, and no
	// decision of the batch.
	require.Equal(t, "completed", after["acme/f3"].State)
	require.Zero(t, after["acme/f3"].BatchAudits)
	require.Zero(t, after["acme/f3"].Audits)
	// Outside the list: untouched.
	for _, k := range []string{"acme/f-live", "acme/f-ticket", "globex/f-globex"} {
		b := before[k]
		b.BatchRole, b.BatchAction = "", ""
		require.Equal(t, b, after[k], k)
	}

	// Leaving returns to the list, refreshed: nothing stuck is left.
	h.keys("<esc>")
	require.Equal(t, screenList, h.m.active().id())
	require.Contains(t, h.view(), "no operations match", "the list after the run:\n%s", h.view())

	// A viewer is not offered R, and R does nothing.
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	hv := bulkConsole(t, viewer, spec)
	require.True(t, hv.m.capsKnown)
	require.False(t, hv.m.canDecide())
	hv.keys(":stuck tool:charge-card<enter>")
	require.Contains(t, hv.view(), "f-globex", "the viewer's list:\n%s", hv.view())
	require.NotContains(t, hv.view(), "R reconcile all by lookup", "a viewer is offered R:\n%s", hv.view())
	hv.keys("R")
	require.Equal(t, screenList, hv.m.active().id())
}

// globexAsItWas is every column of globex's records and the number of
// audit records in its chain (inspection as the superuser).
func globexAsItWas(t *testing.T, d *dbtest.DB) ([]string, int) {
	t.Helper()
	ctx := context.Background()
	rows, err := d.Admin.Query(ctx, `SELECT o::text FROM opsdesk.operations o WHERE tenant = 'globex' ORDER BY id`)
	require.NoError(t, err)
	var recs []string
	for rows.Next() {
		var r string
		require.NoError(t, rows.Scan(&r))
		recs = append(recs, r)
	}
	require.NoError(t, rows.Err())
	var audits int
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT count(*) FROM opsdesk.audit WHERE tenant = 'globex'`).Scan(&audits))
	return recs, audits
}

// R as a person of one tenant (operator, admin) on a real store: the run
// lists and decides acme's records only, whatever the list's filter
// names; a filter naming another tool by a dot segment is refused before
// anything is looked up, and one naming globex with & lists nothing.
// globex's stuck charge stays byte for byte, with no audit record in its
// chain.
func TestBulkRealDatabaseOneTenant(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"operator", "admin"} {
		t.Run(strings.ToUpper(level[:1])+level[1:], func(t *testing.T) {
			t.Parallel()
			d := dbtest.New(t)
			_, err := d.Admin.Exec(context.Background(), bulkFixtures)
			require.NoError(t, err)
			globex, audits := globexAsItWas(t, d)
			require.Len(t, globex, 1)
			require.Zero(t, audits)
			person := dbtest.NewPerson(t, d, level, "acme")
			h := bulkConsole(t, person, bulkProvider(t))

			// An empty list offers no R; the flow refuses such a filter
			// all the same when opened on it.
			for _, f := range []string{"state:stuck tool:../charge-card", "state:stuck tool:charge-card tenant:acme&globex"} {
				h.keys(":ops " + f + "<enter>R")
				require.Equal(t, screenList, h.m.active().id(), "R acted on an empty list (%s)", f)
				require.NotContains(t, flat(h.view()), "R reconcile", "R offered on an empty list (%s)", f)
			}
			filter, err := readmodel.ParseFilter("state:stuck tool:../charge-card")
			require.NoError(t, err)
			h.run(h.m.navigate(bulkNav{filter: filter}))
			require.Contains(t, flat(h.view()), "R cannot reconcile this list by lookup", "a dot-segment tool:\n%s", h.view())
			require.Contains(t, flat(h.view()), "Nothing was looked up or decided", "a dot-segment tool:\n%s", h.view())
			filter, err = readmodel.ParseFilter("state:stuck tool:charge-card tenant:acme&globex")
			require.NoError(t, err)
			h.keys("<esc>").run(h.m.navigate(bulkNav{filter: filter}))
			require.Contains(t, flat(h.view()), "No stuck record you may see matches", "tenant:acme&globex:\n%s", h.view())

			h.keys("<esc>:stuck tool:charge-card<enter>R")
			v := flat(h.view())
			require.Contains(t, v, "8 stuck records looked up", "the plan:\n%s", h.view())
			require.NotContains(t, v, "globex", "the plan:\n%s", h.view())
			batch := h.m.bulk().plan.BatchID
			h.keys("<enter>provider outage<enter>5<enter>")
			require.Contains(t, flat(h.view()), "found → completed: 5 decided", "the result:\n%s", h.view())
			h.keys("<enter><enter>provider outage<enter>3<enter>")
			require.Contains(t, flat(h.view()), "not found → not executed: 3 decided", "the result:\n%s", h.view())

			for k, r := range bulkRecords(t, d, batch) {
				if strings.HasPrefix(k, "acme/f") && k != "acme/f-live" && k != "acme/f-ticket" || strings.HasPrefix(k, "acme/n") {
					require.Equal(t, 1, r.BatchAudits, k)
					require.Equal(t, person.Role, r.BatchRole, k)
				}
			}
			after, audits := globexAsItWas(t, d)
			require.Equal(t, globex, after, "globex's record byte for byte")
			require.Zero(t, audits, "no audit record in globex's chain")
		})
	}
}

// TestBulkRealDatabaseConflicted: on a real store, a stuck charge with a
// conflicting attempt nobody reviewed (issue 22 §2, #222) is planned in
// a group of its own with its conflicts shown; accepting the found group
// leaves it stuck, and it is decided only when its own group is accepted
// with its own count.
func TestBulkRealDatabaseConflicted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(ctx, bulkFixtures+`;
UPDATE opsdesk.operations SET conflict_count = 2, last_conflict_at = now() WHERE key = 'f2';
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '2', decode(repeat('ff', 32), 'hex'), fingerprint, 'worker-9'
FROM opsdesk.operations, generate_series(1, 2) WHERE key = 'f2'`)
	require.NoError(t, err)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	h := bulkConsole(t, operator, bulkProvider(t))
	h.keys(":stuck tool:charge-card tenant:acme<enter>R")
	v := flat(h.view())
	require.Contains(t, v, "▸ ✓ found 4 → completed", "the plan:\n%s", h.view())
	require.Contains(t, v, "≠ found, conflicted 1 → completed, with the provider's reference", "the plan:\n%s", h.view())
	require.Contains(t, v, "≠ unreviewed conflicting attempts (2 in all): accept knowingly", "the plan:\n%s", h.view())
	require.Contains(t, v, "≠ 2 conflicting · ref CH-f2", "the plan:\n%s", h.view())
	batch := h.m.bulk().plan.BatchID

	h.keys("<enter>provider outage<enter>4<enter>")
	require.Contains(t, flat(h.view()), "found → completed: 4 decided", "the result:\n%s", h.view())
	require.Equal(t, "stuck", bulkRecords(t, d, batch)["acme/f2"].State)

	// Back to the plan: the conflicted group is next to accept.
	h.keys("<enter>")
	require.Contains(t, flat(h.view()), "▸ ○ not found", "the plan after the first group:\n%s", h.view())
	h.keys("<down><enter>")
	require.Contains(t, flat(h.view()), "Accept the found, conflicted group: 1 record with unreviewed conflicting attempts", h.view())
	h.keys("provider outage; conflicts seen<enter>")
	require.Contains(t, flat(h.view()), "conflicting attempts nobody reviewed (2 in all): the key was reused with another intent", h.view())
	h.keys("1<enter>")
	require.Contains(t, flat(h.view()), "found, conflicted → completed: 1 decided", "the result:\n%s", h.view())
	r := bulkRecords(t, d, batch)["acme/f2"]
	require.Equal(t, "completed", r.State)
	require.Equal(t, "CH-f2", r.Ref)
	require.Equal(t, 1, r.BatchAudits)
}
