// Package exporter reports the operation store's state to Prometheus: what
// the console shows (stuck records by tool, the oldest stuck age,
// unreviewed conflicts, deferrals that came due, expired records,
// unfinished purges, audit chain heads and their verification) and what
// doctor warns of (the logins that can bypass the database), read at each
// scrape through internal/storeview's queries under a time budget. A slow
// or unreachable store never makes a scrape hang or fail: it answers with
// what it read in time, and says so.
package exporter

import (
	"context"
	"errors"
	"fmt"
	"github.com/opsdesk/opsdesk/internal/audited"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

// DefaultBudget bounds a scrape when Config.Budget is zero.
const DefaultBudget = 5 * time.Second

// Config configures an Exporter.
type Config struct {
	// Pool reads the store; a viewer's role is enough, and a one-tenant
	// viewer's exporter reports that tenant only. Its statement timeout
	// should not exceed Budget, so that the server stops what a scrape
	// gave up on.
	Pool *pgxpool.Pool
	// StuckAfter is the console's stuck_after: how long past its lease
	// expiry a pending record must be to count as stuck.
	StuckAfter time.Duration
	// TenantLabels adds a tenant label to the per-tool metrics.
	TenantLabels bool
	// Budget bounds each scrape (DefaultBudget when zero). A Prometheus
	// scrape timeout below it shortens it.
	Budget time.Duration
	// VerifyPool, with VerifyEvery, makes RunVerification verify every
	// audit chain the role sees as opsdesk audit verify does: it reads
	// whole chains in one statement, so its pool must not have a short
	// statement timeout.
	VerifyPool  audit.TxBeginner
	VerifyEvery time.Duration
	// Logf receives what went wrong (a read that failed, a verification
	// that did not run); nil discards it.
	Logf func(format string, args ...any)
}

// ConfigurePool sets up a pool for the scrapes: named in
// pg_stat_activity, every statement bounded by the budget (so that the
// server stops what a scrape gave up on), and no JIT: the scrapes'
// statements read little, but the planner cannot tell how many tools
// the store has and may cost them high enough to compile them, seconds
// of JIT for milliseconds of reading.
func ConfigurePool(cfg *pgxpool.Config, budget time.Duration) {
	if budget <= 0 {
		budget = DefaultBudget
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "opsdesk exporter"
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(budget.Milliseconds(), 10)
	cfg.ConnConfig.RuntimeParams["jit"] = "off"
	// A scrape's five reads side by side, and a ping for /healthz.
	cfg.MaxConns = 6
}

// Exporter serves the store's metrics. It is a prometheus.Collector, and
// Handler serves it over HTTP with /metrics and /healthz.
type Exporter struct {
	cfg    Config
	view   *storeview.Store
	descs  descs
	static *prometheus.Registry // the process's own metrics

	errors atomic.Int64 // reads that failed or ran out of budget
	// reached is when a scrape or a ping last reached the store (Unix
	// nanoseconds; 0: never).
	reached atomic.Int64

	mu       sync.Mutex
	verified map[string]verification // by tenant; nil until one ran
}

// verification is the last verification of one chain.
type verification struct {
	ok bool
	at time.Time
}

// New returns an Exporter over cfg.Pool. It does no I/O.
func New(cfg Config) *Exporter {
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	e := &Exporter{
		cfg:    cfg,
		view:   storeview.New(cfg.Pool, storeview.Config{StuckAfter: cfg.StuckAfter, StatementTimeout: cfg.Budget}),
		descs:  newDescs(cfg.TenantLabels),
		static: prometheus.NewRegistry(),
	}
	e.static.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return e
}

// Describe sends the descriptions of every metric Collect may send.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) { e.descs.describe(ch) }

// Collect reads the store within the budget and sends its metrics.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Budget)
	defer cancel()
	e.collect(ctx, ch)
}

// Handler serves /metrics (the store's metrics and the process's) and
// /healthz.
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", e.serveMetrics)
	mux.HandleFunc("GET /healthz", e.serveHealth)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprint(w, "opsdesk exporter: the operation store's metrics at /metrics, health at /healthz\n")
	})
	return mux
}

// scrapeTimeoutHeader is where Prometheus says how long it waits.
const scrapeTimeoutHeader = "X-Prometheus-Scrape-Timeout-Seconds"

// serveMetrics answers a scrape within the budget, or within nine tenths
// of the scraper's own timeout when that is shorter: an answer after the
// scraper gave up would be no answer at all.
func (e *Exporter) serveMetrics(w http.ResponseWriter, r *http.Request) {
	budget := e.cfg.Budget
	if s, err := strconv.ParseFloat(r.Header.Get(scrapeTimeoutHeader), 64); err == nil && s > 0 && s < budget.Seconds() {
		budget = time.Duration(s * 0.9 * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(r.Context(), budget)
	defer cancel()
	// A registry per scrape carries the scrape's context to Collect.
	reg := prometheus.NewRegistry()
	reg.MustRegister(boundScrape{e: e, ctx: ctx})
	promhttp.HandlerFor(prometheus.Gatherers{e.static, reg}, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      logger{e.cfg.Logf},
	}).ServeHTTP(w, r)
}

// boundScrape is the Exporter bound to one scrape's context.
type boundScrape struct {
	e   *Exporter
	ctx context.Context
}

func (s boundScrape) Describe(ch chan<- *prometheus.Desc) { s.e.Describe(ch) }
func (s boundScrape) Collect(ch chan<- prometheus.Metric) { s.e.collect(s.ctx, ch) }

// logger is promhttp's error log.
type logger struct{ logf func(string, ...any) }

func (l logger) Println(v ...any) { l.logf("%s", strings.TrimSuffix(fmt.Sprintln(v...), "\n")) }

// healthFresh is how recent a scrape that reached the store must be for
// /healthz to answer without a ping of its own.
const healthFresh = 10 * time.Second

// serveHealth answers 200 when the last scrape, or else a ping, reached
// the store, and 503 when neither did.
func (e *Exporter) serveHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if at := e.reached.Load(); at != 0 && time.Since(time.Unix(0, at)) < healthFresh {
		_, _ = fmt.Fprintln(w, "ok: the last scrape reached the store")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), min(e.cfg.Budget, 2*time.Second))
	defer cancel()
	if err := e.view.Ping(ctx); err != nil {
		e.cfg.Logf("healthz: %v", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintln(w, "unavailable: the store does not answer (the exporter's log says why)")
		return
	}
	e.reached.Store(time.Now().UnixNano())
	_, _ = fmt.Fprintln(w, "ok: the store answers")
}

// RunVerification verifies the audit chains now and every VerifyEvery
// until ctx ends; without VerifyPool or VerifyEvery it returns at once.
func (e *Exporter) RunVerification(ctx context.Context) {
	if e.cfg.VerifyPool == nil || e.cfg.VerifyEvery <= 0 {
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		e.verify(ctx)
		timer.Reset(e.cfg.VerifyEvery)
	}
}

// verify runs one verification and keeps each chain's result. A chain a
// verification saw before and this one does not is gone (chains are
// append-only, never dropped): it fails.
func (e *Exporter) verify(ctx context.Context) {
	rep, err := audit.Verify(ctx, e.cfg.VerifyPool, audit.VerifyOpts{})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logf("verify the audit chains: %v", err)
		}
		return
	}
	if rep.Problem != "" {
		e.cfg.Logf("verify the audit chains: %s", rep.Problem)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	last := e.verified
	e.verified = make(map[string]verification, len(rep.Chains))
	for _, c := range rep.Chains {
		e.verified[c.Tenant] = verification{ok: c.Break == nil, at: rep.At}
		if c.Break != nil {
			e.cfg.Logf("audit chain %s does not verify: %s", audited.TenantName(c.Tenant), c.Break.Reason)
		}
	}
	for tenant := range last {
		if _, ok := e.verified[tenant]; !ok {
			e.verified[tenant] = verification{ok: false, at: rep.At}
			e.cfg.Logf("audit chain %s, verified before, is gone", audited.TenantName(tenant))
		}
	}
}

// verifications copies the last verification's results.
func (e *Exporter) verifications() map[string]verification {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.verified)
}

// labelValue makes stored text a label value: label values must be UTF-8
// (a database in SQL_ASCII may hold anything but NUL); the exposition
// format escapes the rest.
func labelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// errBudget marks a read the budget cut short.
var errBudget = errors.New("the scrape's time budget ran out")
