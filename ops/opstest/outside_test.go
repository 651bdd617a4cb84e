package opstest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops/opstest"
)

// TestOutsideModule runs the tests of internal/outside, a service in a
// module of its own (example.com/ticketsvc) written from the README's
// examples alone: it installs the schema with opsmigrate, tests on a fresh
// store per test with opstest, and serves POST /tickets through idemhttp.
// Being another module, it sees only what opsdesk exports: an API that
// needs an internal package fails here. Its tests use this binary's server
// (OPSDESK_TEST_DSN, set by TestMain), as a service's CI would.
func TestOutsideModule(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs the outside module's tests")
	cmd := exec.CommandContext(t.Context(), goTool, "test", "-count=1", "./...")
	cmd.Dir = filepath.Join("..", "..", "internal", "outside")
	cmd.Env = append(os.Environ(), opstest.EnvDSN+"="+os.Getenv(opstest.EnvDSN))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test in %s:\n%s", cmd.Dir, out)
	require.Regexp(t, `(?m)^ok\s+example\.com/ticketsvc\s`, string(out))
}
