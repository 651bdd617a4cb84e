package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
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
		code, _, errOut := run("resolve", live, "--as", "not-executed", "--reason", "looks dead", "--no-lookup", "--config", cfg)
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, "denied not-executed on "+live)
		require.Contains(t, errOut, "deciding needs force")
		require.Contains(t, errOut, "audit record acme#1")
	})

	t.Run("StaleVersionIsRefused", func(t *testing.T) {
		code, _, errOut := run("resolve", stuck, "--as", "not-executed", "--reason", "checked", "--expect-version", "7", "--no-lookup", "--config", cfg)
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, "changed since you looked: now version 1 (stuck), you saw version 7")
	})

	t.Run("Decides", func(t *testing.T) {
		code, out, errOut := run("resolve", stuck, "--as", "completed", "--result-ref", "T-981", "--reason", "ticket exists",
			"--evidence", "search for run-42 found T-981", "--expect-version", "1", "--no-lookup", "--config", cfg, "-o", "json")
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
		require.Equal(t, "no evidence gathered: the catalog has no lookup for create-ticket; noted: search for run-42 found T-981", summary)
		require.Regexp(t, `^sha256:[0-9a-f]{64}$`, digest)
		require.True(t, retained, "the tool's retention from the catalog")

		// The record says who decided, when and why.
		code, out, errOut = run("ops", "show", stuck, "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		require.Regexp(t, `decisions +completed T-981 by `+operator.Role+` \(says Alice Example\) .*: ticket exists \(audit #\d+\)`, out)
		require.Contains(t, out, "hidden: opsdesk ops reveal "+stuck+" --reason TEXT shows it (audited)")

		// Nothing left to decide.
		code, _, errOut = run("resolve", stuck, "--as", "failed", "--reason", "again", "--no-lookup", "--config", cfg)
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

		// -o json: the value, its sealing and the audit record in one object.
		code, out, errOut = run("ops", "reveal", stuck, "--reason", "customer asks", "--config", cfg, "-o", "json")
		require.Equal(t, ExitOK, code, errOut)
		var doc struct {
			ID        json.Number     `json:"id"`
			Field     string          `json:"field"`
			Value     json.RawMessage `json:"value"`
			Encrypted bool            `json:"encrypted"`
			KeyID     *string         `json:"key_id"`
			Decrypted bool            `json:"decrypted"`
			Audit     map[string]any  `json:"audit"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		require.Equal(t, stuck, doc.ID.String())
		require.Equal(t, "result", doc.Field)
		require.JSONEq(t, "null", string(doc.Value))
		require.False(t, doc.Encrypted)
		require.Nil(t, doc.KeyID)
		require.Equal(t, "succeeded", doc.Audit["outcome"])
		var action string
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT action FROM opsdesk.audit WHERE tenant = 'acme' AND seq = $1`,
			doc.Audit["audit_seq"]).Scan(&action))
		require.Equal(t, "reveal:result", action)
		// A refusal is the decision's JSON, and fails.
		code, out, errOut = run("ops", "reveal", stuck, "--field", "intent", "--reason", "which ticket", "--config", cfg, "-o", "json")
		require.Equal(t, ExitFailure, code, errOut)
		var refused map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &refused), out)
		require.NotEqual(t, "succeeded", refused["outcome"])
		require.NotContains(t, out, `"value"`)
		code, _, errOut = run("ops", "reveal", stuck, "--reason", "x", "--config", cfg, "-o", "yaml")
		require.Equal(t, ExitUsage, code)
		require.Contains(t, errOut, "one of table, json")
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
	code, _, errOut := run("resolve", idOf(t, d, "run-42:create-ticket"), "--as", "not-executed", "--reason", "x", "--no-lookup", "--config", cfg)
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
	code, _, errOut = run("access", "grant", admin.Role, "--as", "viewer", "--tenant", "acme", "--reason", "x", "--config", personConfig(t, newcomer, ""))
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

// lookupConfig writes a config connecting as p whose catalog has tool
// with effect and, when url is not empty, a lookup at url reading the
// reference at /ref.
func lookupConfig(t *testing.T, p *dbtest.Person, tool, effect, url string) string {
	t.Helper()
	content := "contexts:\n  test:\n    dsn: " + strconv.Quote(p.DSN) + "\ntools:\n  " + tool + ":\n    effect: " + effect + "\n"
	if url != "" {
		content += "    lookup:\n      url: " + strconv.Quote(url) + "\n      result_ref: /ref\n"
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// stuckRecord inserts a pending record whose lease expired a minute ago,
// as the service role does, and returns its id.
func stuckRecord(t *testing.T, d *dbtest.DB, tenant, tool, key, effect, owner string) string {
	t.Helper()
	var id int64
	require.NoError(t, d.Service.QueryRow(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt, leased_at, lease_expires_at)
VALUES ($1, $2, $3, '1', decode(repeat('0a', 32), 'hex'), $4, 'pending', $5, 1, now(), now() + interval '1m')
RETURNING id`, tenant, tool, key, effect, owner).Scan(&id))
	// The lease runs out: only the clock (here the superuser) moves it into the past.
	_, err := d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations
SET leased_at = now() - interval '2m', lease_expires_at = now() - interval '1m' WHERE id = $1`, id)
	require.NoError(t, err)
	return strconv.FormatInt(id, 10)
}

// state reads a record's state, as the superuser (inspection only).
func state(t *testing.T, d *dbtest.DB, id string) string {
	t.Helper()
	var s string
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT state FROM opsdesk.operations WHERE id = $1`, id).Scan(&s))
	return s
}

// lastAudit reads the newest audit record of an operation.
func lastAudit(t *testing.T, d *dbtest.DB, id string) (outcome, summary string, override bool) {
	t.Helper()
	var s *string
	require.NoError(t, d.Admin.QueryRow(t.Context(), `
SELECT outcome, evidence_summary, override FROM opsdesk.audit WHERE operation_id = $1 ORDER BY at DESC, seq DESC LIMIT 1`, id).
		Scan(&outcome, &s, &override))
	if s != nil {
		summary = *s
	}
	return outcome, summary, override
}

// TestResolveDotKeyIsNotReleased is the release-after-404 scenario end
// to end: the demo provider charged key .., whose lookup URL a
// dot-segment-cleaning mux used to redirect to a 404, which read as "not
// found" and let not-executed release the charge without --override. The
// provider now knows the charge by its provider key, which the catalog's
// lookup asks for: resolve still finds it.
func TestResolveDotKeyIsNotReleased(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	provider, err := demo.StartProvider(demo.ProviderConfig{Pool: dbtest.New(t).Service})
	require.NoError(t, err)
	t.Cleanup(func() { _ = provider.Close() })
	cfg := lookupConfig(t, operator, demo.ToolChargeCard, "external_unknown", provider.URL()+demo.LookupPath)
	for _, key := range []string{"..", ".", "a/../b"} {
		ref := charge(t, provider, "acme", key)
		id := stuckRecord(t, d, "acme", demo.ToolChargeCard, key, "external_unknown", "worker-1")

		code, _, errOut := run("resolve", id, "--as", "not-executed", "--reason", "the provider says not found", "--config", cfg)
		require.Equal(t, ExitFailure, code, "%q: %s", key, errOut)
		require.Contains(t, errOut, "found, reference "+ref, key)
		require.Contains(t, errOut, "the lookup says found, which contradicts not-executed: deciding needs override", key)
		require.Equal(t, "pending", state(t, d, id), "%q: the charge is not released", key)

		code, out, errOut := run("resolve", id, "--as", "completed", "--reason", "the provider has it", "--config", cfg)
		require.Equal(t, ExitOK, code, "%q: %s", key, errOut)
		require.Contains(t, out, "now completed", key)
		var got string
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT result_ref FROM opsdesk.operations WHERE id = $1`, id).Scan(&got))
		require.Equal(t, ref, got, key)
	}
}

// charge makes the demo provider charge (tenant, charge-card, key), under
// its provider key as the fleet sends it, and returns its reference.
func charge(t *testing.T, p *demo.Provider, tenant, key string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, p.URL()+"/v1/"+demo.ToolChargeCard,
		strings.NewReader(`{"card":"tok_visa"}`))
	require.NoError(t, err)
	req.Header.Set(demo.TenantHeader, tenant)
	id := ops.Identity{Tenant: tenant, Tool: demo.ToolChargeCard, Key: key}
	req.Header.Set(demo.IdempotencyKeyHeader, id.ProviderKey())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ref, ok := p.Effect(demo.ProviderIdentity(id))
	require.True(t, ok)
	return ref
}

// TestResolveReferenceContradictsLookup: confirming completed under a
// reference other than the one the lookup found is said before deciding
// and needs --override; the lookup's reference reaches the decision.
func TestResolveReferenceContradictsLookup(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"ref": "CH-1118"}`)
	}))
	defer provider.Close()
	cfg := lookupConfig(t, operator, "charge-card", "external_unknown", provider.URL+"/c/{tenant}/{key}")
	id := stuckRecord(t, d, "acme", "charge-card", "ord-9", "external_unknown", "worker-1")
	before := auditCount(t, d)

	// Said first, then refused by the database, which audits the refusal.
	code, _, errOut := run("resolve", id, "--as", "completed", "--result-ref", "CH-MANUAL", "--reason", "saw it", "--config", cfg)
	require.Equal(t, ExitFailure, code, errOut)
	require.Contains(t, errOut, "found, reference CH-1118")
	require.Contains(t, errOut, `--result-ref "CH-MANUAL" contradicts the lookup, which found reference "CH-1118"`)
	require.Contains(t, errOut, "deciding needs override")
	require.Equal(t, "pending", state(t, d, id))
	require.Equal(t, before+1, auditCount(t, d), "the refusal is audited")
	outcome, _, override := lastAudit(t, d, id)
	require.Equal(t, "denied", outcome)
	require.False(t, override)

	code, out, errOut := run("resolve", id, "--as", "completed", "--result-ref", "CH-MANUAL", "--reason", "the dashboard shows CH-MANUAL",
		"--override", "--evidence", "dashboard", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, errOut, `warning: --result-ref "CH-MANUAL" contradicts the lookup, which found reference "CH-1118": deciding against it (--override, recorded)`)
	require.Contains(t, out, "now completed")
	outcome, summary, override := lastAudit(t, d, id)
	require.Equal(t, "succeeded", outcome)
	require.True(t, override)
	require.Regexp(t, `^lookup: HTTP 200 .*: found, reference CH-1118; noted: dashboard$`, summary)
}

// TestResolveWithoutEvidence: with no lookup for an external effect of
// unknown outcome, resolve wants --no-lookup; whatever is decided without
// a lookup says so on screen and in the audit trail.
func TestResolveWithoutEvidence(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	var asked atomic.Int32
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		http.NotFound(w, nil)
	}))
	defer provider.Close()
	noLookup := lookupConfig(t, operator, "charge-card", "external_unknown", "")
	notInCatalog := lookupConfig(t, operator, "other-tool", "local", "")
	withLookup := lookupConfig(t, operator, "charge-card", "external_unknown", provider.URL+"/c/{key}")
	const none = "no evidence gathered: the catalog has no lookup for charge-card"

	t.Run("UnknownOutcomeNeedsNoLookup", func(t *testing.T) {
		id := stuckRecord(t, d, "acme", "charge-card", "ord-20", "external_unknown", "worker-1")
		before := auditCount(t, d)
		for _, cfg := range []string{noLookup, notInCatalog} {
			for _, as := range []string{"not-executed", "failed"} {
				code, _, errOut := run("resolve", id, "--as", as, "--reason", "x", "--config", cfg)
				require.Equal(t, ExitUsage, code, errOut)
				require.Contains(t, errOut, "the catalog has no lookup for it, so opsdesk can gather no evidence")
				require.Contains(t, errOut, "pass --no-lookup")
			}
		}
		require.Equal(t, before, auditCount(t, d))
		require.Equal(t, "pending", state(t, d, id))

		code, out, errOut := run("resolve", id, "--as", "not-executed", "--reason", "checked the dashboard", "--no-lookup", "--config", noLookup)
		require.Equal(t, ExitOK, code, errOut)
		require.Equal(t, "warning: "+none+"\n", errOut)
		require.Contains(t, out, "now released")
		_, summary, _ := lastAudit(t, d, id)
		require.Equal(t, none, summary)
	})

	const skipped = "no evidence gathered: the lookup for charge-card was skipped (--no-lookup)"
	for _, tc := range []struct {
		name, key, effect, cfg string
		args                   []string
		summary                string
	}{
		// Deferring changes nothing: no --no-lookup needed.
		{"DeferNeedsNone", "ord-21", "external_unknown", noLookup,
			[]string{"--as", "defer", "--snooze", "1h", "--reason", "ask finance"}, none},
		{"OtherEffectsSayIt", "ord-22", "local", noLookup,
			[]string{"--as", "not-executed", "--reason", "rolled back", "--evidence", "no row"}, none + "; noted: no row"},
		{"NoLookupSkipsAConfiguredOne", "ord-23", "external_unknown", withLookup,
			[]string{"--as", "failed", "--reason", "declined by phone", "--no-lookup"}, skipped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := stuckRecord(t, d, "acme", "charge-card", tc.key, tc.effect, "worker-1")
			code, _, errOut := run(append([]string{"resolve", id, "--config", tc.cfg}, tc.args...)...)
			require.Equal(t, ExitOK, code, errOut)
			require.Equal(t, "warning: "+strings.TrimSuffix(tc.summary, "; noted: no row")+"\n", errOut)
			_, summary, _ := lastAudit(t, d, id)
			require.Equal(t, tc.summary, summary)
		})
	}
	t.Run("DeferSaysDeferredAsOpsShowDoes", func(t *testing.T) {
		id := stuckRecord(t, d, "acme", "charge-card", "ord-24", "external_unknown", "worker-1")
		code, out, errOut := run("resolve", id, "--as", "defer", "--snooze", "1h", "--reason", "ask finance", "-o", "json", "--config", noLookup)
		require.Equal(t, ExitOK, code, errOut)
		var res struct{ State string }
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		require.Equal(t, "deferred", res.State)
		code, out, errOut = run("ops", "show", id, "-o", "json", "--config", noLookup)
		require.Equal(t, ExitOK, code, errOut)
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		require.Equal(t, "deferred", res.State)
	})
	require.Zero(t, asked.Load(), "the provider was not asked")
}

func TestWithNoteKeepsTheLookup(t *testing.T) {
	t.Parallel()
	e := reconcile.Evidence{Digest: "sha256:00", Summary: "HTTP 200 from p in 1ms: found, reference CH-1", Lookup: reconcile.LookupFound, Ref: "CH-1"}
	got := withNote(e, true, "seen in the dashboard")
	require.Equal(t, reconcile.LookupFound, got.Lookup)
	require.Equal(t, "CH-1", got.Ref, "the reference the decision is checked against")
	require.Equal(t, "lookup: HTTP 200 from p in 1ms: found, reference CH-1; noted: seen in the dashboard", got.Summary)
	require.NotEqual(t, e.Digest, got.Digest)
}
