package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

const sample = `
current_context: prod-eu
contexts:
  prod-eu:
    dsn: postgres://alice:sekrit@db-eu/opsdesk
    read_dsn: postgres://alice@replica-eu/opsdesk
    refresh: 5s
    stuck_after: 1m
  staging:
    dsn: postgres://alice@db-staging/opsdesk
    read_only: true
tools:
  create-ticket:
    effect: local
    runbook: Check the ticket queue first.
  charge-card:
    effect: external_unknown
    lease: 30s
    after_expiry: reject
    retry_window: 48h
    lookup:
      url: http://provider/charges/{tenant}/{key}
      timeout: 2s
`

// isolate points every config location at a fresh directory and clears
// the environment opsdesk reads.
func isolate(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	for _, k := range []string{"CONFIG", "CONTEXT", "DSN", "READ_DSN", "LIBPQ_ENV", "READ_ONLY", "REFRESH", "STUCK_AFTER", "REVEAL_KEYS"} {
		t.Setenv(EnvPrefix+"_"+k, "")
		os.Unsetenv(EnvPrefix + "_" + k)
	}
	if content == "" {
		return ""
	}
	path := filepath.Join(dir, "opsdesk", "config.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("dsn", "", "")
	fs.String("read-dsn", "", "")
	fs.Bool("libpq-env", false, "")
	fs.Bool("read-only", false, "")
	fs.Duration("refresh", 0, "")
	fs.Duration("stuck-after", 0, "")
	require.NoError(t, fs.Parse(args))
	return fs
}

func TestFileIsReadFromXDG(t *testing.T) {
	path := isolate(t, sample)
	cfg, err := Load(Options{Flags: flags(t)})
	require.NoError(t, err)
	require.Equal(t, path, cfg.File)
	require.Equal(t, "prod-eu", cfg.Context.Name)
	require.Equal(t, "postgres://alice:sekrit@db-eu/opsdesk", cfg.Context.DSN)
	require.Equal(t, "postgres://alice@replica-eu/opsdesk", cfg.Context.ReadDSN)
	require.Equal(t, 5*time.Second, cfg.Context.Refresh)
	require.Equal(t, time.Minute, cfg.Context.StuckAfter)
	require.False(t, cfg.Context.ReadOnly)
	require.Equal(t, []string{"prod-eu", "staging"}, cfg.Contexts)
	require.Equal(t, "external_unknown", cfg.Tools["charge-card"].Effect)
	require.Equal(t, 2*time.Second, cfg.Tools["charge-card"].Lookup.Timeout)
	require.Equal(t, "Check the ticket queue first.", cfg.Tools["create-ticket"].Runbook)
	require.Equal(t, "reject", cfg.Tools["charge-card"].AfterExpiry)
	require.Equal(t, 48*time.Hour, cfg.Tools["charge-card"].RetryWindow)
	require.Empty(t, cfg.Tools["create-ticket"].AfterExpiry, "reexecute, the library's default")
}

func TestPrecedenceFlagsOverEnvOverFileOverDefaults(t *testing.T) {
	isolate(t, sample)

	// File over defaults: staging sets read_only, keeps the default refresh.
	cfg, err := Load(Options{Context: "staging"})
	require.NoError(t, err)
	require.True(t, cfg.Context.ReadOnly)
	require.Equal(t, DefaultRefresh, cfg.Context.Refresh)

	// Environment over file.
	t.Setenv("OPSDESK_CONTEXT", "staging")
	t.Setenv("OPSDESK_REFRESH", "7s")
	t.Setenv("OPSDESK_READ_ONLY", "false")
	cfg, err = Load(Options{Flags: flags(t)})
	require.NoError(t, err)
	require.Equal(t, "staging", cfg.Context.Name)
	require.Equal(t, 7*time.Second, cfg.Context.Refresh)
	require.False(t, cfg.Context.ReadOnly)

	// Flags over environment.
	cfg, err = Load(Options{Context: "prod-eu", Flags: flags(t, "--refresh", "9s", "--read-only", "--dsn", "postgres://bob@elsewhere/x")})
	require.NoError(t, err)
	require.Equal(t, "prod-eu", cfg.Context.Name)
	require.Equal(t, 9*time.Second, cfg.Context.Refresh)
	require.True(t, cfg.Context.ReadOnly)
	require.Equal(t, "postgres://bob@elsewhere/x", cfg.Context.DSN)
}

func TestEnvironmentAloneNeedsNoFile(t *testing.T) {
	isolate(t, "")
	t.Setenv("OPSDESK_DSN", "postgres://svc@db/opsdesk")
	cfg, err := Load(Options{})
	require.NoError(t, err)
	require.Empty(t, cfg.File)
	require.Equal(t, "default", cfg.Context.Name)
	require.Equal(t, "postgres://svc@db/opsdesk", cfg.Context.DSN)
	require.Equal(t, DefaultRefresh, cfg.Context.Refresh)
}

func TestOPSDESKCONFIGPointsAtAnotherFile(t *testing.T) {
	isolate(t, "")
	path := filepath.Join(t.TempDir(), "elsewhere.yaml")
	require.NoError(t, os.WriteFile(path, []byte("contexts:\n  only:\n    dsn: postgres://x@y/z\n"), 0o600))
	t.Setenv("OPSDESK_CONFIG", path)
	cfg, err := Load(Options{})
	require.NoError(t, err)
	require.Equal(t, path, cfg.File)
	require.Equal(t, "only", cfg.Context.Name, "a single context needs no selection")
}

func TestErrorsNameTheFileAndKey(t *testing.T) {
	cases := map[string]struct {
		content string
		opts    Options
		want    []string
	}{
		"UnknownTopLevelKey":      {content: "contexts: {a: {dsn: x}}\ncolour: red\n", want: []string{"colour"}},
		"UnknownContextKey":       {content: "contexts:\n  a:\n    dsn: x\n    refesh: 2s\n", want: []string{"refesh"}},
		"UnknownToolKey":          {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    retry: 3\n", want: []string{"retry"}},
		"BadDuration":             {content: "contexts:\n  a:\n    dsn: x\n    refresh: soon\n", want: []string{"refresh", "soon"}},
		"RefreshTooFast":          {content: "contexts:\n  a:\n    dsn: x\n    refresh: 1ms\n", want: []string{"contexts.a.refresh", "minimum"}},
		"MissingDSN":              {content: "contexts:\n  a:\n    refresh: 2s\n", want: []string{"contexts.a.dsn", "OPSDESK_DSN"}},
		"BadEffect":               {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: remote\n", want: []string{"tools.t", "remote"}},
		"UnknownContext":          {content: sample, opts: Options{Context: "prod-us"}, want: []string{"prod-us", "known: prod-eu, staging"}},
		"NoContextSelected":       {content: "contexts:\n  a: {dsn: x}\n  b: {dsn: y}\n", want: []string{"current_context", "--context"}},
		"NotYAML":                 {content: "contexts: [\n", want: []string{"config.yaml"}},
		"BareNumberDuration":      {content: "contexts:\n  a:\n    dsn: x\n    stuck_after: 10\n", want: []string{"stuck_after", "no unit"}},
		"BareNumberLease":         {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lease: 30\n", want: []string{"lease", "no unit"}},
		"UpperCaseContext":        {content: "contexts:\n  Prod:\n    dsn: x\n", want: []string{"contexts.Prod", "lower case"}},
		"DottedToolName":          {content: "contexts: {a: {dsn: x}}\ntools:\n  email.send:\n    effect: local\n", want: []string{"tools.email.send", "no dots"}},
		"BadAfterExpiry":          {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    after_expiry: ignore\n", want: []string{"tools.t", "after_expiry", "ignore"}},
		"LookupNotHTTP":           {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'ftp://p/{key}'}\n", want: []string{"tools.t", "not an http"}},
		"LookupWithoutKey":        {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://p/charges'}\n", want: []string{"tools.t", "{key}"}},
		"LookupBadPointer":        {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://p/{key}', result_ref: id}\n", want: []string{"result_ref", "JSON pointer"}},
		"LookupBadStatus":         {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://p/{key}', found_status: 2000}\n", want: []string{"found_status"}},
		"LookupKeyInHost":         {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://{key}.p/x/{key}'}\n", want: []string{"tools.t", "scheme or the host"}},
		"LookupTenantInUser":      {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://{tenant}@p/{key}'}\n", want: []string{"tools.t", "scheme or the host"}},
		"LookupInScheme":          {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'http{tool}://p/{key}'}\n", want: []string{"tools.t", "scheme or the host"}},
		"LookupInFragment":        {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://p/c?k={key}#{tenant}'}\n", want: []string{"tools.t", "fragment"}},
		"LookupKeyOnlyInFragment": {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://p/c#{key}'}\n", want: []string{"tools.t", "fragment"}},
		"LookupProviderKeyInHost": {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://{provider_key}.p/x'}\n", want: []string{"tools.t", "scheme or the host"}},
		"LookupUnknownName":       {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://p/{id}/{key}'}\n", want: []string{"tools.t", "unknown placeholder {id}"}},
		"LookupRedirectStatus":    {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://p/{key}', not_found_status: 302}\n", want: []string{"not_found_status", "redirect"}},
		"LookupSameStatuses":      {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    lookup: {url: 'https://p/{key}', found_status: 404}\n", want: []string{"both 404"}},
		"AutoReconcileNoLookup":   {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    effect: local\n    auto_reconcile: [found]\n", want: []string{"tools.t", "auto_reconcile needs a lookup"}},
		"AutoReconcileUnknown":    {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    lookup: {url: 'https://p/{key}'}\n    auto_reconcile: [found, no_answer]\n", want: []string{"tools.t", `"no_answer"`, "found, not_found"}},
		"AutoReconcileHyphen":     {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    lookup: {url: 'https://p/{key}'}\n    auto_reconcile: [not-found]\n", want: []string{"tools.t", `"not-found"`}},
		"AutoReconcileTwice":      {content: "contexts: {a: {dsn: x}}\ntools:\n  t:\n    lookup: {url: 'https://p/{key}'}\n    auto_reconcile: [found, found]\n", want: []string{"tools.t", "twice"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := isolate(t, tc.content)
			_, err := Load(tc.opts)
			require.Error(t, err)
			var cfgErr *Error
			require.ErrorAs(t, err, &cfgErr)
			require.Equal(t, path, cfgErr.File)
			require.Contains(t, err.Error(), path)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.NotContains(t, err.Error(), "sekrit")
		})
	}
}

func TestExplicitFileMustExist(t *testing.T) {
	isolate(t, "")
	_, err := Load(Options{File: filepath.Join(t.TempDir(), "missing.yaml")})
	require.ErrorContains(t, err, "missing.yaml")
}

func TestBadEnvironmentValueNamesTheVariable(t *testing.T) {
	path := isolate(t, sample)
	t.Setenv("OPSDESK_REFRESH", "10")
	_, err := Load(Options{})
	require.ErrorContains(t, err, "OPSDESK_REFRESH")
	require.NotContains(t, err.Error(), path, "the file is not at fault")
	t.Setenv("OPSDESK_REFRESH", "")
	t.Setenv("OPSDESK_READ_ONLY", "maybe")
	_, err = Load(Options{})
	require.ErrorContains(t, err, "OPSDESK_READ_ONLY")
}

func TestEveryContextKeyFollowsPrecedence(t *testing.T) {
	isolate(t, "contexts:\n  a:\n    dsn: file-dsn\n    read_dsn: file-read\n    libpq_env: false\n    stuck_after: 1m\n")
	cfg, err := Load(Options{})
	require.NoError(t, err)
	require.Equal(t, "file-read", cfg.Context.ReadDSN)
	require.Equal(t, time.Minute, cfg.Context.StuckAfter)

	t.Setenv("OPSDESK_READ_DSN", "env-read")
	t.Setenv("OPSDESK_STUCK_AFTER", "2m")
	t.Setenv("OPSDESK_LIBPQ_ENV", "true")
	cfg, err = Load(Options{})
	require.NoError(t, err)
	require.Equal(t, "env-read", cfg.Context.ReadDSN)
	require.Equal(t, 2*time.Minute, cfg.Context.StuckAfter)
	require.True(t, cfg.Context.UseLibpqEnv)

	// display_name has no flag: the file, then the environment.
	isolate(t, "contexts:\n  a:\n    dsn: file-dsn\n    display_name: Alice\n")
	cfg, err = Load(Options{})
	require.NoError(t, err)
	require.Equal(t, "Alice", cfg.Context.DisplayName)
	t.Setenv("OPSDESK_DISPLAY_NAME", "Alice Example")
	cfg, err = Load(Options{})
	require.NoError(t, err)
	require.Equal(t, "Alice Example", cfg.Context.DisplayName)

	isolate(t, "contexts:\n  a:\n    dsn: file-dsn\n    read_dsn: file-read\n    libpq_env: false\n    stuck_after: 1m\n")
	cfg, err = Load(Options{Flags: flags(t, "--read-dsn", "flag-read", "--stuck-after", "3m", "--libpq-env=false")})
	require.NoError(t, err)
	require.Equal(t, "flag-read", cfg.Context.ReadDSN)
	require.Equal(t, 3*time.Minute, cfg.Context.StuckAfter)
	require.False(t, cfg.Context.UseLibpqEnv)
}

// A tool whose service records its policy (ops.New) needs only the
// people's parts in the catalog.
func TestToolWithPeoplesPartsOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("contexts: {a: {dsn: x}}\ntools:\n  charge-card:\n    runbook: Call the bank.\n"+
		"    lookup: {url: 'https://p/charges/{key}'}\n"), 0o600))
	cfg, err := Load(Options{File: path})
	require.NoError(t, err)
	require.Equal(t, "Call the bank.", cfg.Tools["charge-card"].Runbook)
	require.Empty(t, cfg.Tools["charge-card"].Effect)
}
