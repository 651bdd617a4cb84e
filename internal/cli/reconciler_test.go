package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile/auto"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// reconcilerStore is an outage store with an admin who allowed
// charge-card on both answers and a reconciler's login.
type reconcilerStore struct {
	*outageStore
	admin, rec *dbtest.Person
	adminCfg   string
}

func newReconcilerStore(t *testing.T, n int) *reconcilerStore {
	t.Helper()
	s := &reconcilerStore{outageStore: newOutageStore(t, n)}
	s.admin = dbtest.NewPerson(t, s.d, "admin", "*")
	s.rec = dbtest.NewPerson(t, s.d, "reconciler", "*")
	s.adminCfg = s.config(t, s.admin)
	code, out, errOut := run("reconciler", "allow", "charge-card", "--verdicts", "found,not-found", "--reason", "payments agreed", "--config", s.adminCfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "reconcilers may decide charge-card on found, not_found")
	return s
}

func (s *reconcilerStore) machineAudits(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, s.d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit WHERE role = $1`, s.rec.Role).Scan(&n))
	return n
}

// One pass decides every stuck charge as the provider's ledger says, each
// with its own audit record under the reconciler's login.
func TestReconcilerOnceOnTheDemoProvider(t *testing.T) {
	t.Parallel()
	s := newReconcilerStore(t, 40)
	code, out, errOut := run("reconciler", "--once", "-o", "json", "--config", s.config(t, s.rec))
	require.Equal(t, ExitOK, code, errOut)
	var rep auto.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, len(s.truth), rep.Listed)
	require.Equal(t, len(s.truth), rep.Decided[bulk.Found]+rep.Decided[bulk.NotFound], "%+v", rep.Skipped)
	require.Empty(t, rep.ProviderDown)

	s.requireDecidedAsTheLedger(t)
	rows, err := s.d.Admin.Query(t.Context(), `SELECT reason, details->>'batch', details->>'reconciler', evidence_digest FROM opsdesk.audit WHERE role = $1`, s.rec.Role)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var reason, batch, marked, digest string
		require.NoError(t, rows.Scan(&reason, &batch, &marked, &digest))
		require.Equal(t, rep.BatchID, batch)
		require.Equal(t, "true", marked)
		require.Contains(t, reason, "auto_reconcile for charge-card")
		require.Contains(t, reason, digest)
		require.Contains(t, reason, "batch "+batch)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(s.truth), n)

	// Nothing is left: the next pass decides nothing, and says so.
	code, out, errOut = run("reconciler", "--once", "--config", s.config(t, s.rec))
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "reconciler: 0 stuck listed, 0 looked up; decided: found 0, not found 0; skipped: none")
}

// Paused, a reconciler decides nothing; only an admin pauses and resumes.
func TestReconcilerPauseAndResume(t *testing.T) {
	t.Parallel()
	s := newReconcilerStore(t, 6)
	operator := dbtest.NewPerson(t, s.d, "operator", "*")
	code, _, errOut := run("reconciler", "pause", "--reason", "let me", "--config", s.config(t, operator))
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "may not pause the reconciler")
	code, _, errOut = run("reconciler", "pause", "--reason", "provider INC-7", "--config", s.adminCfg)
	require.Equal(t, ExitOK, code, errOut)

	before := s.states(t)
	recCfg := s.config(t, s.rec)
	code, out, errOut := run("reconciler", "--once", "--config", recCfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "paused by "+s.admin.Role+" (provider INC-7): nothing decided")
	require.Equal(t, before, s.states(t))
	require.Zero(t, s.machineAudits(t))

	code, out, errOut = run("reconciler", "status", "--config", recCfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "reconcilers: paused, set by "+s.admin.Role)
	require.Contains(t, out, "charge-card: store allows [found, not_found], catalog asks [found, not_found]")

	code, _, errOut = run("reconciler", "resume", "--reason", " ", "--config", s.adminCfg)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "white space is no reason")
	code, _, errOut = run("reconciler", "resume", "--reason", "INC-7 closed", "--config", s.adminCfg)
	require.Equal(t, ExitOK, code, errOut)
	code, out, errOut = run("reconciler", "--once", "--config", recCfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Regexp(t, `decided: found \d+, not found \d+; skipped: none`, out)
	require.Equal(t, len(s.truth), s.machineAudits(t))
}

// A provider failing half its lookups gets nothing decided: its definite
// answers neither.
func TestReconcilerHalfDownProvider(t *testing.T) {
	t.Parallel()
	s := newReconcilerStore(t, 20)
	target, err := url.Parse(s.provider.URL())
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var calls atomic.Int64
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1)%2 == 0 {
			http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, demo.WriteCatalog(cfg, demo.CatalogParams{DSN: s.rec.DSN, ProviderURL: flaky.URL, Lease: 200 * time.Millisecond}))

	before := s.states(t)
	code, out, errOut := run("reconciler", "--once", "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "provider of charge-card: 10 lookups failed or gave no answer, over --max-error-rate: nothing of it decided this pass")
	require.Contains(t, out, "decided: found 0, not found 0")
	require.Equal(t, before, s.states(t))
	require.Zero(t, s.machineAudits(t))
}

// A dry run prints what it would decide and writes nothing.
func TestReconcilerDryRun(t *testing.T) {
	t.Parallel()
	s := newReconcilerStore(t, 8)
	before := s.states(t)
	code, out, errOut := run("reconciler", "--once", "--dry-run", "--config", s.config(t, s.rec))
	require.Equal(t, ExitOK, code, errOut)
	require.Regexp(t, `would decide: found \d+, not found \d+; skipped: none`, out)
	require.Equal(t, before, s.states(t))
	require.Zero(t, s.machineAudits(t))
}

// Without the store's leave, the catalog's auto_reconcile decides nothing;
// a person's login decides nothing either (the database refuses it).
func TestReconcilerNeedsTheStoreAndTheLevel(t *testing.T) {
	t.Parallel()
	s := newReconcilerStore(t, 6)
	code, _, errOut := run("reconciler", "allow", "charge-card", "--verdicts", "none", "--reason", "owners withdrew", "--config", s.adminCfg)
	require.Equal(t, ExitOK, code, errOut)
	before := s.states(t)
	code, out, errOut := run("reconciler", "--once", "--config", s.config(t, s.rec))
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "not allowed 6")
	require.Contains(t, out, "opsdesk reconciler allow charge-card")
	require.Equal(t, before, s.states(t))

	// Allowed again, a viewer running the command is refused by the
	// database when the pass starts its run, and the pass stops.
	code, _, errOut = run("reconciler", "allow", "charge-card", "--verdicts", "found", "--verdicts", "not_found", "--reason", "back", "--config", s.adminCfg)
	require.Equal(t, ExitOK, code, errOut)
	viewer := dbtest.NewPerson(t, s.d, "viewer", "*")
	code, out, errOut = run("reconciler", "--once", "--concurrency", "1", "--config", s.config(t, viewer))
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "may not start a run: deciding needs opsdesk_operator or opsdesk_reconciler")
	for k, st := range s.states(t) {
		was := before[k]
		require.Equal(t, was[:2], st[:2], "%s is unchanged (its refusal is audited)", k)
	}
}

func TestReconcilerBadInput(t *testing.T) {
	t.Parallel()
	s := newReconcilerStore(t, 2)
	recCfg := s.config(t, s.rec)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--interval", "0s"}, "--interval 0s"},
		{[]string{"--interval", "2h"}, "give 1s to 1h"},
		{[]string{"--rate", "0"}, "--rate 0"},
		{[]string{"--rate", "NaN"}, "--rate NaN"},
		{[]string{"--max-error-rate", "1.5"}, "--max-error-rate 1.5"},
		{[]string{"--max-error-rate", "0"}, "--max-error-rate 0"},
		{[]string{"--concurrency", "0"}, "--concurrency 0"},
		{[]string{"--max-records", "100000"}, "--max-records 100000"},
		{[]string{"-o", "yaml"}, "table, json"},
		{[]string{"extra"}, ""},
		{[]string{"allow", "charge-card", "--verdicts", "failed", "--reason", "x"}, `--verdicts "failed"`},
		{[]string{"allow", "charge-card", "--verdicts", "none,found", "--reason", "x"}, "none alone"},
		{[]string{"allow", "charge-card", "--reason", "x"}, "--verdicts is required"},
		{[]string{"allow", "charge-card", "--verdicts", "found"}, "--reason is required"},
		{[]string{"pause"}, "--reason is required"},
		{[]string{"pause", "--reason", "\t\u3000"}, "white space is no reason"},
	} {
		code, _, errOut := run(append(append([]string{"reconciler"}, c.args...), "--config", recCfg)...)
		require.Equal(t, ExitUsage, code, "%q: %s", c.args, errOut)
		require.Contains(t, errOut, c.says, "%q", c.args)
	}
	// The database refuses what the command lets through: a NUL in a
	// reason never reaches the allowlist.
	code, _, _ := run("reconciler", "allow", "charge-card", "--verdicts", "found", "--reason", "x\x00y", "--config", s.adminCfg)
	require.NotEqual(t, ExitOK, code)
	code, out, errOut := run("reconciler", "status", "-o", "json", "--config", recCfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, `"charge-card": [`)
	require.NotContains(t, strings.ToLower(out), `"paused": true`)

	// A catalog without auto_reconcile is a usage error for the command.
	code, _, errOut = run("reconciler", "--once", "--config", writeCatalogWithout(t, s))
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "no tool in the catalog names auto_reconcile")
}

func writeCatalogWithout(t *testing.T, s *reconcilerStore) string {
	t.Helper()
	path := s.config(t, s.rec)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := strings.ReplaceAll(string(b), "    auto_reconcile: [found, not_found]\n", "")
	require.NotEqual(t, string(b), out)
	require.NoError(t, os.WriteFile(path, []byte(out), 0o600))
	return path
}

// Run continuously, the reconciler passes every interval, obeys a pause
// and a resume within one cycle, and stops cleanly when its context ends
// (as on SIGINT or SIGTERM: the root command's context).
func TestReconcilerRunsUntilStopped(t *testing.T) {
	t.Parallel()
	s := newReconcilerStore(t, 5)
	code, _, errOut0 := run("reconciler", "pause", "--reason", "before it starts", "--config", s.adminCfg)
	require.Equal(t, ExitOK, code, errOut0)
	cfg, err := config.Load(config.Options{File: s.config(t, s.rec)})
	require.NoError(t, err)
	w := &writer{cfg: cfg, pool: s.rec.Pool, view: storeview.New(s.rec.Pool, storeview.Config{}), desk: newDesk(s.rec.Pool, cfg)}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	opts := reconcilerOptions{Interval: time.Second, Concurrency: 2, Rate: 50, MaxErrorRate: 0.2, MaxRecords: 100,
		MetricsAddr: "127.0.0.1:0", Output: "table"}
	go func() { done <- runReconciler(ctx, w, opts, &out, &errOut) }()

	require.Eventually(t, func() bool { return strings.Contains(out.String(), "paused by") }, 10*time.Second, 20*time.Millisecond)
	require.Zero(t, s.machineAudits(t))
	code, _, errOut0 = run("reconciler", "resume", "--reason", "go", "--config", s.adminCfg)
	require.Equal(t, ExitOK, code, errOut0)
	require.Eventually(t, func() bool { return s.machineAudits(t) == len(s.truth) }, 10*time.Second, 50*time.Millisecond)

	addr := "http://" + strings.TrimSuffix(strings.Fields(strings.SplitN(errOut.String(), "metrics on http://", 2)[1])[0], "/metrics")
	// The decisions are in the store before their pass ends and reports
	// them: the metrics follow at the pass's end.
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := http.Get(addr + "/metrics")
		require.NoError(t, err)
		body, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		return strings.Contains(string(body), `opsdesk_reconciler_decided_total{tool="charge-card",verdict=`)
	}, 10*time.Second, 50*time.Millisecond, "the pass that decided reported")
	require.Contains(t, string(body), "opsdesk_reconciler_cycle_duration_seconds_count")
	require.Contains(t, string(body), "opsdesk_reconciler_paused 0")
	require.Contains(t, string(body), `opsdesk_reconciler_deciding{tool="charge-card"} 1`)
	require.Contains(t, string(body), "opsdesk_reconciler_last_pass_timestamp_seconds")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the reconciler did not stop within 10s of its context ending")
	}
	require.Contains(t, errOut.String(), "reconciler: stopped")
}

// doctor refuses auto_reconcile where it cannot work, saying what to fix,
// and names what the store's allowlist does not let.
func TestDoctorOnAutoReconcile(t *testing.T) {
	t.Parallel()
	s := newReconcilerStore(t, 1)
	dir := t.TempDir()
	for name, c := range map[string]struct{ tool, says string }{
		"NoLookup": {"  create-note:\n    effect: local\n    auto_reconcile: [found]\n",
			"tools.create-note: auto_reconcile needs a lookup"},
		"UnknownVerdict": {"  charge-card:\n    effect: external_unknown\n    lookup: {url: 'http://127.0.0.1:1/{key}', result_ref: /ref}\n    auto_reconcile: [found, failed]\n",
			`auto_reconcile names "failed"`},
	} {
		path := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(path, []byte("current_context: a\ncontexts:\n  a:\n    dsn: "+strconv.Quote(s.rec.DSN)+"\ntools:\n"+c.tool), 0o600))
		code, _, errOut := run("doctor", "--config", path)
		require.NotEqual(t, ExitOK, code, name)
		require.Contains(t, errOut, c.says, name)
	}

	code, out, errOut := run("doctor", "--config", s.config(t, s.rec))
	require.Equal(t, ExitOK, code, errOut+out)
	require.Contains(t, out, "reconciler: read, and decide what the reconciler's allowlist lets a lookup settle")
	require.Contains(t, out, "the store lets every catalog auto_reconcile: charge-card [found, not_found]")
	code, _, errOut = run("reconciler", "allow", "charge-card", "--verdicts", "found", "--reason", "only found", "--config", s.adminCfg)
	require.Equal(t, ExitOK, code, errOut)
	_, out, _ = run("doctor", "--config", s.config(t, s.rec))
	require.Contains(t, out, "does not let: charge-card on not_found (an admin runs opsdesk reconciler allow")
}

// As a process, SIGTERM stops the reconciler cleanly between passes: exit
// 0, saying so.
func TestReconcilerStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	s := newReconcilerStore(t, 3)
	bin := buildOpsdesk(t)
	cmd := exec.Command(bin, "reconciler", "--interval", "1s", "--config", s.config(t, s.rec))
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	waitFor(t, time.Minute, "the first pass", func() bool { return strings.Contains(out.String(), "reconciler: ") })
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, errOut.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the reconciler did not stop within 30s of SIGTERM")
	}
	require.Contains(t, errOut.String(), "reconciler: stopped")
	require.Equal(t, len(s.truth), s.machineAudits(t))
}
