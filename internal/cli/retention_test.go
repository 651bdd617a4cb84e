package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/retention"
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
		{"--workers", "0"}, {"--workers", "9"}, {"-o", "yaml"},
	} {
		code, _, _ := run(append([]string{"retention", "purge", "--config", cfg}, args...)...)
		require.Equal(t, ExitUsage, code, args)
	}

	code, out, errOut := run("retention", "purge", "--dry-run", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "1 record of every tool would be purged: completed, retention ended before 20")
	code, out, errOut = run("retention", "purge", "--dry-run", "-o", "json", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, errOut, "1 record of every tool would be purged")
	var dry struct {
		Tool   *string
		DryRun struct {
			Count  int64
			Before *time.Time
		} `json:"dry_run"`
		Result *struct{} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &dry), out)
	require.Nil(t, dry.Tool, "every tool")
	require.Equal(t, int64(1), dry.DryRun.Count)
	require.NotNil(t, dry.DryRun.Before)
	require.Nil(t, dry.Result, "a dry run purges nothing")
	code, _, errOut = run("retention", "purge", "--config", cfg)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "nothing purged: add --yes")

	code, _, errOut = run("retention", "purge", "--workers", "9", "--config", cfg)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--workers 9: between 1 and 8")

	code, out, errOut = run("retention", "purge", "--yes", "--reason", "weekly", "--workers", "3", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Regexp(t, `purged 1 record in run \d+, and 0 expired tombstones; audit records #\d+ \(start\) and #\d+ \(result\)`, out)
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

// Bad --yield, --workers and --batch values are usage errors that name
// the flag, and purge nothing, even with --yes.
func TestRetentionPurgeRefusesBadPaceFlags(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	_, err := d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations SET expires_at = now() - interval '1 hour' WHERE key = 'mail-1'`)
	require.NoError(t, err)
	cfg := personConfig(t, dbtest.NewPerson(t, d, "admin", "*"), "")
	for _, c := range []struct{ flag, value, says string }{
		{"--yield", "NaN", "--yield NaN: give a number from 0 (full speed) to 100"},
		{"--yield", "nan", "--yield NaN: give a number"},
		{"--yield", "-0.5", "--yield -0.5: give a number"},
		{"--yield", "100.5", "--yield 100.5: give a number"},
		{"--yield", "Inf", "--yield +Inf: give a number"},
		{"--yield", "-Inf", "--yield -Inf: give a number"},
		{"--yield", "1e400", `invalid argument "1e400" for "--yield"`},
		{"--yield", "", `invalid argument "" for "--yield"`},
		{"--yield", " 1", `invalid argument " 1" for "--yield"`},
		{"--yield", "1\x00", `for "--yield"`},
		{"--workers", "-1", "--workers -1: between 1 and 8"},
		{"--workers", "0", "--workers 0: between 1 and 8"},
		{"--workers", "9", "--workers 9: between 1 and 8"},
		{"--workers", "99999999999999999999", `invalid argument "99999999999999999999" for "--workers"`},
		{"--workers", "1.5", `invalid argument "1.5" for "--workers"`},
		{"--batch", "-5", "--batch -5: between 1 and 10000"},
		{"--batch", "10001", "--batch 10001: between 1 and 10000"},
	} {
		code, _, errOut := run("retention", "purge", "--yes", "--config", cfg, c.flag+"="+c.value)
		require.Equal(t, ExitUsage, code, c)
		require.Contains(t, errOut, c.says, c)
	}
	var left, runs int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM opsdesk.operations WHERE key = 'mail-1'),
    (SELECT count(*) FROM opsdesk.purge_runs)`).Scan(&left, &runs))
	require.Equal(t, 1, left, "nothing purged")
	require.Zero(t, runs, "no run started")
}

// A purge paces itself unless asked for a pace: --yield, or --workers,
// which asks for speed. The progress lines show each batch's pace.
func TestRetentionPurgePace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args       []string
		pace, line string
	}{
		{nil, "pace: paced by batch latency", `\(run \d+, batch 1: 1 record in [0-9.]+[µm]?s, 1\.0x its fastest\)`},
		{[]string{"--yield", "0"}, "pace: full speed", `\(run \d+, batch 1: 1 record in [0-9.]+[µm]?s\)`},
		{[]string{"--workers", "2"}, "pace: full speed", `\(run \d+, batch 1: 1 record in [0-9.]+[µm]?s\)`},
		{[]string{"--workers", "2", "--yield", "0.5"}, "pace: yield 0.5", `batch 1: 1 record in [0-9.]+[µm]?s; pausing [0-9.]+[µm]?s\)`},
	} {
		_, d := storeConfig(t)
		_, err := d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations SET expires_at = now() - interval '1 hour' WHERE key = 'mail-1'`)
		require.NoError(t, err)
		cfg := personConfig(t, dbtest.NewPerson(t, d, "admin", "*"), "")
		code, out, errOut := run(append([]string{"retention", "purge", "--yes", "--config", cfg}, c.args...)...)
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, out, "purged 1 record")
		require.Contains(t, errOut, c.pace+"\n", c.args)
		require.Regexp(t, c.line, errOut, c.args)
	}
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
	require.Equal(t, "held 1 record; 0 already were\n", out)
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
	require.Contains(t, out, "released 1 record")

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
	var r readmodel.Review
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Len(t, r.Tools, 3)
	for _, tr := range r.Tools {
		if tr.Tool == "send-email" {
			require.Equal(t, readmodel.Count{N: 1}, tr.Purgeable)
			require.Len(t, tr.Warnings, 1)
		}
	}

	code, _, errOut = run("retention", "review", "--config", cfg, "-o", "yaml")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, `-o "yaml": one of table, json`)
}

// A hold or release naming a record that is missing, or that the role
// does not see, fails naming it and holds nothing (all or nothing); it
// used to exit 0 saying "1 not found".
func TestRetentionHoldOfMissingRecordsFails(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	mail := idOf(t, d, "mail-1")
	admin := dbtest.NewPerson(t, d, "admin", "*")
	cfg := personConfig(t, admin, "")
	code, out, errOut := run("retention", "hold", "999999", "--reason", "x", "--config", cfg)
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, errOut, "no operation 999999 (or not visible to "+admin.Role+"): nothing held")
	require.Empty(t, out)

	code, _, errOut = run("retention", "hold", mail, "999999", "999998", "--reason", "x", "--config", cfg)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "no operations 999998, 999999")
	var held int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.operations WHERE held`).Scan(&held))
	require.Zero(t, held, "nothing held")

	// globex's record is not visible to an admin of acme.
	acme := personConfig(t, dbtest.NewPerson(t, d, "admin", "acme"), "")
	code, _, errOut = run("retention", "release", mail, "--reason", "x", "--config", acme)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "no operation "+mail+" (or not visible to")
	require.Contains(t, errOut, "nothing released")
}

// A purge of a tool that neither the store nor the catalog knows fails
// naming the known tools; it used to purge nothing and exit 0.
func TestRetentionPurgeOfAnUnknownToolFails(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	cfg := personConfig(t, dbtest.NewPerson(t, d, "admin", "*"), "")
	for _, args := range [][]string{{"--dry-run"}, {"--yes"}} {
		code, out, errOut := run(append([]string{"retention", "purge", "--tool", "nosuch", "--config", cfg}, args...)...)
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, errOut, "no tool nosuch: known tools charge-card, create-ticket, send-email")
	}
	// A tool of the catalog with no records is known: nothing to purge.
	code, out, errOut := run("retention", "purge", "--tool", "create-ticket", "--dry-run", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "0 records of tool create-ticket would be purged")
	var runs int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.purge_runs`).Scan(&runs))
	require.Zero(t, runs)
}

// An unfinished purge (started, some records gone, never finished) shows
// in the review, as text and JSON, and in doctor, for admins of every
// tenant; a one-tenant admin sees no purge run.
func TestUnfinishedPurgeShows(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	_, err := d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations SET expires_at = now() - interval '1 hour' WHERE key = 'mail-1'`)
	require.NoError(t, err)
	admin := dbtest.NewPerson(t, d, "admin", "*")
	var runID, entry int64
	require.NoError(t, admin.Pool.QueryRow(t.Context(), `SELECT run, entry FROM opsdesk.purge_start('send-email', NULL, '{}', 'weekly', 1, 'Ann')`).
		Scan(&runID, &entry))
	seal, err := audit.Seal(t.Context(), admin.Pool, "", entry)
	require.NoError(t, err)
	seq := seal.Seq
	var purged int
	require.NoError(t, admin.Pool.QueryRow(t.Context(), `SELECT purged FROM opsdesk.purge_batch($1, 10)`, runID).Scan(&purged))
	require.Equal(t, 1, purged)
	cfg := personConfig(t, admin, "")

	want := fmt.Sprintf(`⚠ purge run %d (tool send-email) unfinished: started 20`, runID)
	code, out, errOut := run("retention", "review", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, want)
	require.Contains(t, out, "by "+admin.Role+" (Ann), reason \"weekly\"; 1 purged so far of at most 1, last batch 20")
	require.Contains(t, out, fmt.Sprintf("start record #%d, no result record yet. %s finishes it: opsdesk retention purge --tool send-email --yes",
		seq, admin.Role))

	code, out, errOut = run("retention", "review", "-o", "json", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	var r readmodel.Review
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Len(t, r.UnfinishedPurges, 1)
	u := r.UnfinishedPurges[0]
	require.Equal(t, runID, u.Run)
	require.Equal(t, admin.Role, u.Role)
	require.Equal(t, "Ann", u.DisplayName)
	require.Equal(t, "weekly", u.Reason)
	require.Equal(t, "send-email", u.Tool)
	require.EqualValues(t, 1, u.Purged)
	require.NotNil(t, u.StartSeq)
	require.Equal(t, seq, *u.StartSeq)
	require.False(t, u.StartedAt.IsZero())

	code, out, _ = run("doctor", "--config", cfg)
	require.Equal(t, ExitOK, code, "a warning, not a failure")
	require.Contains(t, out, "⚠ purges       purge run "+strconv.FormatInt(runID, 10)+" (tool send-email) unfinished")

	acme := personConfig(t, dbtest.NewPerson(t, d, "admin", "acme"), "")
	code, out, errOut = run("retention", "review", "--config", acme)
	require.Equal(t, ExitOK, code, errOut)
	require.NotContains(t, out, "purge run")
	code, out, _ = run("doctor", "--config", acme)
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "- purges       purge runs are visible to admins of every tenant only")

	// Finished, it goes from the review and from doctor.
	code, out, errOut = run("retention", "purge", "--tool", "send-email", "--yes", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "this resumes unfinished run "+strconv.FormatInt(runID, 10))
	require.Regexp(t, `purged 1 record in run \d+, and 0 expired tombstones; audit records #\d+ \(resume\) and #\d+ \(result\)`, out)
	code, out, _ = run("retention", "review", "--config", cfg)
	require.Equal(t, ExitOK, code)
	require.NotContains(t, out, "unfinished")
	code, out, _ = run("doctor", "--config", cfg)
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "✓ purges       no unfinished purge run")
}

// A hold of more than retention.HoldBatch records goes in batches and
// reports each on stderr; the summary stays on stdout.
func TestRetentionHoldInBatchesReportsProgress(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	n := 3 * retention.HoldBatch
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at)
SELECT 'initech', 'create-ticket', 'bulk-' || i, '1', decode(repeat('01', 32), 'hex'), 'local', 'completed', 'succeeded', 'w',
    now(), now(), now(), now() + interval '1 day'
FROM generate_series(1, $1) i`, n)
	require.NoError(t, err)
	cfg := personConfig(t, dbtest.NewPerson(t, d, "admin", "*"), "")
	code, out, errOut := run("retention", "hold", "--filter", "tenant:initech", "--reason", "litigation #12", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, fmt.Sprintf("held %d records; 0 already were\n", n), out)
	require.Regexp(t, fmt.Sprintf(`^held %d of %d records \(ids up to \d+\)\n`, retention.HoldBatch, n), errOut)
	require.Contains(t, errOut, fmt.Sprintf("held %d of %d records", n, n))
}
