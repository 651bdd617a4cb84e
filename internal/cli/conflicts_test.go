package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

// libraryConflict has the library record a charge of tenant's, of intent original
// whose outcome is unknown, then retry it with intent attempted: a
// conflict. It returns the record's and the conflict's numbers.
func libraryConflict(t *testing.T, d *dbtest.DB, tenant, key, original, attempted string) (string, string) {
	t.Helper()
	return libraryConflictUpTo(t, d, 0, tenant, key, original, attempted)
}

// libraryConflictUpTo is libraryConflict by a library that stores intents
// of up to maxIntent bytes (0: its default).
func libraryConflictUpTo(t *testing.T, d *dbtest.DB, maxIntent int, tenant, key, original, attempted string) (string, string) {
	t.Helper()
	store, err := ops.New(d.Service, ops.Config{Owner: "worker-7", MaxIntentBytes: maxIntent,
		Tools: map[string]ops.Policy{"charge-card": {Effect: ops.EffectUnknownOutcome, Lease: time.Second}}})
	require.NoError(t, err)
	req := func(intent string) ops.Request {
		return ops.Request{Identity: ops.Identity{Tenant: tenant, Tool: "charge-card", Key: key}, Version: "1",
			Intent: json.RawMessage(intent)}
	}
	_, err = ops.DoExternal(t.Context(), store, req(original), func(context.Context, ops.Attempt) (struct{}, error) {
		return struct{}{}, errors.New("provider timed out")
	})
	require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
	_, err = ops.DoExternal(t.Context(), store, req(attempted), func(context.Context, ops.Attempt) (struct{}, error) {
		return struct{}{}, errors.New("a conflict must not run")
	})
	var conflict *ops.IntentConflictError
	require.ErrorAs(t, err, &conflict)
	return idOf(t, d, key), strconv.FormatInt(conflict.ConflictID, 10)
}

func TestConflictsShow(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	cfg := personConfig(t, operator, "")
	id, conflict := libraryConflict(t, d, "acme", "cli-1",
		`{"amount":100,"card":"4242","k\u001b[2J":"\u009b31m","a/b":1}`,
		`{"amount":500,"k\u001b[2J":"\u009b32m","a/b":2,"note":"retry"}`)

	t.Run("ListsWithoutRevealing", func(t *testing.T) {
		before := auditCount(t, d)
		code, out, errOut := run("conflicts", "show", id, "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, out, "operation "+id+" acme/charge-card/cli-1: 1 conflicting attempt\n")
		require.Contains(t, out, "  #"+conflict+" ")
		require.Contains(t, out, "opsdesk conflicts show "+id+" --reveal --reason TEXT")
		require.NotContains(t, out, "4242")
		code, out, errOut = run("conflicts", "show", id, "--conflict", conflict, "-o", "json", "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		var list struct {
			OperationID int64 `json:"operation_id"`
			Conflicts   []struct {
				ID int64 `json:"id"`
			} `json:"conflicts"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &list))
		require.Len(t, list.Conflicts, 1)
		require.Equal(t, conflict, strconv.FormatInt(list.Conflicts[0].ID, 10))
		require.Equal(t, before, auditCount(t, d), "a listing is not a reveal")
		code, out, _ = run("ops", "show", id, "--config", cfg)
		require.Equal(t, ExitOK, code)
		require.Contains(t, out, "what differs: opsdesk conflicts show "+id+" --reveal --reason TEXT (audited)")
	})

	t.Run("BadInputIsAUsageErrorAndNotAudited", func(t *testing.T) {
		before := auditCount(t, d)
		for _, args := range [][]string{
			{"conflicts", "show", id, "--reveal"},
			{"conflicts", "show", id, "--reveal", "--reason", " \t\n"},
			{"conflicts", "show", id, "--reason", "why"},
			{"conflicts", "show", id, "--conflict", "-1"},
			{"conflicts", "show", id, "--conflict", "999999", "--reveal", "--reason", "why"},
			{"conflicts", "show", id, "-o", "yaml"},
			{"conflicts", "show", "x1", "--reveal", "--reason", "why"},
		} {
			code, _, errOut := run(append(args, "--config", cfg)...)
			require.Equal(t, ExitUsage, code, "%v: %s", args, errOut)
		}
		require.Equal(t, before, auditCount(t, d))
	})

	t.Run("RevealsBothSidesWithTheDifferencesMarked", func(t *testing.T) {
		code, out, errOut := run("conflicts", "show", id, "--reveal", "--reason", "caller reports a double charge", "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		require.Regexp(t, `revealed: audit record acme#\d+\n`, out)
		require.Contains(t, out, "5 differing fields (JSON Pointer paths")
		for _, want := range []string{
			"  ~ /intent/a~1b          1 → 2\n",
			"  ~ /intent/amount        100 → 500\n",
			"  - /intent/card          \"4242\" → (absent)\n",
			"  ~ \"/intent/k\\u001b[2J\"  \"\\u009b31m\" → \"\\u009b32m\"\n",
			"  + /intent/note          (absent) → \"retry\"\n",
			"\noriginal request (operation " + id + ", fp:",
			"  ~     \"a/b\": 1,\n",
			"  ~     \"amount\": 100,\n",
			"  -     \"card\": \"4242\",\n",
			"  ~     \"k\\u001b[2J\": \"\\u009b31m\"\n",
			"\nattempted request (conflict #" + conflict + ", fp:",
			"  ~     \"amount\": 500,\n",
			"  +     \"note\": \"retry\"\n",
			"\n      \"tool\": \"charge-card\",\n",
		} {
			require.Contains(t, out, want)
		}
		require.NotContains(t, out, "\x1b", "no escape reaches the terminal")
		require.NotContains(t, out, "\u009b")
		require.NotContains(t, out, "warning")
	})

	t.Run("JSON", func(t *testing.T) {
		code, out, errOut := run("conflicts", "show", id, "--reveal", "--reason", "for the incident", "-o", "json", "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		require.NotContains(t, out, "\u009b")
		var rev struct {
			OperationID int64 `json:"operation_id"`
			ConflictID  int64 `json:"conflict_id"`
			Original    struct {
				Request       json.RawMessage `json:"request"`
				Fingerprinted bool            `json:"fingerprinted"`
			} `json:"original"`
			Differences []struct {
				Path, Kind          string
				Original, Attempted json.RawMessage
			} `json:"differences"`
			Audit struct {
				Outcome string `json:"outcome"`
				Seq     int64  `json:"audit_seq"`
			} `json:"audit"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rev))
		require.Equal(t, conflict, strconv.FormatInt(rev.ConflictID, 10))
		require.True(t, rev.Original.Fingerprinted)
		var original map[string]any
		require.NoError(t, json.Unmarshal(rev.Original.Request, &original))
		require.Equal(t, "charge-card", original["tool"])
		require.Len(t, rev.Differences, 5)
		require.Equal(t, "/intent/k\x1b[2J", rev.Differences[3].Path, "exact in JSON")
		require.Equal(t, "succeeded", rev.Audit.Outcome)
		require.Positive(t, rev.Audit.Seq)
	})

	t.Run("ViewerIsRefusedAndAudited", func(t *testing.T) {
		viewer := dbtest.NewPerson(t, d, "viewer", "*")
		before := auditCount(t, d)
		code, out, errOut := run("conflicts", "show", id, "--reveal", "--reason", "curious", "--config", personConfig(t, viewer, ""))
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, "denied reveal of conflict #"+conflict+" on "+id)
		require.Contains(t, errOut, "may not reveal")
		require.NotContains(t, out, "4242")
		require.Equal(t, before+1, auditCount(t, d))
	})

	t.Run("ReadOnlyContextRevealsNothing", func(t *testing.T) {
		before := auditCount(t, d)
		code, _, errOut := run("conflicts", "show", id, "--reveal", "--reason", "x", "--config", personConfig(t, operator, "    read_only: true\n"))
		require.Equal(t, ExitUsage, code)
		require.Contains(t, errOut, "read-only")
		require.Equal(t, before, auditCount(t, d))
	})

	t.Run("RecordedBeforeTheMigration", func(t *testing.T) {
		var old string
		require.NoError(t, d.Admin.QueryRow(t.Context(), `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, intent)
SELECT tenant, tool, key, id, '1', decode(repeat('ee', 32), 'hex'), fingerprint, 'worker-0', NULL
FROM opsdesk.operations WHERE key = 'cli-1' RETURNING id::text`).Scan(&old))
		code, out, errOut := run("conflicts", "show", id, "--conflict", old, "--reveal", "--reason", "old one", "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, out, "differences: no differences to compute: the attempted request is not recorded: conflict "+old+
			" predates migration 00019")
		require.Contains(t, out, "\nattempted request (conflict #"+old+", fp:")
		require.Contains(t, out, "): not recorded: conflict "+old+" predates migration 00019")
		require.True(t, strings.Contains(out, "\noriginal request (operation "+id+", fp:") && strings.Contains(out, `"amount": 100,`))
	})
}

// One-tenant operators and admins name operations and conflicts they do
// not see, or no conflict at all, and give reasons the store cannot keep:
// refused with an error that says why, and nothing of either request is
// shown. What the command can tell before the reveal (a record or a
// conflict it cannot see) is not audited, as a listing is not; what only
// the database can refuse is audited.
func TestConflictsShowHostile(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	acmeID, acmeConflict := libraryConflict(t, d, "acme", "cli-a", `{"amount":100,"card":"4242"}`, `{"amount":500,"card":"4242"}`)
	globexID, globexConflict := libraryConflict(t, d, "globex", "cli-g", `{"amount":7,"card":"1111"}`, `{"amount":8,"card":"1111"}`)
	reveal := func(args ...string) []string {
		return append(append([]string{"conflicts", "show"}, args...), "--reveal")
	}
	for _, level := range []string{"operator", "admin"} {
		cfg := personConfig(t, dbtest.NewPerson(t, d, level, "acme"), "")
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{reveal(globexID, "--reason", "why"), ExitFailure, "no operation " + globexID + " (or not visible to this role)"},
			{reveal(acmeID, "--conflict", globexConflict, "--reason", "why"), ExitUsage,
				"conflict #" + globexConflict + " is not one of operation " + acmeID + "'s (#" + acmeConflict + ")"},
			{reveal(acmeID, "--conflict", "9223372036854775807", "--reason", "why"), ExitUsage, "is not one of operation"},
			{reveal(acmeID, "--conflict", "-9223372036854775808", "--reason", "why"), ExitUsage, "conflicts are numbered from 1"},
			{reveal(acmeID, "--conflict", "9223372036854775808", "--reason", "why"), ExitUsage, "out of range"},
			{reveal("0", "--reason", "why"), ExitUsage, `"0" is not an operation number`},
			{reveal("-1", "--reason", "why"), ExitUsage, "unknown shorthand flag"},
			{reveal("9223372036854775807", "--reason", "why"), ExitFailure, "no operation 9223372036854775807"},
			{reveal("../"+acmeID, "--reason", "why"), ExitUsage, "is not an operation number"},
			{reveal(acmeID, "--reason", "\t\u3000\n"), ExitUsage, "--reveal needs --reason"},
		} {
			what := fmt.Sprintf("%s: %q", level, tc.args)
			before := auditCount(t, d)
			code, out, errOut := run(append(tc.args, "--config", cfg)...)
			require.Equal(t, tc.code, code, "%s: %s", what, errOut)
			require.Contains(t, errOut, tc.want, what)
			require.NotContains(t, out+errOut, "4242", what)
			require.NotContains(t, out+errOut, "1111", what)
			require.Equal(t, before, auditCount(t, d), "%s: audited", what)
		}

		// A NUL the store cannot keep: an error, nothing written.
		before := auditCount(t, d)
		code, out, errOut := run(append(reveal(acmeID, "--reason", "why\x00not"), "--config", cfg)...)
		require.Equal(t, ExitFailure, code, "%s: %s", level, errOut)
		require.NotContains(t, out, "4242", level)
		require.Equal(t, before, auditCount(t, d), "%s: a NUL reason was audited", level)

		// 32 MiB: refused by the store, its refusal audited (bounded), and
		// the message bounded too.
		code, out, errOut = run(append(reveal(acmeID, "--reason", strings.Repeat("x", 32<<20)), "--config", cfg)...)
		require.Equal(t, ExitFailure, code, level)
		require.Contains(t, errOut, "failed reveal of conflict #"+acmeConflict, level)
		require.Contains(t, errOut, "the reason is limited to 2000 bytes", level)
		require.Less(t, len(errOut), 4<<10, level)
		require.NotContains(t, out, "4242", level)
		require.Equal(t, before+1, auditCount(t, d), "%s: the refusal is audited once", level)

		// Control characters in the reason: revealed, none echoed raw.
		code, out, errOut = run(append(reveal(acmeID, "--reason", "INC-1 \x1b[2J\u009b31m"), "--config", cfg)...)
		require.Equal(t, ExitOK, code, "%s: %s", level, errOut)
		require.Contains(t, out, `"card": "4242"`, level)
		require.NotContains(t, out+errOut, "\x1b", level)
		require.NotContains(t, out+errOut, "\u009b", level)
	}
}
