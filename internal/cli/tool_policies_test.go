package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

// catalogConfig is a configuration file for p's login with catalog as its
// tools section.
func catalogConfig(t *testing.T, p *dbtest.Person, catalog string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	content := "contexts:\n  test:\n    dsn: " + strconv.Quote(p.DSN) + "\ntools:\n" + catalog
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// TestToolPolicies: the console runs by the policies the services recorded
// (ops.New), the catalog adds the people's parts, and doctor names each
// catalog value that disagrees, a policy one service replaced with
// another's, and a tool only the catalog knows.
func TestToolPolicies(t *testing.T) {
	t.Parallel()

	t.Run("Disagreement", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		_, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{
			"charge-card": {Effect: ops.EffectUnknownOutcome, Retention: 48 * time.Hour, AfterExpiry: ops.RejectAfterExpiry},
			"send-email":  {Effect: ops.EffectIdempotentProvider, Retention: 24 * time.Hour},
		}})
		require.NoError(t, err)
		var service string
		require.NoError(t, d.Service.QueryRow(t.Context(), `SELECT session_user`).Scan(&service))
		other := dbtest.NewService(t, d)
		_, err = ops.New(other.Pool, ops.Config{Tools: map[string]ops.Policy{
			"send-email": {Effect: ops.EffectIdempotentProvider, Retention: 72 * time.Hour},
		}})
		require.NoError(t, err)

		viewer := dbtest.NewPerson(t, d, "viewer", "*")
		cfg := catalogConfig(t, viewer, ""+
			"  charge-card:\n    effect: external_unknown\n    retention: 24h\n    runbook: Call the bank.\n"+
			"  send-email:\n    runbook: Ask the provider.\n"+
			"  legacy-sync:\n    effect: local\n    retention: 12h\n    retry_window: 6h\n")

		code, out, errOut := run("doctor", "--config", cfg)
		require.Equal(t, ExitFailure, code, out+errOut)
		require.Contains(t, out, "✗ policies     tool charge-card: retention 24h in the catalog, 48h recorded (by "+service+" at ")
		require.Contains(t, out, "the console uses the recorded policy")
		require.Contains(t, out, "- policies     tool legacy-sync is in the catalog only: no service recorded its policy")
		require.Contains(t, out, "⚠ policies     tool send-email: "+other.Role+" recorded retention 24h → 72h, retry_window 24h → 72h at ")
		require.Contains(t, out, "replacing the policy "+service+" recorded at ")
		require.NotContains(t, out, "✓ policies")

		// The review runs by the recorded policies; a catalog-only tool
		// keeps the catalog's.
		code, out, errOut = run("retention", "review", "-o", "json", "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		// Durations are seconds, in _seconds fields (the JSON convention).
		var r struct {
			Tools []struct {
				Tool               string
				RetentionSeconds   float64 `json:"retention_seconds"`
				RetryWindowSeconds float64 `json:"retry_window_seconds"`
				AfterExpiry        string  `json:"after_expiry"`
			}
		}
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		require.NotContains(t, out, `"retention":`)
		got := map[string]struct{ retention, window time.Duration }{}
		after := map[string]string{}
		for _, tr := range r.Tools {
			got[tr.Tool] = struct{ retention, window time.Duration }{
				time.Duration(tr.RetentionSeconds * float64(time.Second)), time.Duration(tr.RetryWindowSeconds * float64(time.Second))}
			after[tr.Tool] = tr.AfterExpiry
		}
		require.Equal(t, 48*time.Hour, got["charge-card"].retention)
		require.Equal(t, "reject", after["charge-card"])
		require.Equal(t, 72*time.Hour, got["send-email"].retention)
		require.Equal(t, 72*time.Hour, got["send-email"].window)
		require.Equal(t, 12*time.Hour, got["legacy-sync"].retention)
		require.Equal(t, 6*time.Hour, got["legacy-sync"].window)
	})

	t.Run("Agreement", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		_, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{
			"charge-card": {Effect: ops.EffectUnknownOutcome, Retention: 48 * time.Hour},
		}})
		require.NoError(t, err)
		viewer := dbtest.NewPerson(t, d, "viewer", "*")
		// The catalog gives the people's parts and the values it repeats
		// agree.
		cfg := catalogConfig(t, viewer, "  charge-card:\n    effect: external_unknown\n    retention: 48h\n    runbook: Call the bank.\n")
		code, out, errOut := run("doctor", "--config", cfg)
		require.Equal(t, ExitOK, code, out+errOut)
		require.Contains(t, out, "✓ policies     policies recorded by the services: 1; the catalog agrees")
	})
}
