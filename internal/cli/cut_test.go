package cli

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ui"
)

// textBound is more than any command's text output about one record needs
// (a handful of fields of at most fieldBytes), and far less than the
// values a service may store.
const textBound = 32 << 10

// TestTextOutputCutsHugeStoredValues: a service login writes values of
// any size where the store does not bound them (an owner, a result
// reference, a tool name), full of escape sequences. Every command's text
// output stays bounded and says where it cut and how to see the value
// whole; JSON keeps every value whole and exact (found by review: a 1 MiB
// owner made ops list print 50 MB, and ops show printed a 32 MiB
// result_ref).
func TestTextOutputCutsHugeStoredValues(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	ctx := t.Context()
	const mib = 1 << 20
	hostile := "\x1b]0;pwned\x07\u009b2J\r"
	owner := "worker\x1b[31m" + strings.Repeat("o", mib) + hostile
	// About 900 bytes: tenant, tool and key are indexed together, and a
	// decision's evidence summary, at most 2000 bytes, names the tool.
	tool := "charge" + strings.Repeat("\x1b[1mt", 150) + hostile
	key := "ord-1\x1b[2K" + strings.Repeat("k", 200)
	id := stuckRecord(t, d, "acme", tool, key, "local", owner)
	// A conflicting attempt by a worker of the same kind.
	_, err := d.Service.Exec(ctx, `INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
VALUES ('acme', $1, $2, $3, $4, decode(repeat('0b', 32), 'hex'), decode(repeat('0a', 32), 'hex'), $5)`, tool, key, id, "2"+hostile, owner)
	require.NoError(t, err)
	_, err = d.Service.Exec(ctx, `UPDATE opsdesk.operations SET conflict_count = 1, last_conflict_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	// A completed record whose result reference is 32 MiB.
	ref := "T-" + strings.Repeat("r", 32*mib)
	var completed int64
	require.NoError(t, d.Service.QueryRow(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner, attempt,
    leased_at, lease_expires_at, completed_at, expires_at, result_ref)
VALUES ('acme', 'create-ticket', 'big-ref', '1', decode(repeat('0c', 32), 'hex'), 'local', 'completed', 'succeeded', 'worker-1', 1,
    now(), now(), now(), now() + interval '1 day', 'T-' || repeat('r', $1)) RETURNING id`, 32*mib).Scan(&completed))
	big := strconv.FormatInt(completed, 10)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	cfg := personConfig(t, operator, "")

	text := func(t *testing.T, want string, args ...string) string {
		t.Helper()
		code, out, errOut := run(append(args, "--config", cfg)...)
		require.Equal(t, ExitOK, code, errOut)
		what := strings.Join(args[:2], " ")
		require.Less(t, len(out), textBound, "%s printed %d bytes", what, len(out))
		require.Less(t, len(errOut), textBound, "%s printed %d bytes on stderr", what, len(errOut))
		requireClean(t, what, out+errOut)
		require.Contains(t, out, "more bytes not shown. "+want, "%s does not say what it cut", what)
		return out
	}
	object := func(t *testing.T, args ...string) map[string]any {
		t.Helper()
		code, out, errOut := run(append(args, "-o", "json", "--config", cfg)...)
		require.Equal(t, ExitOK, code, errOut)
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &v))
		return v
	}
	opsShow := "opsdesk ops show " + id + " -o json prints it whole."

	t.Run("OpsList", func(t *testing.T) {
		out := text(t, opsShow, "ops", "list")
		require.Contains(t, out, "worker�[31m"+strings.Repeat("o", cellBytes-len("worker\x1b[31m"))+" … 1,048,")
		code, out, errOut := run("ops", "list", "-o", "json", "--config", cfg)
		require.Equal(t, ExitOK, code, errOut)
		var items []map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &items))
		require.Len(t, items, 5)
		owners := map[any]any{}
		for _, it := range items {
			owners[it["tool"]] = it["owner"]
		}
		require.Equal(t, owner, owners[tool], "exact in JSON")
	})

	t.Run("OpsShowAndGet", func(t *testing.T) {
		out := text(t, opsShow, "ops", "show", id)
		require.Regexp(t, `\nowner +worker�\[31mo{100}`, out)
		require.Contains(t, out, "by worker�[31m"+strings.Repeat("o", cellBytes-len("worker\x1b[31m"))+" … 1,048,", "the conflict's owner cut too")
		require.Contains(t, out, " unreviewed\n", "a cut owner leaves the rest of the line")
		text(t, opsShow, "ops", "get", "--tenant", "acme", "--tool", tool, "--key", key)
		v := object(t, "ops", "show", id)
		require.Equal(t, []any{tool, key, owner}, []any{v["tool"], v["key"], v["owner"]})
		require.Equal(t, owner, v["conflicts"].([]any)[0].(map[string]any)["owner"])

		out = text(t, "opsdesk ops show "+big+" -o json prints it whole.", "ops", "show", big)
		require.Contains(t, out, "T-rrrr")
		require.Contains(t, out, ui.Cut(ref, fieldBytes, "")[fieldBytes-10:], "the reference's first fieldBytes")
		require.Equal(t, ref, object(t, "ops", "show", big)["result_ref"], "whole in JSON")
	})

	t.Run("ConflictsShow", func(t *testing.T) {
		out := text(t, "opsdesk conflicts show "+id+" -o json prints it whole.", "conflicts", "show", id)
		require.Contains(t, out, " unreviewed\n")
		v := object(t, "conflicts", "show", id)
		c := v["conflicts"].([]any)[0].(map[string]any)
		require.Equal(t, []any{owner, "2" + hostile, tool}, []any{c["owner"], c["tool_version"], v["tool"]})
	})

	t.Run("ResolveThenAuditList", func(t *testing.T) {
		out := text(t, opsShow, "resolve", id, "--as", "defer", "--snooze", "1h", "--reason", "ask the provider")
		require.Contains(t, out, "decided: defer on "+id+" (acme/charge�[1mt")
		text(t, "the same audit list with -o json prints it whole.", "audit", "list")
		v := object(t, "audit", "list")
		require.Equal(t, tool, v["records"].([]any)[0].(map[string]any)["tool"], "exact in JSON")
		out = text(t, opsShow, "ops", "show", id)
		require.Contains(t, out, "defer until ")
		require.Contains(t, out, ": ask the provider (audit #")
	})

	t.Run("RetentionReview", func(t *testing.T) {
		text(t, "opsdesk retention review -o json prints it whole.", "retention", "review")
	})
}

// TestConflictRevealOfHugeRequests: a service may raise MaxIntentBytes
// and store requests of any size, with a key of a megabyte and escape
// sequences in it. The reveal's text cuts every line (and the differing
// field's path) and says how to see them whole; its JSON holds both
// requests and the differing values exactly (found by review: a reveal
// of a 32 MiB request printed 64 MB).
func TestConflictRevealOfHugeRequests(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	cfg := personConfig(t, operator, "")
	const mib = 1 << 20
	bigKey := "k\u001b[2J" + strings.Repeat("k", mib)
	intent := func(amount int, value string, extra string) string {
		key, err := json.Marshal(bigKey)
		require.NoError(t, err)
		v, err := json.Marshal(value)
		require.NoError(t, err)
		return `{"amount":` + strconv.Itoa(amount) + `,` + string(key) + `:` + string(v) + extra + `}`
	}
	original := intent(100, "\u009b31m"+strings.Repeat("a", 4*mib), "")
	attempted := intent(500, "\u009b32m"+strings.Repeat("b", 4*mib), `,"note":"retry"`)
	id, conflict := libraryConflictUpTo(t, d, 16*mib, "acme", "huge-1", original, attempted)
	more := "opsdesk conflicts show " + id + " --conflict " + conflict + " --reveal --reason … -o json prints it whole."

	code, out, errOut := run("conflicts", "show", id, "--reveal", "--reason", "how large?", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Less(t, len(out), textBound, "%d bytes", len(out))
	requireClean(t, "conflicts show --reveal", out)
	require.Contains(t, out, "3 differing fields")
	require.Contains(t, out, "  ~ \"/intent/k\\u001b[2Jkkk", "the path, as a JSON string")
	require.Contains(t, out, "  + /intent/note")
	require.Contains(t, out, "  ~     \"amount\": 500,\n")
	require.Equal(t, 3, strings.Count(out, "more bytes not shown. "+more), "the path, and its line in each request:\n%s", out)

	code, out, errOut = run("conflicts", "show", id, "--reveal", "--reason", "the whole requests", "-o", "json", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	requireClean(t, "conflicts show --reveal -o json", out)
	var rev struct {
		Original, Attempted struct {
			Request json.RawMessage `json:"request"`
		}
		Differences []struct {
			Path                string
			Original, Attempted json.RawMessage
		} `json:"differences"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rev))
	request := func(raw json.RawMessage) any {
		var v struct {
			Intent json.RawMessage `json:"intent"`
		}
		require.NoError(t, json.Unmarshal(raw, &v))
		var intent any
		require.NoError(t, json.Unmarshal(v.Intent, &intent))
		return intent
	}
	var want any
	require.NoError(t, json.Unmarshal([]byte(original), &want))
	require.Equal(t, want, request(rev.Original.Request), "the original request, exactly")
	require.NoError(t, json.Unmarshal([]byte(attempted), &want))
	require.Equal(t, want, request(rev.Attempted.Request), "the attempted request, exactly")
	require.Len(t, rev.Differences, 3)
	var value string
	require.NoError(t, json.Unmarshal(rev.Differences[1].Attempted, &value))
	require.Equal(t, "/intent/"+bigKey, rev.Differences[1].Path)
	require.Equal(t, "\u009b32m"+strings.Repeat("b", 4*mib), value)
}
