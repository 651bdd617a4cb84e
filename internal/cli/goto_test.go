package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGotoFlag: --goto takes any : command; one the console would refuse
// is a usage error (exit 2) with the command line's own message, before
// any configuration is read or any screen drawn.
func TestGotoFlag(t *testing.T) {
	t.Parallel()
	// No configuration anywhere: a command that passes the check goes on
	// to fail on the configuration, one that does not never gets there.
	none := t.TempDir() + "/none.yaml"
	for arg, want := range map[string]string{
		"frob tool:x":                   `--goto: unknown command "frob": try ops, stuck`,
		"stuck tool:x state:nope":       `unknown state "nope"`,
		"key acme":                      "write :key TENANT/TOOL/KEY",
		"":                              "--goto: no command: write one such as stuck tool:charge-card",
		" \t\n\u3000":                   "--goto: no command",
		"stuck tool:a\x00b":             "--goto: the command contains the control character U+0000 at byte 12",
		"stuck \x1b]0;pwned\x07":        "--goto: the command contains the control character U+001B at byte 6",
		"stuck tool:\xff\xfe":           "--goto: the command is not valid UTF-8",
		strings.Repeat("stuck ", 6<<20): "--goto: the command is 37748736 characters long; a command is at most 1000",
	} {
		code, out, errOut := run("--config", none, "--goto", arg)
		require.Equal(t, ExitUsage, code, "%.40q: %s", arg, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, want, "%.40q", arg)
		require.NotContains(t, errOut, "\x1b", "%.40q", arg)
		require.Less(t, len(errOut), 400, "%.40q: the error repeats the input", arg)
	}

	// A good command is accepted; what stops this run is the missing
	// configuration, not the command.
	for _, arg := range []string{"stuck tool:charge-card tenant:acme", ":conflicts", "audit tenant:''", "retention"} {
		code, _, errOut := run("--config", none, "--goto", arg)
		require.Equal(t, ExitUsage, code)
		require.Contains(t, errOut, "none.yaml", "%q", arg)
		require.NotContains(t, errOut, "--goto", "%q was refused", arg)
	}

	// The flag is the console's: other commands do not take it.
	code, _, errOut := run("ops", "list", "--goto", "stuck")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "unknown flag: --goto")
}
