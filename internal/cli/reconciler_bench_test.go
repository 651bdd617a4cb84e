package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/reconcile/auto"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// Issue 23 §1's measurements of opsdesk reconciler (docs/benchmarks.md,
// make bench-reconciler). Each runs the built binary as a process,
// `opsdesk reconciler -o json` connecting as a login granted the level
// by `opsdesk access grant NAME --as reconciler --all-tenants`, against
// the throw-away PostgreSQL of the test run and the demo's simulated
// provider, whose ledger is the ground truth every record is checked
// against afterwards.
//
// OPSDESK_BENCH_RECONCILER_RECORDS (default 1,000), _INTERVAL (5s),
// _RATE (100), _CONCURRENCY (8) and _MAX_ERROR_RATE (0.2) are the
// command's --interval, --rate, --concurrency and --max-error-rate (the
// defaults are the command's own).

type reconcilerBench struct {
	d          *dbtest.DB
	provider   *demo.Provider
	admin, rec *dbtest.Person
	adminCfg   string
	records    int
	args       []string
	maxErrRate float64
}

func benchEnv(b *testing.B, name, def string) string {
	if v := os.Getenv("OPSDESK_BENCH_RECONCILER_" + name); v != "" {
		return v
	}
	return def
}

// newReconcilerBench makes a store, the provider, an admin who allowed
// charge-card on both answers, and a login with no level that an admin
// then grants the reconciler level through the command.
func newReconcilerBench(b *testing.B) *reconcilerBench {
	b.Helper()
	s := &reconcilerBench{d: dbtest.New(b)}
	var err error
	s.records, err = strconv.Atoi(benchEnv(b, "RECORDS", "1000"))
	require.NoError(b, err)
	s.maxErrRate, err = strconv.ParseFloat(benchEnv(b, "MAX_ERROR_RATE", strconv.FormatFloat(auto.DefaultMaxErrorRate, 'g', -1, 64)), 64)
	require.NoError(b, err)
	s.args = []string{"--interval", benchEnv(b, "INTERVAL", defaultReconcilerInterval.String()),
		"--rate", benchEnv(b, "RATE", strconv.FormatFloat(auto.DefaultRate, 'g', -1, 64)),
		"--concurrency", benchEnv(b, "CONCURRENCY", strconv.Itoa(auto.DefaultConcurrency)),
		"--max-error-rate", strconv.FormatFloat(s.maxErrRate, 'g', -1, 64)}
	s.provider, err = demo.StartProvider(demo.ProviderConfig{Pool: dbtest.New(b).Service})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.provider.Close() })
	s.admin = dbtest.NewPerson(b, s.d, "admin", "*")
	s.adminCfg = s.catalog(b, s.admin, s.provider.URL())
	s.rec = dbtest.NewPerson(b, s.d, "")
	code, out, errOut := run("access", "grant", s.rec.Role, "--as", "reconciler", "--all-tenants", "--reason", "issue 23 benchmark",
		"--config", s.adminCfg)
	require.Equal(b, ExitOK, code, errOut)
	require.Contains(b, out, s.rec.Role+" is reconciler of every tenant")
	code, _, errOut = run("reconciler", "allow", "charge-card", "--verdicts", "found,not_found", "--reason", "issue 23 benchmark",
		"--config", s.adminCfg)
	require.Equal(b, ExitOK, code, errOut)
	return s
}

// catalog writes the demo's catalog (charge-card: auto_reconcile [found,
// not_found]) connecting as p, its lookups at providerURL.
func (s *reconcilerBench) catalog(b *testing.B, p *dbtest.Person, providerURL string) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "config.yaml")
	require.NoError(b, demo.WriteCatalog(path, demo.CatalogParams{DSN: p.DSN, ProviderURL: providerURL, Lease: demo.DefaultLease}))
	return path
}

// reconcilerProcess is a running `opsdesk reconciler -o json` and the
// reports of its passes.
type reconcilerProcess struct {
	cmd    *exec.Cmd
	errOut syncBuffer
	mu     sync.Mutex
	passes []auto.Report
	ended  chan error // the decoder's end
}

func (s *reconcilerBench) start(b *testing.B, bin, providerURL string) *reconcilerProcess {
	b.Helper()
	args := append([]string{"reconciler", "-o", "json", "--config", s.catalog(b, s.rec, providerURL)}, s.args...)
	p := &reconcilerProcess{cmd: exec.Command(bin, args...), ended: make(chan error, 1)}
	p.cmd.Stderr = &p.errOut
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, p.cmd.Start())
	b.Logf("started: opsdesk %s", strings.Join(args, " "))
	go func() {
		dec := json.NewDecoder(stdout)
		for {
			var rep auto.Report
			if err := dec.Decode(&rep); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				p.ended <- err
				return
			}
			p.mu.Lock()
			p.passes = append(p.passes, rep)
			p.mu.Unlock()
		}
	}()
	b.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

func (p *reconcilerProcess) reports() []auto.Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.passes)
}

// stop sends SIGTERM and requires a clean exit.
func (p *reconcilerProcess) stop(b *testing.B) []auto.Report {
	b.Helper()
	require.NoError(b, p.cmd.Process.Signal(syscall.SIGTERM))
	// Its standard output ends when it exits; Wait closes the pipe, so
	// only once everything on it is read.
	select {
	case err := <-p.ended:
		require.NoError(b, err)
	case <-time.After(2 * time.Minute):
		b.Fatal("the reconciler did not stop within 2 min of SIGTERM")
	}
	require.NoError(b, p.cmd.Wait(), p.errOut.String())
	return p.reports()
}

// pending counts the store's pending charge-card records.
func (s *reconcilerBench) pending(b *testing.B) int {
	b.Helper()
	var n int
	require.NoError(b, s.d.Admin.QueryRow(b.Context(),
		`SELECT count(*) FROM opsdesk.operations WHERE tool = 'charge-card' AND state = 'pending'`).Scan(&n))
	return n
}

// checked is each record against the provider's ledger and the audit trail.
type checked struct {
	decided, wrong, stillStuck int
	found, notFound            int
	// latency is each decided record's time from becoming stuck (its
	// lease running out) to its decision (its audit record), by the
	// database's clock.
	latency []time.Duration
	// problems names records whose audit is not one record by the
	// reconciler's login.
	problems []string
}

// check reads every outage record: decided ones must be as the ledger says,
// by one succeeded audit record whose role is the reconciler's login.
func (s *reconcilerBench) check(b *testing.B, truth []demo.Abandoned) checked {
	b.Helper()
	audits := map[int64][]string{}
	at := map[int64]time.Time{}
	rows, err := s.d.Admin.Query(b.Context(), `
SELECT operation_id, role, at FROM opsdesk.audit WHERE operation_id IS NOT NULL AND outcome = 'succeeded'
UNION ALL
SELECT operation_id, role, at FROM opsdesk.audit_queue WHERE operation_id IS NOT NULL AND outcome = 'succeeded'`)
	require.NoError(b, err)
	for rows.Next() {
		var id int64
		var role string
		var t time.Time
		require.NoError(b, rows.Scan(&id, &role, &t))
		audits[id] = append(audits[id], role)
		at[id] = t
	}
	require.NoError(b, rows.Err())

	var c checked
	for _, a := range truth {
		var (
			id         int64
			state, ref string
			stuckAt    time.Time
		)
		require.NoError(b, s.d.Admin.QueryRow(b.Context(), `
SELECT id, opsdesk.view_state(o), coalesce(result_ref, ''), lease_expires_at
FROM opsdesk.operations o WHERE tenant = $1 AND tool = $2 AND key = $3`, a.Tenant, a.Tool, a.Key).Scan(&id, &state, &ref, &stuckAt))
		want, acted := s.provider.Effect(demo.ProviderIdentity(a.Identity))
		switch state {
		case "stuck", "pending":
			c.stillStuck++
			if len(audits[id]) != 0 {
				c.problems = append(c.problems, fmt.Sprintf("%s: undecided with %d succeeded audit records", a.Key, len(audits[id])))
			}
			continue
		case "completed":
			c.found++
			if !acted || ref != want {
				c.wrong++
			}
		case "released":
			c.notFound++
			if acted {
				c.wrong++
			}
		default:
			c.wrong++
		}
		c.decided++
		if len(audits[id]) != 1 || audits[id][0] != s.rec.Role {
			c.problems = append(c.problems, fmt.Sprintf("%s: %s with audit records by %v", a.Key, state, audits[id]))
			continue
		}
		c.latency = append(c.latency, at[id].Sub(stuckAt))
	}
	sort.Slice(c.latency, func(i, j int) bool { return c.latency[i] < c.latency[j] })
	return c
}

// verifyAudit seals what is queued and requires audit verify to pass.
func (s *reconcilerBench) verifyAudit(b *testing.B) {
	b.Helper()
	code, _, errOut := run("audit", "seal", "--config", s.adminCfg)
	require.Equal(b, ExitOK, code, errOut)
	code, out, errOut := run("audit", "verify", "--config", s.adminCfg)
	require.Equal(b, ExitOK, code, "audit verify: %s%s", out, errOut)
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// passLine is one pass's report, for the log.
func passLine(i int, rep auto.Report) string {
	var skip []string
	for _, r := range auto.SkipReasons {
		if n := rep.Skipped[r]; n > 0 {
			skip = append(skip, fmt.Sprintf("%s %d", r, n))
		}
	}
	return fmt.Sprintf("pass %d: listed %d, asked %d, provider errors %d, provider down %v, decided found %d not found %d, skipped [%s], took %dms",
		i+1, rep.Listed, rep.Asked, rep.ProviderErrors[demo.ToolChargeCard], rep.ProviderDown, rep.Decided[bulk.Found],
		rep.Decided[bulk.NotFound], strings.Join(skip, ", "), rep.TookMS)
}

// BenchmarkReconcilerOutage: the reconciler runs; an outage then leaves
// OPSDESK_BENCH_RECONCILER_RECORDS charges stuck through the demo's own
// workers (demo.Outage, seed 23: about half died after the provider
// acted, the others before calling it); the run ends once none is
// pending (or after 10 minutes). Every record must be decided as the
// provider's ledger says, each by one audit record of the reconciler's
// login, and audit verify must pass. It reports the time from each
// record's lease running out to its decision.
func BenchmarkReconcilerOutage(b *testing.B) {
	bin := buildOpsdesk(b)
	for range b.N {
		b.StopTimer()
		s := newReconcilerBench(b)
		loadBefore := loadAverage()
		p := s.start(b, bin, s.provider.URL())
		b.StartTimer()
		start := time.Now()
		truth, err := demo.Outage(b.Context(), demo.OutageConfig{Pool: s.d.Service, Provider: s.provider, Records: s.records,
			Seed: 23, Lease: time.Second})
		require.NoError(b, err)
		outage := time.Since(start)
		deadline := time.Now().Add(10 * time.Minute)
		for s.pending(b) > 0 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		took := time.Since(start)
		b.StopTimer()
		passes := p.stop(b)
		loadAfter := loadAverage()

		for i, rep := range passes {
			b.Log(passLine(i, rep))
		}
		s.verifyAudit(b)
		c := s.check(b, truth)
		require.Zero(b, c.wrong, "records decided against the provider's ledger")
		require.Empty(b, c.problems, "records whose audit is not one record by the reconciler's login")
		require.Len(b, c.latency, c.decided)
		within := 0
		for _, l := range c.latency {
			if l <= 30*time.Second {
				within++
			}
		}
		b.ReportMetric(float64(c.decided), "decided")
		b.ReportMetric(float64(c.stillStuck), "left")
		b.ReportMetric(quantile(c.latency, 0.5).Seconds(), "p50-s")
		b.ReportMetric(quantile(c.latency, 0.95).Seconds(), "p95-s")
		b.ReportMetric(quantile(c.latency, 1).Seconds(), "max-s")
		b.Logf("%d stuck charges (the ledger: %d acted): outage %s, all decided or left by %s over %d passes (%s); decided %d "+
			"(found %d, not found %d), wrong 0, left to people %d; stuck to decided p50 %s, p95 %s, max %s, %d of %d within 30 s; "+
			"load average before %s, after %s", len(truth), s.provider.Effects(), outage.Round(time.Millisecond),
			took.Round(time.Millisecond), len(passes), strings.Join(s.args, " "), c.decided, c.found, c.notFound, c.stillStuck,
			quantile(c.latency, 0.5).Round(time.Millisecond), quantile(c.latency, 0.95).Round(time.Millisecond),
			quantile(c.latency, 1).Round(time.Millisecond), within, c.decided, loadBefore, loadAfter)
	}
}

// flakyProvider is the demo's provider behind a proxy that fails a share
// of the lookups, drawn by a seeded generator: a 503 (no answer), an
// answer cut off mid-body (no answer), or a found answer without a
// reference (an error), in turn; the others reach the provider.
func flakyProvider(b *testing.B, p *demo.Provider, share float64) string {
	b.Helper()
	target, err := url.Parse(p.URL())
	require.NoError(b, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(23, 2))
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fail := rng.Float64() < share
		kind := n % 3
		if fail {
			n++
		}
		mu.Unlock()
		switch {
		case !fail:
			proxy.ServeHTTP(w, r)
		case kind == 0:
			http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
		case kind == 1:
			// An answer cut off mid-body: the connection closed without
			// an answer would be a GET the client's transport asks again.
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{\"fou")
				_ = buf.Flush()
				_ = conn.Close()
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"found":true}`)
		}
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkReconcilerHalfDownProvider: the charges of an outage are stuck
// before the reconciler starts, and the provider fails
// OPSDESK_BENCH_RECONCILER_FAIL (default 0.5) of its lookups. The
// reconciler runs OPSDESK_BENCH_RECONCILER_PASSES passes (default 3). A
// pass whose failures pass --max-error-rate must decide nothing; whatever
// a pass decided must be as the ledger says, audited once by the
// reconciler's login; audit verify must pass.
func BenchmarkReconcilerHalfDownProvider(b *testing.B) {
	bin := buildOpsdesk(b)
	share, err := strconv.ParseFloat(benchEnv(b, "FAIL", "0.5"), 64)
	require.NoError(b, err)
	want, err := strconv.Atoi(benchEnv(b, "PASSES", "3"))
	require.NoError(b, err)
	for range b.N {
		b.StopTimer()
		s := newReconcilerBench(b)
		truth, err := demo.Outage(b.Context(), demo.OutageConfig{Pool: s.d.Service, Provider: s.provider, Records: s.records,
			Seed: 23, Lease: time.Second})
		require.NoError(b, err)
		time.Sleep(1100 * time.Millisecond) // the leases run out
		flaky := flakyProvider(b, s.provider, share)
		loadBefore := loadAverage()
		p := s.start(b, bin, flaky)
		b.StartTimer()
		deadline := time.Now().Add(20 * time.Minute)
		for len(p.reports()) < want && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		b.StopTimer()
		passes := p.stop(b)
		loadAfter := loadAverage()
		require.GreaterOrEqual(b, len(passes), want)

		decided, heldBack, downPasses := 0, 0, 0
		for i, rep := range passes {
			b.Log(passLine(i, rep))
			n := rep.Decided[bulk.Found] + rep.Decided[bulk.NotFound]
			decided += n
			failed := rep.ProviderErrors[demo.ToolChargeCard]
			if float64(failed) > s.maxErrRate*float64(rep.Asked) {
				downPasses++
				require.Zero(b, n, "pass %d: %d of %d lookups failed, over %v, yet it decided", i+1, failed, rep.Asked, s.maxErrRate)
				require.Equal(b, []string{demo.ToolChargeCard}, rep.ProviderDown, "pass %d", i+1)
				heldBack += rep.Skipped[auto.SkipProviderDown]
			}
		}
		s.verifyAudit(b)
		c := s.check(b, truth)
		require.Zero(b, c.wrong, "records decided against the provider's ledger")
		require.Empty(b, c.problems, "records whose audit is not one record by the reconciler's login")
		require.Equal(b, decided, c.decided, "the passes' decisions and the store's")
		b.ReportMetric(float64(c.decided), "decided")
		b.ReportMetric(float64(downPasses), "paused-passes")
		b.Logf("%d stuck charges, the provider failing %.0f%% of lookups (%s): %d passes, %d of them over --max-error-rate "+
			"(deciding nothing: %d records held back as provider_down), decided %d (found %d, not found %d), wrong 0, still stuck %d; "+
			"load average before %s, after %s", len(truth), 100*share, strings.Join(s.args, " "), len(passes), downPasses, heldBack,
			c.decided, c.found, c.notFound, c.stillStuck, loadBefore, loadAfter)
	}
}

// loadAverage is the machine's load average (1, 5 and 15 minutes), as
// uptime prints it.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}
