package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// batchesPage is what the tests read of audit batches -o json.
type batchesPage struct {
	Batches []struct {
		ID         string                 `json:"id"`
		Tenants    []string               `json:"tenants"`
		Operations int                    `json:"operations"`
		Span       float64                `json:"span_seconds"`
		Groups     []readmodel.BatchGroup `json:"groups"`
	} `json:"batches"`
	Next string `json:"next"`
}

var nextBatches = regexp.MustCompile(`^opsdesk: more runs match; next page: --after (b2\.\S+)\n$`)

// Two bulk runs by resolve --by-lookup (acme and globex, then acme
// alone), listed by audit batches newest first, in text and JSON by the
// repository's conventions, a page at a time, and as a one-tenant viewer
// sees them; bad flags are usage errors before the database.
func TestAuditBatches(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT t, 'charge-card', k, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM (VALUES ('acme', 'f1'), ('acme', 'f2'), ('acme', 'n1'), ('globex', 'f3'), ('globex', 'n2')) v(t, k)`)
	require.NoError(t, err)
	w := lookupWriter(t, dbtest.NewPerson(t, d, "operator", "*"), "Night Shift")
	batch := func(filter string) string {
		t.Helper()
		f, err := readmodel.ParseFilter(filter)
		require.NoError(t, err)
		var out, errOut bytes.Buffer
		require.NoError(t, runBulkResolve(t.Context(), w, bulkRun{opts: bulkOptions{Concurrency: 1, Reason: "outage", Yes: true, Output: "json"},
			filter: f, groups: []bulk.Verdict{bulk.Found, bulk.NotFound}, out: &out, errOut: &errOut}))
		var rep bulkReport
		require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
		return rep.BatchID
	}
	first := batch("state:stuck tool:charge-card key:f1,n1,f3,n2")
	second := batch("state:stuck tool:charge-card key:f2")
	cfg := personConfig(t, dbtest.NewPerson(t, d, "viewer", "*"), "")

	t.Run("BadInput", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			says string
		}{
			{[]string{"--after", "bogus"}, "not one that audit batches printed"},
			{[]string{"--after", "a1.MTc2"}, "not one that audit batches printed"},
			{[]string{"--after", "b1.\x1b[2J\x00"}, "not one that audit batches printed"},
			{[]string{"--after", "b1.MTc2NDY4NjU3NDAwMDAwMC4wYjdlNmMxYS0zZjJkLTRjNWUtOWE4Yi0xYzJkM2U0ZjVhNmI"}, "not one that audit batches printed"},
			{[]string{"--after", "b1." + strings.Repeat("A", 1<<16)}, "not one that audit batches printed"},
			{[]string{"--limit", "0"}, "--limit 0"},
			{[]string{"--limit", "1001"}, "1 to 1000"},
			{[]string{"-o", "yaml"}, "table, json"},
			{[]string{"tenant:acme"}, "accepts 0 arg"},
		} {
			code, _, errOut := run(append([]string{"audit", "batches", "--config", cfg}, c.args...)...)
			require.Equal(t, ExitUsage, code, "%q: %s", c.args, errOut)
			require.Contains(t, errOut, c.says, "%q", c.args)
			require.False(t, strings.ContainsAny(errOut, "\x00\x1b"), "%q: printed raw: %q", c.args, errOut)
			require.Less(t, len(errOut), 4096, "%q", c.args)
		}
	})

	t.Run("Text", func(t *testing.T) {
		code, out, errOut := run("audit", "batches", "--config", cfg)
		require.Equal(t, 0, code, errOut)
		require.Less(t, strings.Index(out, "batch "+second), strings.Index(out, "batch "+first), "newest first:\n%s", out)
		require.Contains(t, out, "(Night Shift)")
		require.Contains(t, out, "4 records of charge-card in acme, globex")
		require.Contains(t, out, "filter   state:stuck tool:charge-card key:f1,n1,f3,n2\n")
		require.Contains(t, out, "filter   state:stuck tool:charge-card key:f2\n")
		require.Regexp(t, `batch `+second+`  started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC by \S+ \(Night Shift\)\n`, out)
		require.Regexp(t, `found → completed\s+2 decided\n\s+not found → not-executed\s+2 decided\n\s+records: opsdesk audit list batch:`+first, out)
		require.Contains(t, out, "opsdesk audit list batch:"+second)
		require.Empty(t, errOut)
	})

	t.Run("JSON", func(t *testing.T) {
		code, out, errOut := run("audit", "batches", "-o", "json", "--config", cfg)
		require.Equal(t, 0, code, errOut)
		var raw map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &raw))
		require.Equal(t, "", raw["next"])
		require.NotNil(t, raw["db_time"])
		batches := raw["batches"].([]any)
		require.Len(t, batches, 2)
		b := batches[0].(map[string]any)
		require.Equal(t, second, b["id"])
		require.Equal(t, "state:stuck tool:charge-card key:f2", b["filter"])
		require.Equal(t, "Night Shift", b["started_by_name"])
		require.NotEmpty(t, b["started_by"])
		require.NotEmpty(t, b["started_at"])
		require.NotNil(t, b["first_at"])
		require.IsType(t, float64(0), b["span_seconds"])
		require.Equal(t, []any{}, b["display_names"].([]any)[:0])
		require.Equal(t, []any{map[string]any{"lookup": "found", "decision": "completed", "decided": float64(1), "skipped": float64(0),
			"failed": float64(0)}}, b["groups"])
	})

	t.Run("Pages", func(t *testing.T) {
		code, out, errOut := run("audit", "batches", "--limit", "1", "--config", cfg)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, second)
		m := nextBatches.FindStringSubmatch(errOut)
		require.NotNil(t, m, errOut)
		code, out, errOut = run("audit", "batches", "--limit", "1", "--after", m[1], "-o", "json", "--config", cfg)
		require.Equal(t, 0, code, errOut)
		var page batchesPage
		require.NoError(t, json.Unmarshal([]byte(out), &page))
		require.Len(t, page.Batches, 1)
		require.Equal(t, first, page.Batches[0].ID)
		require.Empty(t, page.Next)
	})

	t.Run("OneTenantViewer", func(t *testing.T) {
		code, out, errOut := run("audit", "batches", "-o", "json", "--config", personConfig(t, dbtest.NewPerson(t, d, "viewer", "globex"), ""))
		require.Equal(t, 0, code, errOut)
		var page batchesPage
		require.NoError(t, json.Unmarshal([]byte(out), &page))
		require.Len(t, page.Batches, 1, "globex had no part in the second run")
		b := page.Batches[0]
		require.Equal(t, first, b.ID)
		require.Equal(t, []string{"globex"}, b.Tenants)
		require.Equal(t, 2, b.Operations)
		require.Equal(t, []readmodel.BatchGroup{{Lookup: "found", Decision: "completed", Decided: 1},
			{Lookup: "not_found", Decision: "not-executed", Decided: 1}}, b.Groups)

		code, out, errOut = run("audit", "batches", "--config", personConfig(t, dbtest.NewPerson(t, d, "viewer", "initech"), ""))
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "(no bulk runs you may see)")
	})

	t.Run("RunFromBeforeRunsWereRecorded", func(t *testing.T) {
		// As the migration's backfill leaves a run from before it.
		_, err := d.Admin.Exec(t.Context(), `UPDATE opsdesk.batches SET filter = NULL WHERE id = $1`, first)
		require.NoError(t, err)
		code, out, errOut := run("audit", "batches", "-o", "json", "--config", cfg)
		require.Equal(t, 0, code, errOut)
		var raw struct {
			Batches []map[string]any `json:"batches"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &raw))
		require.Len(t, raw.Batches, 2)
		require.Contains(t, raw.Batches[1], "filter")
		require.Nil(t, raw.Batches[1]["filter"], "not recorded: null")
		code, out, errOut = run("audit", "batches", "--config", cfg)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "filter   "+readmodel.BatchFilterNotRecorded+"\n")
	})

	t.Run("EmptyRun", func(t *testing.T) {
		// A run that decided nothing: its times are null, its lists [].
		starter := dbtest.NewPerson(t, d, "operator", "acme")
		var id string
		require.NoError(t, starter.Pool.QueryRow(t.Context(), `SELECT opsdesk.start_batch('state:stuck tool:charge-card tenant:acme')::text`).Scan(&id))
		code, out, errOut := run("audit", "batches", "-o", "json", "--limit", "1", "--config", personConfig(t, starter, ""))
		require.Equal(t, 0, code, errOut)
		var raw struct {
			Batches []map[string]any `json:"batches"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &raw))
		require.Len(t, raw.Batches, 1)
		b := raw.Batches[0]
		require.Equal(t, id, b["id"])
		require.Nil(t, b["first_at"])
		require.Nil(t, b["last_at"])
		require.Nil(t, b["started_by_name"])
		for _, k := range []string{"roles", "display_names", "tenants", "tools", "groups"} {
			require.Equal(t, []any{}, b[k], k)
		}
		code, out, errOut = run("audit", "batches", "--limit", "1", "--config", personConfig(t, starter, ""))
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "  decided  nothing you may see\n")
	})
}
