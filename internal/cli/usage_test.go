package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A mistyped command is a usage error that suggests the command meant, in
// every command group, as cobra and gh do: not "accepts 0 arg(s)".
func TestMistypedCommandSuggests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		suggest string
	}{
		{[]string{"opz"}, "ops"},
		{[]string{"ops", "lst"}, "list"},
		{[]string{"audit", "verfy"}, "verify"},
		{[]string{"conflicts", "shwo"}, "show"},
		{[]string{"retention", "reviw"}, "review"},
		{[]string{"access", "grnt"}, "grant"},
	} {
		code, out, errOut := run(tc.args...)
		require.Equal(t, ExitUsage, code, "%q: %s", tc.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, "unknown command", tc.args)
		require.Contains(t, errOut, "Did you mean this?\n", tc.args)
		require.Contains(t, errOut, "\n  "+tc.suggest+"\n", tc.args)
		require.NotContains(t, errOut, "accepts 0 arg", tc.args)
	}

	t.Run("NothingLikeIt", func(t *testing.T) {
		t.Parallel()
		code, _, errOut := run("ops", "zzzzzz")
		require.Equal(t, ExitUsage, code)
		require.Contains(t, errOut, `unknown command "zzzzzz" for "opsdesk ops"`)
		require.NotContains(t, errOut, "Did you mean")
		// Stored-looking text in the word is cleaned like any error.
		code, _, errOut = run("ops", "l\x1b[2Jst")
		require.Equal(t, ExitUsage, code)
		require.NotContains(t, errOut, "\x1b")
	})

	t.Run("GroupsStillSayWhatTheyNeed", func(t *testing.T) {
		t.Parallel()
		code, _, errOut := run("ops")
		require.Equal(t, ExitUsage, code)
		require.Contains(t, errOut, "ops needs a command")
	})
}

// resolve says what is missing rather than "accepts 1 arg(s)".
func TestResolveSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	code, _, errOut := run("resolve", "--by-lookup", "--reason", "x")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--by-lookup needs --filter")
	code, _, errOut = run("resolve", "--reason", "x")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "resolve needs an operation number")
	require.NotContains(t, errOut, "accepts 1 arg")
}

// A --snooze beyond what the database takes and a blank --reason are
// usage errors found before any connection: the DSN here reaches nothing,
// so a command that got past the checks would fail with exit 1.
func TestUsageErrorsBeforeTheDatabase(t *testing.T) {
	t.Parallel()
	dsn := "host=" + t.TempDir() + " user=x dbname=y connect_timeout=1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resolve", "1", "--as", "defer", "--snooze", "17520h", "--reason", "r"}, "at most a year"},
		{[]string{"resolve", "1", "--as", "defer", "--snooze", "8761h", "--reason", "r"}, "at most a year"},
		{[]string{"resolve", "1", "--as", "defer", "--snooze", "-1h", "--reason", "r"}, "give how long from now"},
		{[]string{"resolve", "1", "--as", "defer", "--snooze", "0s", "--reason", "r"}, "needs --snooze"},
		{[]string{"resolve", "1", "--as", "defer", "--snooze", "1h", "--reason", "\t"}, "--reason is blank"},
		{[]string{"resolve", "1", "--as", "defer", "--snooze", "1h", "--reason", " \n\u3000\ufeff\u200b"}, "--reason is blank"},
		{[]string{"resolve", "1", "--as", "not-executed", "--reason", "\t"}, "--reason is blank"},
		{[]string{"resolve", "1", "--as", "not-executed", "--reason", ""}, "--reason is required"},
		{[]string{"conflicts", "ack", "1", "--reason", "\t"}, "--reason is blank"},
		{[]string{"ops", "reveal", "1", "--reason", "\t"}, "--reason is blank"},
		{[]string{"access", "grant", "alice", "--as", "viewer", "--tenant", "acme", "--reason", "\t"}, "--reason is blank"},
		{[]string{"access", "revoke", "alice", "--reason", "\t"}, "--reason is blank"},
		{[]string{"retention", "hold", "1", "--reason", "\t"}, "--reason is blank"},
		{[]string{"retention", "release", "1", "--reason", " "}, "--reason is blank"},
		{[]string{"retention", "purge", "--yes", "--reason", "\t"}, "--reason is blank"},
		{[]string{"conflicts", "show", "1", "--reveal", "--reason", "\t"}, "--reveal needs --reason"},
	} {
		code, _, errOut := run(append(tc.args, "--dsn", dsn)...)
		require.Equal(t, ExitUsage, code, "%q: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
	// A year to the day is what the database takes.
	code, _, errOut := run("resolve", "1", "--as", "defer", "--snooze", "8760h", "--reason", "r", "--dsn", dsn)
	require.Equal(t, ExitFailure, code, errOut)
}

// keygen makes the key's directory, as the README's
// --out ~/.config/opsdesk/audit.key needs on a fresh machine: owner only.
func TestAuditKeygenMakesTheDirectory(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	key := filepath.Join(home, ".config", "opsdesk", "audit.key")
	code, out, errOut := run("audit", "keygen", "--out", key)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "fingerprint")
	for _, dir := range []string{filepath.Dir(key), filepath.Dir(filepath.Dir(key))} {
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), dir)
	}
	fi, err := os.Stat(key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// An existing directory keeps its mode; a file in the way is an error.
	shared := filepath.Join(home, "shared")
	require.NoError(t, os.Mkdir(shared, 0o755))
	code, _, errOut = run("audit", "keygen", "--out", filepath.Join(shared, "k"))
	require.Equal(t, ExitOK, code, errOut)
	fi, err = os.Stat(shared)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	code, _, errOut = run("audit", "keygen", "--out", filepath.Join(key, "k"))
	require.Equal(t, ExitFailure, code, errOut)
}

func TestCounted(t *testing.T) {
	t.Parallel()
	require.Equal(t, "0 records", counted(0, "record"))
	require.Equal(t, "1 record", counted(1, "record"))
	require.Equal(t, "1 chain", counted(int64(1), "chain"))
	require.Equal(t, "2 conflicting attempts", counted(2, "conflicting attempt"))
	require.Equal(t, "1 record was", wereCounted(1, "record"))
	require.Equal(t, "3 records were", wereCounted(3, "record"))
}
