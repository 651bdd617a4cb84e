package opstest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops/opstest"
)

// TestOutsideModule runs the tests of internal/outside, a service in a
// module of its own (example.com/ticketsvc) written from the README's
// examples alone: it installs the schema with opsmigrate, tests on a fresh
// store per test with opstest, and serves POST /tickets through idemhttp.
// Being another module, it sees only what opsdesk exports: an API that
// needs an internal package fails here. Its tests run with no
// OPSDESK_TEST_DSN in their environment, as on a newcomer's machine: opstest
// starts its own throw-away cluster for them.
func TestOutsideModule(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs the outside module's tests")
	cmd := exec.CommandContext(t.Context(), goTool, "test", "-count=1", "./...")
	cmd.Dir = filepath.Join("..", "..", "internal", "outside")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, opstest.EnvDSN+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test in %s:\n%s", cmd.Dir, out)
	require.Regexp(t, `(?m)^ok\s+example\.com/ticketsvc\s`, string(out))
}
