package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// personConfig writes a config whose context connects as p, with extra
// context settings, and returns its path.
func personConfig(t *testing.T, p *dbtest.Person, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	content := "contexts:\n  test:\n    dsn: " + strconv.Quote(p.DSN) + "\n" + extra +
		"tools:\n  create-ticket:\n    effect: local\n    retention: 48h\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// idOf is a fixture's id, read as the superuser (inspection only).
func idOf(t *testing.T, d *dbtest.DB, key string) string {
	t.Helper()
	var id int64
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT id FROM opsdesk.operations WHERE key = $1`, key).Scan(&id))
	return strconv.FormatInt(id, 10)
}

func auditCount(t *testing.T, d *dbtest.DB) int {
	t.Helper()
	var n int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit`).Scan(&n))
	return n
}

func TestResolve(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	cfg := personConfig(t, operator, "    display_name: Alice Example\n")
	stuck, live := idOf(t, d, "run-42:create-ticket"), idOf(t, d, "ord-1")

	t.Run("BadInputIsAUsageErrorAndNotAudited", func(t *testing.T) {
		for _, args := range [][]string{
			{"resolve", stuck, "--reason", "x"},
			{"resolve", stuck, "--as", "done", "--reason", "x"},
			{"resolve", stuck, "--as", "not-executed"},
			{"resolve", stuck, "--as", "completed", "--reason", "x"},
			{"resolve", stuck, "--as", "defer", "--reason", "x"},
			{"resolve", stuck, "--as", "failed", "--reason", "x", "--result", "{not json"},
			{"resolve", "forty-two", "--as", "failed", "--reason", "x"},
		} {
			code, _, errOut := run(append(args, "--config", cfg)...)
			require.Equal(t, ExitUsage, code, "%v: %s", args, errOut)
		}
		require.Zero(t, auditCount(t, d))
	})

	t.Run("LiveLeaseIsRefusedAndAudited", func(t *testing.T) {
		code, _, errOut := run("resolve", live, "--as", "not-executed", "--reason", "looks dead", "--config", cfg)
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, "denied not-executed on "+live)
		require.Contains(t, errOut, "deciding needs force")
		require.Contains(t, errOut, "audit record acme#1")
	})

	t.Run("StaleVersionIsRefused", func(t *testing.T) {
		code, _, errOut := run("resolve", stuck, "--as", "not-executed", "--reason", "checked", "--expect-version", "7", "--config", cfg)
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, "changed since you looked: now version 1 (stuck), you saw version 7")
	})

	t.Run("Decides", func(t *testing.T) {
		code, out, errOut := run("resolve", stuck, "--as", "completed", "--result-ref", "T-981", "--reason", "ticket exists",
			"--evidence", "search for run-42 found T-981", "--expect-version", "1", "--config", cfg, "-o", "json")
		require.Equal(t, ExitOK, code, errOut)
		var res map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.Equal(t, "succeeded", res["outcome"])
		require.Equal(t, "completed", res["state"])
		require.EqualValues(t, 2, res["version"])
		var role, name, summary, digest string
		var retained bool
		require.NoError(t, d.Admin.QueryRow(t.Context(), `
SELECT a.role, a.display_name, a.evidence_summary, a.evidence_digest,
    o.expires_at BETWEEN now() + interval '47 hours' AND now() + interval '49 hours'
FROM opsdesk.audit a JOIN opsdesk.operations o ON o.id = a.operation_id
WHERE a.tenant = 'acme' AND a.seq = $1`, res["audit_seq"]).Scan(&role, &name, &summary, &digest, &retained))
		require.Equal(t, operator.Role, role)
		require.Equal(t, "Alice Example", name)
		require.Equal(t, "search for run-42 found T-981", summary)
		require.Regexp(t, `^sha256:[0-9a-f]{64}$`, digest)
		require.True(t, retained, "the tool's retention from the catalog")

		// The record says who decided, when and why.
		code, out, errOut = run("ops", "show", stuck, "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		require.Regexp(t, `decisions +completed T-981 by `+operator.Role+` \(says Alice Example\) .*: ticket exists \(audit #\d+\)`, out)
		require.Contains(t, out, "hidden: opsdesk ops reveal "+stuck+" --reason TEXT shows it (audited)")

		// Nothing left to decide.
		code, _, errOut = run("resolve", stuck, "--as", "failed", "--reason", "again", "--config", cfg)
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, "the record is completed, not pending")
	})

	t.Run("RevealIsAudited", func(t *testing.T) {
		code, out, errOut := run("ops", "reveal", stuck, "--reason", "customer asks", "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		require.Equal(t, "null\n", out) // confirmed without a result
		code, _, _ = run("ops", "reveal", stuck, "--config", cfg)
		require.Equal(t, ExitUsage, code)
		code, _, _ = run("ops", "reveal", stuck, "--field", "fingerprint", "--reason", "x", "--config", cfg)
		require.Equal(t, ExitUsage, code)
		// Fixtures written by hand store no intent; the library's do.
		code, _, errOut = run("ops", "reveal", stuck, "--field", "intent", "--reason", "which ticket", "--config", cfg)
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, "the record has no stored intent")
	})

	t.Run("ReadOnlyContextWritesNothing", func(t *testing.T) {
		ro := personConfig(t, operator, "    read_only: true\n")
		before := auditCount(t, d)
		code, _, errOut := run("resolve", live, "--as", "defer", "--snooze", "1h", "--reason", "later", "--config", ro)
		require.Equal(t, ExitUsage, code)
		require.Contains(t, errOut, "read-only")
		require.Equal(t, before, auditCount(t, d))
	})
}

func TestViewerCannotResolve(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	cfg := personConfig(t, viewer, "")
	code, _, errOut := run("resolve", idOf(t, d, "run-42:create-ticket"), "--as", "not-executed", "--reason", "x", "--config", cfg)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "is not granted opsdesk_operator")
	code, _, errOut = run("ops", "reveal", idOf(t, d, "mail-1"), "--reason", "x", "--config", cfg)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "may not reveal")
	// Both attempts are on record.
	require.Equal(t, 2, auditCount(t, d))
}

func TestConflictsAckAndAccessGrant(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	cfg := personConfig(t, admin, "")
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '1', decode(repeat('ee', 32), 'hex'), fingerprint, 'worker-9'
FROM opsdesk.operations WHERE key = 'mail-1'`)
	require.NoError(t, err)
	mail := idOf(t, d, "mail-1")

	code, _, _ := run("conflicts", "ack", mail, "--config", cfg)
	require.Equal(t, ExitUsage, code)
	code, out, errOut := run("conflicts", "ack", mail, "--reason", "caller bug, fixed", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "decided: conflicts acknowledged on "+mail)
	code, _, errOut = run("conflicts", "ack", mail, "--reason", "again", "--config", cfg)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "no unreviewed conflicts")

	newcomer := dbtest.NewPerson(t, d, "")
	code, _, _ = run("access", "grant", newcomer.Role, "--as", "root", "--reason", "x", "--config", cfg)
	require.Equal(t, ExitUsage, code)
	code, out, errOut = run("access", "grant", newcomer.Role, "--as", "viewer", "--tenant", "globex", "--reason", "joins", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "is viewer of globex")
	code, out, errOut = run("ops", "list", "-o", "json", "--config", personConfig(t, newcomer, ""))
	require.Equal(t, ExitOK, code, errOut)
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &items))
	require.Len(t, items, 1, "a globex viewer sees globex only")
	require.Equal(t, "globex", items[0]["tenant"])

	code, _, errOut = run("access", "revoke", newcomer.Role, "--reason", "left", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	// Granting is for admins only.
	code, _, errOut = run("access", "grant", admin.Role, "--as", "viewer", "--reason", "x", "--config", personConfig(t, newcomer, ""))
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "permission denied")
}

func TestResolveRunsTheToolsLookup(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tickets/acme/run-42:create-ticket" {
			fmt.Fprint(w, `{"ticket": {"id": "T-77"}}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer provider.Close()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("contexts:\n  test:\n    dsn: "+strconv.Quote(operator.DSN)+"\n"+
		"tools:\n  create-ticket:\n    effect: external_unknown\n    lookup:\n"+
		"      url: "+strconv.Quote(provider.URL+"/tickets/{tenant}/{key}")+"\n      result_ref: /ticket/id\n"), 0o600))
	stuck := idOf(t, d, "run-42:create-ticket")

	// The provider has the ticket: releasing it contradicts the lookup.
	code, _, errOut := run("resolve", stuck, "--as", "not-executed", "--reason", "worker says no", "--config", cfg)
	require.Equal(t, ExitFailure, code)
	require.Regexp(t, `lookup: HTTP 200 from 127\.0\.0\.1:\d+ in \S+: found, reference T-77`, errOut)
	require.Contains(t, errOut, "the lookup says found, which contradicts not-executed: deciding needs override")

	// Confirming takes the lookup's reference.
	code, out, errOut := run("resolve", stuck, "--as", "completed", "--reason", "the provider has it", "--evidence", "also in the UI", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "now completed")
	var ref, summary string
	var lookup *string
	require.NoError(t, d.Admin.QueryRow(t.Context(), `
SELECT o.result_ref, a.evidence_summary, a.details->>'lookup' FROM opsdesk.operations o
JOIN opsdesk.audit a ON a.operation_id = o.id AND a.outcome = 'succeeded' WHERE o.id = $1`, stuck).Scan(&ref, &summary, &lookup))
	require.Equal(t, "T-77", ref)
	require.Regexp(t, `^lookup: HTTP 200 .*: found, reference T-77; noted: also in the UI$`, summary)
	require.Equal(t, "found", *lookup)
}
