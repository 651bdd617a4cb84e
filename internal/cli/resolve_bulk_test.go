package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// outageStore is a store with n charges left stuck by the demo's workers
// around its simulated provider, and the demo's catalog connecting as
// person level (of tenants).
type outageStore struct {
	d        *dbtest.DB
	provider *demo.Provider
	truth    []demo.Abandoned
}

func newOutageStore(t *testing.T, n int) *outageStore {
	t.Helper()
	d := dbtest.New(t)
	p, err := demo.StartProvider(demo.ProviderConfig{Pool: dbtest.New(t).Service})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	truth, err := demo.Outage(t.Context(), demo.OutageConfig{Pool: d.Service, Provider: p, Records: n, Seed: 7,
		Lease: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var live int
		require.NoError(t, d.Admin.QueryRow(t.Context(),
			`SELECT count(*) FROM opsdesk.operations WHERE state = 'pending' AND lease_expires_at > now()`).Scan(&live))
		return live == 0
	}, 10*time.Second, 20*time.Millisecond)
	return &outageStore{d: d, provider: p, truth: truth}
}

// config writes the demo's catalog with a context connecting as p.
func (s *outageStore) config(t *testing.T, p *dbtest.Person) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, demo.WriteCatalog(path, demo.CatalogParams{DSN: p.DSN, ProviderURL: s.provider.URL(), Lease: 200 * time.Millisecond}))
	return path
}

// requireDecidedAsTheLedger requires every stuck charge decided as the
// provider's ledger says (completed with its reference, or released), each
// by one audit record.
func (s *outageStore) requireDecidedAsTheLedger(t *testing.T) {
	t.Helper()
	states := s.states(t)
	for _, a := range s.truth {
		st := states[a.Tenant+"/"+a.Key]
		ref, acted := s.provider.Effect(demo.ProviderIdentity(a.Identity))
		if acted {
			require.Equal(t, [3]string{"completed", ref, "1"}, st, a.Key)
		} else {
			require.Equal(t, [3]string{"released", "", "1"}, st, a.Key)
		}
	}
}

// states reads every record's state and reference, and how many audit
// records name it (inspection as the superuser).
func (s *outageStore) states(t *testing.T) map[string][3]string {
	t.Helper()
	rows, err := s.d.Admin.Query(t.Context(), `
SELECT o.tenant || '/' || o.key, opsdesk.view_state(o), coalesce(o.result_ref, ''),
    (SELECT count(*) FROM opsdesk.audit a WHERE a.operation_id = o.id)::text FROM opsdesk.operations o`)
	require.NoError(t, err)
	out := map[string][3]string{}
	for rows.Next() {
		var k string
		var v [3]string
		require.NoError(t, rows.Scan(&k, &v[0], &v[1], &v[2]))
		out[k] = v
	}
	require.NoError(t, rows.Err())
	return out
}

// Bad input is a usage error, and nothing is read, decided or audited.
func TestResolveByLookupBadInput(t *testing.T) {
	t.Parallel()
	s := newOutageStore(t, 10)
	operator := dbtest.NewPerson(t, s.d, "operator", "*")
	cfg := s.config(t, operator)
	before := s.states(t)
	f := "state:stuck tool:charge-card"
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--filter", f, "--reason", "x", "--yes"}, "add --by-lookup"},
		{[]string{"--filter", "", "--by-lookup", "--reason", "x", "--yes"}, "--filter is empty"},
		{[]string{"--filter", " \t\u3000", "--by-lookup", "--reason", "x", "--yes"}, "--filter is empty"},
		{[]string{"--filter", "bogus", "--by-lookup", "--reason", "x", "--yes"}, "--filter"},
		{[]string{"--filter", "state:stuck", "--by-lookup", "--reason", "x", "--yes"}, "name the tool"},
		{[]string{"--filter", "tool:charge-card", "--by-lookup", "--reason", "x", "--yes"}, "state:stuck"},
		{[]string{"--filter", "state:stuck,completed tool:charge-card", "--by-lookup", "--reason", "x", "--yes"}, "more than stuck records"},
		{[]string{"--filter", "state:stuck tool:create-note", "--by-lookup", "--reason", "x", "--yes"}, "no outcome lookup for tool"},
		{[]string{"--filter", "state:stuck tool:../charge-card", "--by-lookup", "--reason", "x", "--yes"}, "no outcome lookup for tool \"../charge-card\""},
		{[]string{"--filter", f + " id:-1", "--by-lookup", "--reason", "x", "--yes"}, "id needs a record number"},
		{[]string{"--filter", f + "\x00", "--by-lookup", "--reason", "x", "--yes"}, "control character"},
		{[]string{"--filter", f + " key:a\x1b[2J", "--by-lookup", "--reason", "x", "--yes"}, "control character"},
		{[]string{"--filter", f + " key:a\nb", "--by-lookup", "--reason", "x", "--yes"}, "--filter"},
		{[]string{"--filter", f + " tenant:" + strings.Repeat("a", 1<<20), "--by-lookup", "--reason", "x", "--yes"}, "write at most 8192"},
		{[]string{"--filter", f, "--by-lookup", "--yes"}, "--reason is required"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "\t\n\u3000\ufeff", "--yes"}, "white space is no reason"},
		{[]string{"--filter", f, "--by-lookup", "--reason", strings.Repeat("r", 2001), "--yes"}, "at most 2000 bytes"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "outage\x00; DROP", "--yes"}, "without NUL"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "x", "--yes", "--concurrency", "0"}, "--concurrency 0"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "x", "--yes", "--concurrency", "-3"}, "--concurrency -3"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "x", "--yes", "--concurrency", "65"}, "give 1 to 64"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "x", "--yes", "--concurrency", "99999999999"}, "concurrency"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "x", "--yes", "--accept", "no-answer"}, "found, not-found, found-conflicted or not-found-conflicted"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "x", "--yes", "-o", "yaml"}, "table, json"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "x", "--yes", "--as", "completed"}, "--as decides one record"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "x", "--yes", "--force"}, "--force decides one record"},
		{[]string{"--filter", f, "--by-lookup", "--reason", "x", "--yes", "42"}, "give no ID"},
		{[]string{"42", "--as", "failed", "--reason", "x", "--yes"}, "--yes goes with --filter"},
		{[]string{"42", "--as", "failed", "--reason", "x", "--by-lookup"}, "--by-lookup goes with --filter"},
		// Standard input is no terminal here: no --yes, no decision.
		{[]string{"--filter", f, "--by-lookup", "--reason", "x"}, "pass --yes"},
	} {
		code, _, errOut := run(append(append([]string{"resolve"}, c.args...), "--config", cfg)...)
		require.Equal(t, ExitUsage, code, "%q: %s", c.args, errOut)
		require.Contains(t, errOut, c.says, "%q", c.args)
		require.False(t, strings.ContainsAny(errOut, "\x00\x1b"), "%q: printed raw: %q", c.args, errOut)
	}
	require.Equal(t, before, s.states(t))
}

// On the demo's provider, every stuck charge is decided as the provider's
// ledger says, each with its own audit record carrying the batch id; the
// JSON output says so record by record.
func TestResolveByLookupOnTheDemoProvider(t *testing.T) {
	t.Parallel()
	s := newOutageStore(t, 60)
	operator := dbtest.NewPerson(t, s.d, "operator", "*")
	cfg := s.config(t, operator)

	// acme first, as JSON, then the rest as text.
	code, out, errOut := run("resolve", "--filter", "state:stuck tool:charge-card tenant:acme", "--by-lookup",
		"--reason", "provider outage: reconciled by lookup", "--yes", "-o", "json", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, errOut, "looking up")
	var rep bulkReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotEmpty(t, rep.BatchID)
	require.Len(t, rep.Groups, 4)
	require.Contains(t, out, `"lookup_seconds": `, "durations in seconds, as every -o json")
	require.NotContains(t, out, "_ms\"")
	acme := 0
	for _, a := range s.truth {
		if a.Tenant == "acme" {
			acme++
		}
	}
	require.Equal(t, acme, rep.Listed)
	for _, g := range rep.Groups {
		require.Equal(t, g.Count, len(g.Records))
		if g.Proposal == "" {
			require.Zero(t, g.Count, g.Verdict)
			continue
		}
		require.True(t, g.Accepted)
		require.Equal(t, g.Count, g.Counts[bulk.Decided])
		for _, r := range g.Records {
			require.Equal(t, "acme", r.Tenant)
			require.Equal(t, bulk.Decided, r.Outcome)
			require.Regexp(t, `^acme#\d+$`, r.Audit)
		}
	}

	code, out, errOut = run("resolve", "--filter", "state:stuck tool:charge-card", "--by-lookup",
		"--reason", "provider outage: reconciled by lookup", "--yes", "--concurrency", "3", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Regexp(t, `batch [0-9a-f-]{36}: \d+ stuck records match state:stuck tool:charge-card`, out)
	require.Regexp(t, `found\s+\d+\s+→ completed, with the provider's reference`, out)
	require.Regexp(t, `e\.g\. \d+ \w+/charge-card/outage-\d+:charge \(version 1\): HTTP 200 from 127\.0\.0\.1:\d+ in \S+: found, reference CH-\d+`, out)
	require.Regexp(t, `found → completed: \d+ decided in`, out)
	require.Regexp(t, `not found → not-executed: \d+ decided in`, out)
	require.Contains(t, out, "their audit records carry details.batch = ")

	s.requireDecidedAsTheLedger(t)
	var batches int
	require.NoError(t, s.d.Admin.QueryRow(t.Context(), `SELECT count(DISTINCT details->>'batch') FROM opsdesk.audit`).Scan(&batches))
	require.Equal(t, 2, batches, "one batch id per run")

	// Nothing is left: a third run says so and decides nothing.
	code, out, errOut = run("resolve", "--filter", "state:stuck tool:charge-card", "--by-lookup", "--reason", "again", "--yes", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "no stuck records you see match")
}

// A viewer's run is refused at its first decision, audited as any
// viewer's refusal, and the command fails saying so.
func TestResolveByLookupAsViewer(t *testing.T) {
	t.Parallel()
	s := newOutageStore(t, 12)
	viewer := dbtest.NewPerson(t, s.d, "viewer", "*")
	before := s.states(t)
	code, out, errOut := run("resolve", "--filter", "state:stuck tool:charge-card", "--by-lookup", "--reason", "x", "--yes",
		"--concurrency", "1", "--config", s.config(t, viewer))
	require.Equal(t, ExitFailure, code, out)
	// The run cannot start (opsdesk.start_batch refuses a viewer): nothing
	// is looked up, decided or audited.
	require.Contains(t, errOut, "may not start a run: deciding needs opsdesk_operator or opsdesk_reconciler")
	require.Contains(t, out, "the run did not start: nothing was looked up or decided")
	var n int
	require.NoError(t, s.d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit WHERE role = $1`, viewer.Role).Scan(&n))
	require.Zero(t, n)
	for k, st := range s.states(t) {
		was := before[k]
		require.Equal(t, was[:2], st[:2], "%s is unchanged", k)
	}
}

// On a terminal each group is confirmed by typing its number of records;
// any other answer leaves it undecided.
func TestResolveByLookupAsksForTheCount(t *testing.T) {
	t.Parallel()
	s := newOutageStore(t, 20)
	operator := dbtest.NewPerson(t, s.d, "operator", "*")
	// A client of its own, whose spare connections go before the
	// provider closes (it waits for them).
	client := bulk.HTTPClient(4)
	t.Cleanup(client.CloseIdleConnections)
	desk := &desk.Desk{Pool: operator.Pool, Client: client, Tools: map[string]reconcile.Tool{demo.ToolChargeCard: {
		Lookup: &reconcile.LookupSpec{URL: s.provider.URL() + demo.LookupPath, ResultRef: "/ref"}}}}
	w := &writer{pool: operator.Pool, view: storeview.New(operator.Pool, storeview.Config{}), desk: desk}
	f, err := readmodel.ParseFilter("state:stuck tool:charge-card")
	require.NoError(t, err)
	acted := 0
	for _, a := range s.truth {
		if _, ok := s.provider.Effect(demo.ProviderIdentity(a.Identity)); ok {
			acted++
		}
	}
	require.Positive(t, acted)

	var out, errOut bytes.Buffer
	// The found group's count typed with spaces around it, after a
	// terminal's late answers to a colour query and a cursor position
	// report; "all" for the not found group, which is no count.
	in := bufio.NewReader(strings.NewReader("\x1b]11;rgb:0000/0000/0000\x1b\\\x1b[24;1R " + itoa(int64(acted)) + " \nall\n"))
	err = runBulkResolve(t.Context(), w, bulkRun{opts: bulkOptions{Concurrency: 4, Reason: "outage", Output: "table"}, filter: f,
		groups: []bulk.Verdict{bulk.Found, bulk.NotFound}, in: in, prompt: true, out: &out, errOut: &errOut})
	require.NoError(t, err)
	require.Contains(t, errOut.String(), "type "+itoa(int64(acted))+" to confirm")
	require.Contains(t, out.String(), "found → completed: "+itoa(int64(acted))+" decided")
	require.Contains(t, out.String(), "not found: not confirmed, nothing decided")
	released, stuck := 0, 0
	for _, st := range s.states(t) {
		switch st[0] {
		case "released":
			released++
		case "stuck":
			stuck++
		}
	}
	require.Zero(t, released)
	require.Equal(t, len(s.truth)-acted, stuck)
}

// A provider answering found with a hostile reference (32 MiB, NUL, ESC,
// a terminal escape) to a one-tenant operator's run: every record is
// grouped as error and left stuck without an audit record, the output
// (text and JSON) never carries the reference's control bytes, and the
// other tenant's record is neither asked about nor touched. Filters naming
// the other tenant with &, or a tenant as long as a filter may be, list
// nothing.
func TestResolveByLookupHostileProvider(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT t, 'charge-card', k, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM (VALUES ('acme', 'giant'), ('acme', 'nul'), ('acme', 'esc'), ('acme', 'osc'), ('globex', 'esc')) v(t, k)`)
	require.NoError(t, err)
	refs := map[string]string{"nul": `CH-\u00001`, "esc": `CH-\u001b[2J\u001b[31mPAID`, "osc": `\u001b]52;c;cm0gLXJmIH4=\u0007`}
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		key := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		ref, ok := refs[key]
		if !ok {
			ref = strings.Repeat(`C\u0000\u001b`, 32<<20/13+1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"found": true, "ref": "` + ref + `"}`))
	}))
	t.Cleanup(srv.Close)
	operator := dbtest.NewPerson(t, d, "operator", "acme")
	client := bulk.HTTPClient(1)
	t.Cleanup(client.CloseIdleConnections)
	desk := &desk.Desk{Pool: operator.Pool, Client: client, Tools: map[string]reconcile.Tool{demo.ToolChargeCard: {
		Lookup: &reconcile.LookupSpec{URL: srv.URL + "/lookup/{tenant}/{tool}/{key}", ResultRef: "/ref", Timeout: 5 * time.Second}}}}
	w := &writer{pool: operator.Pool, view: storeview.New(operator.Pool, storeview.Config{}), desk: desk}
	states := func() string {
		var s string
		require.NoError(t, d.Admin.QueryRow(t.Context(), `
SELECT string_agg(o::text, E'\n' ORDER BY id) || (SELECT count(*) FROM opsdesk.audit)::text FROM opsdesk.operations o`).Scan(&s))
		return s
	}
	before := states()

	for _, filter := range []string{"state:stuck tool:charge-card tenant:acme&globex", "state:stuck tool:charge-card tenant:globex&",
		"state:stuck tool:charge-card tenant:" + strings.Repeat("a", readmodel.MaxFilterBytes-len("state:stuck tool:charge-card tenant:"))} {
		f, err := readmodel.ParseFilter(filter)
		require.NoError(t, err)
		var out, errOut bytes.Buffer
		err = runBulkResolve(t.Context(), w, bulkRun{opts: bulkOptions{Concurrency: 1, Reason: "outage", Yes: true, Output: "table"},
			filter: f, groups: []bulk.Verdict{bulk.Found, bulk.NotFound}, out: &out, errOut: &errOut})
		require.NoError(t, err)
		require.Contains(t, out.String(), "no stuck records you see match")
	}
	require.Empty(t, asked)

	f, err := readmodel.ParseFilter("state:stuck tool:charge-card")
	require.NoError(t, err)
	for _, output := range []string{"table", "json"} {
		asked = nil
		var out, errOut bytes.Buffer
		err = runBulkResolve(t.Context(), w, bulkRun{opts: bulkOptions{Concurrency: 1, Reason: "outage", Yes: true, Output: output},
			filter: f, groups: []bulk.Verdict{bulk.Found, bulk.NotFound}, out: &out, errOut: &errOut})
		require.NoError(t, err, output)
		require.Len(t, asked, 4, output)
		for _, path := range asked {
			require.Contains(t, path, "/acme/", "only acme's records are asked about")
		}
		require.False(t, strings.ContainsAny(out.String()+errOut.String(), "\x00\x07\x1b"), "%s: printed raw:\n%s", output, out.String())
		require.Less(t, out.Len(), 64<<10, output)
		if output == "table" {
			require.Contains(t, out.String(), "error          4", out.String())
			require.Contains(t, out.String(), "4 records without definite evidence are left stuck", out.String())
			continue
		}
		var rep bulkReport
		require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
		for _, g := range rep.Groups {
			require.Equal(t, map[bulk.Verdict]int{bulk.Error: 4}[g.Verdict], g.Count, g.Verdict)
			require.False(t, g.Accepted && g.Count > 0, g.Verdict)
		}
	}
	require.Equal(t, before, states(), "nothing decided or audited, in acme or globex")
}

// Records with conflicting attempts nobody reviewed are planned in groups
// of their own (issue 22 §2): the default --accept leaves them stuck and
// says how to accept them; naming the group accepts it, and the prompt
// and the JSON give the conflicts.
func TestResolveByLookupConflictedGroup(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at, conflict_count)
SELECT 'acme', 'charge-card', k, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute', n
FROM (VALUES ('f-clean', 0), ('f-conflict', 2), ('n-conflict', 1)) v(k, n);
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT o.tenant, o.tool, o.key, o.id, '2', decode(repeat('ff', 32), 'hex'), o.fingerprint, 'worker-9'
FROM opsdesk.operations o, generate_series(1, o.conflict_count)`)
	require.NoError(t, err)
	w := lookupWriter(t, dbtest.NewPerson(t, d, "operator", "acme"), "")
	f, err := readmodel.ParseFilter("state:stuck tool:charge-card")
	require.NoError(t, err)
	state := func(key string) string {
		var s string
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT opsdesk.view_state(o) FROM opsdesk.operations o WHERE key = $1`, key).Scan(&s))
		return s
	}

	t.Run("DefaultLeavesThem", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := runBulkResolve(t.Context(), w, bulkRun{opts: bulkOptions{Concurrency: 1, Reason: "outage", Yes: true, Output: "table"},
			filter: f, groups: []bulk.Verdict{bulk.Found, bulk.NotFound}, out: &out, errOut: &errOut})
		require.NoError(t, err)
		text := out.String()
		require.Contains(t, text, "found, conflicted      1  → completed, with the provider's reference", text)
		require.Contains(t, text, "≠ each has conflicting attempts nobody reviewed (2 conflicting attempts in all); accepted only by --accept found-conflicted")
		require.Contains(t, text, "1 found record with conflicting attempts nobody reviewed is left stuck: review them (opsdesk conflicts list), "+
			"or accept them knowingly with --accept found-conflicted")
		require.Contains(t, text, "--accept not-found-conflicted")
		require.Contains(t, text, "found → completed: 1 decided")
		require.Equal(t, "completed", state("f-clean"))
		require.Equal(t, "stuck", state("f-conflict"))
		require.Equal(t, "stuck", state("n-conflict"))
	})
	t.Run("NamedAndTyped", func(t *testing.T) {
		var out, errOut bytes.Buffer
		in := bufio.NewReader(strings.NewReader("1\n"))
		err := runBulkResolve(t.Context(), w, bulkRun{opts: bulkOptions{Concurrency: 1, Reason: "outage, conflicts seen", Output: "json"},
			filter: f, groups: []bulk.Verdict{bulk.FoundConflicted}, in: in, prompt: true, out: &out, errOut: &errOut})
		require.NoError(t, err)
		require.Contains(t, errOut.String(), "decide the 1 found record with 2 conflicting attempts nobody reviewed as completed? type 1 to confirm")
		var rep bulkReport
		require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
		var verdicts []bulk.Verdict
		for _, g := range rep.Groups {
			verdicts = append(verdicts, g.Verdict)
			if g.Verdict != bulk.FoundConflicted {
				require.False(t, g.Accepted, g.Verdict)
				continue
			}
			require.True(t, g.Accepted)
			require.Equal(t, [3]int{1, 1, 2}, [3]int{g.Count, g.Conflicted, g.ConflictCount})
			require.Equal(t, 1, g.Counts[bulk.Decided])
			require.True(t, g.Records[0].Conflicted)
			require.Equal(t, bulk.FoundConflicted, g.Records[0].Verdict)
		}
		require.Equal(t, []bulk.Verdict{bulk.Found, bulk.NotFound, bulk.FoundConflicted, bulk.NotFoundConflicted, bulk.NoAnswer, bulk.Error}, verdicts)
		require.Equal(t, "completed", state("f-conflict"))
		require.Equal(t, "stuck", state("n-conflict"))
	})
}

// lookupWriter is person p's writer for resolve --by-lookup, charge-card's
// lookup asking a provider that has every key starting with f (reference
// CH-key) and none of the others.
func lookupWriter(t *testing.T, p *dbtest.Person, displayName string) *writer {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		w.Header().Set("Content-Type", "application/json")
		if !strings.HasPrefix(key, "f") {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"found": false}`))
			return
		}
		_, _ = w.Write([]byte(`{"found": true, "ref": "CH-` + key + `"}`))
	}))
	t.Cleanup(srv.Close)
	client := bulk.HTTPClient(1)
	t.Cleanup(client.CloseIdleConnections)
	dk := &desk.Desk{Pool: p.Pool, DisplayName: displayName, Client: client, Tools: map[string]reconcile.Tool{demo.ToolChargeCard: {
		Lookup: &reconcile.LookupSpec{URL: srv.URL + "/lookup/{tenant}/{tool}/{key}", ResultRef: "/ref", Timeout: 5 * time.Second}}}}
	return &writer{pool: p.Pool, view: storeview.New(p.Pool, storeview.Config{}), desk: dk}
}
