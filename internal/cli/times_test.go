package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

func TestCommandsReadExtremeTimes(t *testing.T) {
	t.Parallel()
	// Every one failed `ops list` for its whole tenant: "cannot scan
	// Infinity into *time.Time".
	_, d := storeConfig(t)
	dbtest.InsertExtremeTimes(t, d)
	viewer := personConfig(t, dbtest.NewPerson(t, d, "viewer", "acme"), "")
	keys := dbtest.ExtremeKeys

	t.Run("List", func(t *testing.T) {
		for _, sort := range []string{"newest", "lease", "expires"} {
			code, out, errOut := run("ops", "list", "--config", viewer, "--sort", sort)
			require.Equal(t, ExitOK, code, errOut)
			for _, key := range append([]string{"ord-1"}, keys...) {
				require.Contains(t, out, key, "sorted by %s", sort)
			}
			code, out, errOut = run("ops", "list", "--config", viewer, "--sort", sort, "-o", "json")
			require.Equal(t, ExitOK, code, errOut)
			var items []map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &items), out)
			require.Len(t, items, 7)
		}
		_, out, _ := run("ops", "list", "--config", viewer, "--filter", "key:"+dbtest.LeaseNeverEnds)
		require.Contains(t, out, "never", "a lease that never ends:\n%s", out)
		_, out, _ = run("ops", "list", "--config", viewer, "--filter", "key:"+dbtest.LeaseEndedAlways)
		require.Contains(t, out, "⚠ stuck", out)
		require.Contains(t, out, "-infinity", "a lease that ended at -infinity:\n%s", out)
		_, out, _ = run("ops", "list", "--config", viewer, "--filter", "key:kept-*")
		require.Equal(t, 2, strings.Count(out, "never"), "expiries that never come:\n%s", out)
	})
	t.Run("Show", func(t *testing.T) {
		for _, key := range keys {
			code, out, errOut := run("ops", "show", idOf(t, d, key), "--config", viewer)
			require.Equal(t, ExitOK, code, errOut)
			require.Contains(t, out, key)
			code, out, errOut = run("ops", "show", idOf(t, d, key), "--config", viewer, "-o", "json")
			require.Equal(t, ExitOK, code, errOut)
			var detail map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &detail), out)
			code, _, errOut = run("ops", "get", "--tenant", "acme", "--tool", strings.Split(detail["tool"].(string), " ")[0],
				"--key", key, "--config", viewer)
			require.Equal(t, ExitOK, code, errOut)
		}
		_, out, _ := run("ops", "show", idOf(t, d, dbtest.LeaseNeverEnds), "--config", viewer)
		require.Contains(t, out, "lease expires   infinity (never)", out)
		_, out, _ = run("ops", "show", idOf(t, d, dbtest.KeptForEver), "--config", viewer)
		for _, want := range []string{"created         -infinity (-infinity)", "completed       -infinity (-infinity)",
			"retention ends  infinity (never)", "conflicts       1 (last -infinity (-infinity))"} {
			require.Contains(t, out, want, out)
		}
		_, out, _ = run("ops", "show", idOf(t, d, dbtest.LeaseNeverEnds), "--config", viewer, "-o", "json")
		require.Contains(t, out, `"lease_expires_at": "9999-12-31T23:59:59.999999999Z"`, out)
	})
	t.Run("ResolveForce", func(t *testing.T) {
		operator := personConfig(t, dbtest.NewPerson(t, d, "operator", "acme"), "")
		id := idOf(t, d, dbtest.LeaseNeverEnds)
		code, out, errOut := run("resolve", id, "--as", "not-executed", "--force", "--no-lookup",
			"--reason", "nobody holds a lease that never ends", "--config", operator)
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, out, "not-executed", out)
		var state string
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT state FROM opsdesk.operations WHERE id = $1::bigint`, id).Scan(&state))
		require.Equal(t, "released", state)
	})
}

// TestDoctorNamesTimesOutOfBounds: doctor lists the records holding times
// no service may write, each with the command that shows it, and fails:
// a lease that never ends is never stuck and never alerts.
func TestDoctorNamesTimesOutOfBounds(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	viewer := personConfig(t, dbtest.NewPerson(t, d, "viewer", "acme"), "")
	code, out, errOut := run("doctor", "--config", viewer)
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "✓ times        no record holds an infinite or out-of-bounds time")

	dbtest.InsertExtremeTimes(t, d)
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
VALUES ('acme', 'charge-card', 'lease-two-days', '1', decode(repeat('09', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now(), now() + interval '2 days'),
 ('globex', 'charge-card', 'not-yours', '1', decode(repeat('0a', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now(), 'infinity')`)
	require.NoError(t, err)
	code, out, _ = run("doctor", "--config", viewer)
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, out, "✗ times        6 records hold times no service may write")
	for key, times := range map[string]string{
		dbtest.LeaseNeverEnds:    "lease_expires_at infinity",
		dbtest.LeaseToYear294276: "lease_expires_at 294276-12-31 23:59:59+00",
		dbtest.LeaseEndedAlways:  "created_at 4713-01-01 00:00:00+00 BC, leased_at -infinity, lease_expires_at -infinity",
		dbtest.KeptForEver: "created_at -infinity, updated_at infinity, leased_at -infinity, lease_expires_at -infinity, " +
			"completed_at -infinity, expires_at infinity, last_conflict_at -infinity",
		dbtest.KeptToYear294276: "completed_at infinity, expires_at 294276-12-31 23:59:59+00",
		"lease-two-days":        "lease_expires_at ",
	} {
		id := idOf(t, d, key)
		require.Contains(t, out, "#"+id+" acme/", key)
		require.Contains(t, out, key+": "+times, out)
		require.Contains(t, out, "opsdesk ops show "+id+"\n", key)
	}
	require.NotContains(t, out, "not-yours", "another tenant's record")
}

// TestDoctorWarnsOfBatchLookupsNotLeakproof: a schema installed without a
// superuser has 00029's batch lookups unmarked, and doctor says what to
// run.
func TestDoctorWarnsOfBatchLookupsNotLeakproof(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	viewer := personConfig(t, dbtest.NewPerson(t, d, "viewer", "acme"), "")
	code, out, errOut := run("doctor", "--config", viewer)
	require.Equal(t, ExitOK, code, out+errOut)
	require.NotContains(t, out, "LEAKPROOF")

	_, err := d.Admin.Exec(t.Context(), `ALTER FUNCTION opsdesk.batch_of(jsonb) NOT LEAKPROOF`)
	require.NoError(t, err)
	code, out, errOut = run("doctor", "--config", viewer)
	require.Equal(t, ExitOK, code, "a warning, not a failure: "+out+errOut)
	require.Contains(t, out, "ALTER FUNCTION opsdesk.batch_of(jsonb) LEAKPROOF")
}
