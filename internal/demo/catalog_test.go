package demo_test

import (
	"cmp"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/ops"
)

// TestCatalogLoads is not parallel: it clears the environment config.Load
// reads.
func TestCatalogLoads(t *testing.T) {
	for _, k := range []string{"CONFIG", "CONTEXT", "DSN", "READ_DSN", "LIBPQ_ENV", "READ_ONLY", "REFRESH", "STUCK_AFTER"} {
		t.Setenv(config.EnvPrefix+"_"+k, "")
		require.NoError(t, os.Unsetenv(config.EnvPrefix+"_"+k))
	}
	path := filepath.Join(t.TempDir(), "opsdesk.yaml")
	dsn := `postgres://postgres@/opsdesk?host=/tmp/opsdesk-pg-1&port=5432&sslmode=disable`
	require.NoError(t, demo.WriteCatalog(path, demo.CatalogParams{DSN: dsn, ProviderURL: "http://127.0.0.1:4242", Lease: 2 * time.Second}))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "it holds a DSN")

	cfg, err := config.Load(config.Options{File: path})
	require.NoError(t, err)
	require.Equal(t, "demo", cfg.Context.Name)
	require.Equal(t, dsn, cfg.Context.DSN)
	require.Equal(t, time.Second, cfg.Context.Refresh)

	policies := demo.Policies(2 * time.Second)
	require.Len(t, cfg.Tools, len(policies))
	for name, p := range policies {
		tool, ok := cfg.Tools[name]
		require.True(t, ok, name)
		require.Equal(t, string(p.Effect), tool.Effect, name)
		require.Equal(t, p.Lease, tool.Lease, name)
		// The catalog says what the fleet's library does.
		want := p.Retention
		if want == 0 {
			want = ops.DefaultRetention
		}
		require.Equal(t, want, tool.Retention, name)
		require.Equal(t, string(cmp.Or(p.AfterExpiry, ops.Reexecute)), cmp.Or(tool.AfterExpiry, "reexecute"), name)
		require.NotEmpty(t, tool.Runbook, name)
		if p.Effect == ops.EffectLocal {
			require.Nil(t, tool.Lookup, name)
			continue
		}
		require.NotNil(t, tool.Lookup, name)
		require.Equal(t, "http://127.0.0.1:4242/lookup/{tenant}/{tool}/{provider_key}", tool.Lookup.URL)
		require.Equal(t, 2*time.Second, tool.Lookup.Timeout)
		require.Equal(t, "/ref", tool.Lookup.ResultRef)
	}
	require.Equal(t, 3*time.Minute, cfg.Tools[demo.ToolCreateNote].Retention, "notes expire within the demo")
	require.Equal(t, 10*time.Minute, cfg.Tools[demo.ToolCreateNote].RetryWindow)
	require.Contains(t, cfg.Tools[demo.ToolChargeCard].Runbook, "saw the answer.\nRun the lookup first.", "runbooks keep their lines")
}
