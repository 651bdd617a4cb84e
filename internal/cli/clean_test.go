package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// terminalControls are bytes that drive a terminal: ESC (sequences), BEL,
// CR (overwrites the line) and U+009B (a one-character CSI) as UTF-8.
var terminalControls = []string{"\x1b", "\x07", "\r", "\u009b"}

func requireClean(t *testing.T, what, s string) {
	t.Helper()
	for _, c := range terminalControls {
		require.NotContains(t, s, c, "%s: %q", what, s)
	}
}

// TestCommandsPrintStoredTextClean: identities and owners are written by
// services; whatever a service role stored reaches no terminal raw
// through any command's text, and JSON keeps the exact values.
func TestCommandsPrintStoredTextClean(t *testing.T) {
	t.Parallel()
	_, d := storeConfig(t)
	const (
		tenant = "ac\x1b]0;pwned\x07me"
		tool   = "charge\u009b2Jcard"
		key    = "ord\r-1\x1b[2K"
		owner  = "worker\x1b[31m\u009b1m\r"
	)
	id := stuckRecord(t, d, tenant, tool, key, "external_unknown", owner)
	operator := dbtest.NewPerson(t, d, "operator", tenant)
	cfg := personConfig(t, operator, "")

	for _, args := range [][]string{
		{"ops", "list"},
		{"ops", "show", id},
		{"ops", "get", "--tenant", tenant, "--tool", tool, "--key", key},
		{"ops", "get", "--tenant", tenant, "--tool", tool, "--key", key + "\x1b[1m"}, // absent
		{"doctor"},
		{"resolve", id, "--as", "not-executed", "--reason", "x", "--expect-version", "9", "--no-lookup"}, // refused
		{"resolve", id, "--as", "not-executed", "--reason", "x"},                                         // needs --no-lookup
		{"resolve", id, "--as", "defer", "--snooze", "1h", "--reason", "ask"},
		{"ops", "show", id}, // with the decision
	} {
		_, out, errOut := run(append(args, "--config", cfg)...)
		what := strings.Join(args[:min(2, len(args))], " ")
		requireClean(t, what+" stdout", out)
		requireClean(t, what+" stderr", errOut)
		require.NotEmpty(t, out+errOut, args)
	}

	// JSON is exact: the values decode as stored, and the output itself
	// carries no raw control character (JSON escapes them).
	for _, args := range [][]string{
		{"ops", "show", id, "-o", "json"},
		{"ops", "get", "--tenant", tenant, "--tool", tool, "--key", key, "-o", "json"},
	} {
		code, out, errOut := run(append(args, "--config", cfg)...)
		require.Equal(t, ExitOK, code, errOut)
		requireClean(t, strings.Join(args, " "), out)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		require.Equal(t, []any{tenant, tool, key, owner}, []any{got["tenant"], got["tool"], got["key"], got["owner"]})
	}
	code, out, errOut := run("ops", "list", "-o", "json", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	requireClean(t, "ops list -o json", out)
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &items))
	require.Len(t, items, 1)
	require.Equal(t, owner, items[0]["owner"])
}

// TestShownCutsOnACharacter: stored text is cut before it is cleaned, on
// a character boundary, saying how much it left out and how to see it.
func TestShownCutsOnACharacter(t *testing.T) {
	t.Parallel()
	s := "\x1b[31m" + strings.Repeat("é", 300) // 605 bytes
	got := shown(s, 256, "opsdesk ops show 7 -o json prints it whole.")
	require.Equal(t, "\uFFFD[31m"+strings.Repeat("é", 125)+" … 350 more bytes not shown. opsdesk ops show 7 -o json prints it whole.", got)
	require.Equal(t, "short", shown("short", 256, "never said"))
	require.Equal(t, "ab … 1 more bytes not shown.", shown("abc", 2, ""))
}
