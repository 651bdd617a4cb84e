package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/lookuptest"
)

// TestResolveTakesTheProvidersReference: resolve confirms a found record
// under the reference the provider sent, a number's text byte for byte,
// and the database holds a decision to that text: the value a float64
// made of it contradicts the lookup. An answer naming a member twice, or
// whose reference cannot be recorded as sent, gives no reference (the
// lookup line says why, in a line, raw bytes cleaned): confirming needs
// the person's --result-ref, and releasing still contradicts the found
// status.
func TestResolveTakesTheProvidersReference(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("contexts:\n  test:\n    dsn: "+strconv.Quote(operator.DSN)+"\n"+
		"tools:\n  charge-card:\n    effect: external_unknown\n    lookup:\n"+
		"      url: "+strconv.Quote(lookuptest.Serve(t))+"\n      result_ref: "+lookuptest.Pointer+"\n"), 0o600))
	for _, a := range lookuptest.Answers {
		t.Run(a.Key, func(t *testing.T) {
			t.Parallel()
			id := stuckRecord(t, d, "acme", "charge-card", a.Key, "external_unknown", "worker-1")
			if a.Ref == "" {
				code, _, errOut := run("resolve", id, "--as", "completed", "--reason", "the provider has it", "--config", cfg)
				require.Equal(t, ExitUsage, code, errOut)
				require.Contains(t, errOut, ": found (no reference: ")
				require.Contains(t, errOut, a.Says)
				require.Contains(t, errOut, "--as completed needs --result-ref")
				require.Less(t, len(errOut), 1000, "never the answer itself")
				require.False(t, strings.ContainsAny(errOut, "\x00\x1b"), "printed raw: %q", errOut)

				code, _, errOut = run("resolve", id, "--as", "not-executed", "--reason", "no reference", "--config", cfg)
				require.Equal(t, ExitFailure, code, errOut)
				require.Contains(t, errOut, "the lookup says found, which contradicts not-executed: deciding needs override")
				require.Equal(t, "pending", state(t, d, id))
				return
			}
			if a.Rounded != "" {
				code, _, errOut := run("resolve", id, "--as", "completed", "--result-ref", a.Rounded, "--reason", "as rounded", "--config", cfg)
				require.Equal(t, ExitFailure, code, errOut)
				require.Contains(t, errOut, "--result-ref "+strconv.Quote(a.Rounded)+" contradicts the lookup, which found reference "+
					strconv.Quote(a.Ref))
				require.Contains(t, errOut, "deciding needs override", "the database checks against the provider's text")
				require.Equal(t, "pending", state(t, d, id))
			}
			code, out, errOut := run("resolve", id, "--as", "completed", "--reason", "the provider has it", "--config", cfg)
			require.Equal(t, ExitOK, code, errOut)
			require.Contains(t, errOut, ": found, reference "+a.Ref+"\n")
			require.Contains(t, out, "now completed")
			var ref string
			require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT result_ref FROM opsdesk.operations WHERE id = $1`, id).Scan(&ref))
			require.Equal(t, a.Ref, ref)
		})
	}
}
