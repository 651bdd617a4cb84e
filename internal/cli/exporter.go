package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/exporter"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

type exporterOptions struct {
	Listen       string
	TenantLabels bool
	VerifyEvery  time.Duration
	Budget       time.Duration
}

// Bounds of the exporter's durations: a budget long enough for a query
// and shorter than any sensible scrape timeout; verifications no more
// often than a full read of the audit trail can afford.
const (
	minExporterBudget = 100 * time.Millisecond
	maxExporterBudget = 2 * time.Minute
	minVerifyEvery    = time.Minute
)

func newExporterCmd(g *globalFlags) *cobra.Command {
	opts := exporterOptions{Budget: exporter.DefaultBudget}
	cmd := &cobra.Command{
		Use:   "exporter --listen ADDR",
		Short: "Serve the store's state as Prometheus metrics (/metrics, /healthz)",
		Long: "Serve the operation store's state for Prometheus at http://ADDR/metrics: records by tool and state,\n" +
			"the oldest stuck age, unreviewed conflicts, deferrals that came due, expired records, unfinished\n" +
			"purges, the audit chains' heads and the logins that can bypass the database (by class, as doctor\n" +
			"lists them), read through the console's queries at every scrape. A viewer\n" +
			"role is enough; a viewer of some tenants reports those only. Each scrape reads within --budget\n" +
			"(or nine tenths of Prometheus's scrape timeout, if shorter) and answers with what it read:\n" +
			"opsdesk_scrape_partial says when some reads ran out of time, opsdesk_store_up when the store did not\n" +
			"answer. /healthz answers 200 when the last scrape or a ping reached the store, 503 otherwise.\n" +
			"With --verify-every it also verifies every audit chain the role sees, as opsdesk audit verify does,\n" +
			"in the background (reading the context's dsn, not read_dsn), and reports each chain's last result.",
		Example: "  opsdesk exporter --listen 127.0.0.1:9187\n" +
			"  opsdesk exporter --context prod-ro --listen :9187 --verify-every 1h --tenant-labels",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd, g)
			if err != nil {
				return err
			}
			// The exporter serves on through a store that does not answer,
			// so a DSN that names none must stop it here.
			if strings.TrimSpace(cfg.Context.DSN) == "" && !cfg.Context.UseLibpqEnv {
				return usagef("context %s: the dsn is blank: give the store's DSN", termtext.CleanLines(cfg.Context.Name))
			}
			return runExporter(cmd.Context(), cfg.Context, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Listen, "listen", "", "address to serve on, such as 127.0.0.1:9187 or :9187 (required)")
	f.BoolVar(&opts.TenantLabels, "tenant-labels", false, "add a tenant label to the per-tool metrics")
	f.DurationVar(&opts.VerifyEvery, "verify-every", 0, "verify the audit chains this often, such as 1h (default: never)")
	f.DurationVar(&opts.Budget, "budget", exporter.DefaultBudget, "the longest a scrape reads the store")
	addGlobalFlags(f, g)
	return cmd
}

func (o exporterOptions) check() error {
	switch {
	case o.Listen == "":
		return usagef("--listen is required: an address such as 127.0.0.1:9187")
	case o.Budget < minExporterBudget || o.Budget > maxExporterBudget:
		return usagef("--budget %v: give %v to %v", o.Budget, minExporterBudget, maxExporterBudget)
	case o.VerifyEvery < 0 || (o.VerifyEvery > 0 && o.VerifyEvery < minVerifyEvery):
		return usagef("--verify-every %v: give %v or more, or leave it out", o.VerifyEvery, minVerifyEvery)
	}
	return nil
}

// runExporter serves the exporter on opts.Listen until ctx ends. A store
// that does not answer yet is no reason to stop: the metrics say it is
// down until it answers. A schema this opsdesk does not know is.
func runExporter(ctx context.Context, c config.Context, opts exporterOptions, stdout, stderr io.Writer) error {
	logf := exporterLog(stderr)
	pool, verifyPool, err := openExporterPools(c, opts)
	if err != nil {
		return err
	}
	defer pool.Close()
	if verifyPool != nil {
		defer verifyPool.Close()
	}
	checkCtx, cancel := context.WithTimeout(ctx, opts.Budget)
	_, err = db.CheckSchema(checkCtx, pool)
	cancel()
	switch {
	case errors.Is(err, db.ErrSchemaBehind) || errors.Is(err, db.ErrSchemaAhead):
		return err
	case err != nil:
		logf("the store does not answer yet (serving opsdesk_store_up 0 until it does): %v", err)
	}
	l, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return usagef("--listen %s: %w", opts.Listen, err)
	}
	exp := newExporter(c, opts, pool, verifyPool, logf)
	fmt.Fprintf(stdout, "opsdesk exporter: serving http://%s/metrics (context %s, budget %v)\n",
		l.Addr(), termtext.CleanLines(c.Name), opts.Budget)
	return serveExporter(ctx, l, exp)
}

// openExporterPools makes the scrapes' pool (the context's read DSN, as
// exporter.ConfigurePool sets it up) and, with --verify-every, the
// verification's (its DSN, without a statement timeout: verification
// reads whole chains in one statement). Neither connects yet.
func openExporterPools(c config.Context, opts exporterOptions) (pool, verifyPool *pgxpool.Pool, err error) {
	poolCfg, err := viewPoolConfig(c)
	if err != nil {
		return nil, nil, err
	}
	exporter.ConfigurePool(poolCfg, opts.Budget)
	pool, err = pgxpool.NewWithConfig(context.Background(), poolCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("create pool: %w", err)
	}
	if opts.VerifyEvery == 0 {
		return pool, nil, nil
	}
	verifyCfg, err := writePoolConfig(c)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	verifyCfg.ConnConfig.RuntimeParams["application_name"] = "opsdesk exporter"
	verifyCfg.ConnConfig.RuntimeParams["statement_timeout"] = "0"
	verifyCfg.MaxConns = 1
	verifyPool, err = pgxpool.NewWithConfig(context.Background(), verifyCfg)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("create pool: %w", err)
	}
	return pool, verifyPool, nil
}

func newExporter(c config.Context, opts exporterOptions, pool, verifyPool *pgxpool.Pool, logf func(string, ...any)) *exporter.Exporter {
	cfg := exporter.Config{
		Pool: pool, StuckAfter: c.StuckAfter, TenantLabels: opts.TenantLabels, Budget: opts.Budget,
		VerifyEvery: opts.VerifyEvery, Logf: logf,
	}
	if verifyPool != nil {
		cfg.VerifyPool = verifyPool
	}
	return exporter.New(cfg)
}

// exporterMaxHeaderBytes bounds a request's line and headers. A scrape
// sends a few hundred bytes; net/http's default, 1 MiB, let a stranger
// hold a megabyte per connection and still get a scrape of the store.
const exporterMaxHeaderBytes = 64 << 10

// serveExporter serves exp on l, and verifies in the background, until
// ctx ends; then it lets the scrapes under way finish.
func serveExporter(ctx context.Context, l net.Listener, exp *exporter.Exporter) error {
	srv := &http.Server{Handler: exp.Handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: exporterMaxHeaderBytes}
	var wg sync.WaitGroup
	verifyCtx, stopVerify := context.WithCancel(ctx)
	wg.Go(func() { exp.RunVerification(verifyCtx) })
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	var err error
	select {
	case err = <-served:
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = srv.Shutdown(shutdownCtx)
		cancel()
		<-served
	}
	stopVerify()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// exporterLog writes the exporter's problems to w, a line each, stamped;
// the database's words and stored text are cleaned of control characters.
func exporterLog(w io.Writer) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		line := termtext.CleanLines(fmt.Sprintf(format, args...))
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%s opsdesk exporter: %s\n", time.Now().UTC().Format(time.RFC3339), line)
	}
}
