package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

func TestRetentionPurge(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	// mail-1 (globex, send-email) is completed; its retention ends now.
	_, err := d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations SET expires_at = now() - interval '1 hour' WHERE key = 'mail-1'`)
	require.NoError(t, err)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("contexts:\n  test:\n    dsn: "+strconv.Quote(admin.DSN)+"\n"+
		"tools:\n  send-email:\n    effect: external_idempotent\n    retry_window: 36h\n"), 0o600))

	for _, args := range [][]string{
		{"--before", "yesterday"}, {"--batch", "0"}, {"--yield", "-1"},
		{"--workers", "0"}, {"--workers", "9"},
	} {
		code, _, _ := run(append([]string{"retention", "purge", "--config", cfg}, args...)...)
		require.Equal(t, ExitUsage, code, args)
	}

	code, out, errOut := run("retention", "purge", "--dry-run", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "1 records of every tool would be purged: completed, retention ended before 20")
	code, _, errOut = run("retention", "purge", "--config", cfg)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "nothing purged: add --yes")

	code, _, errOut = run("retention", "purge", "--workers", "9", "--config", cfg)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--workers 9: between 1 and 8")

	code, out, errOut = run("retention", "purge", "--yes", "--reason", "weekly", "--workers", "3", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Regexp(t, `purged 1 records in run \d+, and 0 expired tombstones; audit records #\d+ \(start\) and #\d+ \(result\)`, out)
	require.Contains(t, errOut, "purged 1 of about 1")

	var inTombstone bool
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT expires_at BETWEEN now() + interval '35 hours' AND now() + interval '37 hours'
FROM opsdesk.tombstones WHERE key = 'mail-1'`).Scan(&inTombstone))
	require.True(t, inTombstone, "the tombstone lasts the tool's retry_window")
	code, out, _ = run("ops", "get", "--tenant", "globex", "--tool", "send-email", "--key", "mail-1", "--config", cfg)
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "globex/send-email/mail-1: purged")

	// Not an admin of every tenant: refused, nothing goes.
	operator := dbtest.NewPerson(t, d, "operator", "*")
	ocfg := personConfig(t, operator, "")
	code, _, errOut = run("retention", "purge", "--yes", "--config", ocfg)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "may not purge")
}

func TestRetentionHoldAndRelease(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	cfg := personConfig(t, admin, "")
	mail := idOf(t, d, "mail-1")

	for _, args := range [][]string{
		{"retention", "hold", mail},
		{"retention", "hold", "--reason", "x"},
		{"retention", "hold", mail, "--filter", "tenant:acme", "--reason", "x"},
		{"retention", "hold", "--filter", "state:bogus", "--reason", "x"},
	} {
		code, _, _ := run(append(args, "--config", cfg)...)
		require.Equal(t, ExitUsage, code, args)
	}
	code, out, errOut := run("retention", "hold", mail, "--reason", "litigation #12", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, "held 1 records; 0 already were\n", out)
	code, out, errOut = run("retention", "hold", "--filter", "tenant:acme", "--reason", "litigation #12", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, "held 2 records; 0 already were\n", out)
	var held int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.operations WHERE held`).Scan(&held))
	require.Equal(t, 3, held)
	code, out, _ = run("ops", "show", mail, "--config", cfg)
	require.Equal(t, ExitOK, code)
	require.Regexp(t, `legal hold +held: no purge deletes it`, out)
	code, out, _ = run("ops", "list", "--tenant", "globex", "-o", "json", "--config", cfg)
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, `"held": true`)

	code, out, errOut = run("retention", "release", mail, "--reason", "case closed", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "released 1 records")

	operator := dbtest.NewPerson(t, d, "operator", "*")
	code, _, errOut = run("retention", "hold", mail, "--reason", "x", "--config", personConfig(t, operator, ""))
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "may not hold or release records")
}

func TestRetentionReview(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	// mail-1 (globex, send-email) is completed; its retention ended.
	_, err := d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations SET expires_at = now() - interval '1 hour' WHERE key = 'mail-1'`)
	require.NoError(t, err)
	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("contexts:\n  test:\n    dsn: "+strconv.Quote(viewer.DSN)+"\n"+
		"tools:\n  send-email:\n    effect: external_idempotent\n    retention: 12h\n    retry_window: 36h\n"+
		"  create-ticket:\n    effect: local\n"), 0o600))

	code, out, errOut := run("retention", "review", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "retention review of every tenant")
	require.Regexp(t, `send-email +12h +1d12h +reexecute +0 +0 +1 +1 +0 +0 +-`, out)
	require.Regexp(t, `charge-card \(not in catalog\) +7d \(default\) +\? +\? `, out)
	require.Contains(t, out, "⚠ send-email: retention 12h is shorter than the retry window 36h")
	require.Contains(t, out, "⚠ charge-card: not in the catalog")

	code, out, errOut = run("retention", "review", "--config", cfg, "-o", "json")
	require.Equal(t, ExitOK, code, errOut)
	var r storeview.Review
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Len(t, r.Tools, 3)
	for _, tr := range r.Tools {
		if tr.Tool == "send-email" {
			require.Equal(t, storeview.Count{N: 1}, tr.Purgeable)
			require.Len(t, tr.Warnings, 1)
		}
	}

	code, _, errOut = run("retention", "review", "--config", cfg, "-o", "yaml")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, `-o "yaml": one of table, json`)
}
