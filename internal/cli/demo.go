package cli

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/internal/exporter"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops/opsmigrate"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/ui"
)

type demoOptions struct {
	Headless bool
	Keep     bool
	// NoConsole prints a live summary instead of opening the console (also
	// what happens when standard output is not a terminal).
	NoConsole bool
	Rate      float64
	Workers   int
	// Outage is how many charge-card records to leave stuck at start.
	Outage int
	// Seed is used when SeedSet; otherwise the run draws one and prints it.
	Seed    uint64
	SeedSet bool
	// Reconciler runs the demo's own reconciler for charge-card (default:
	// on, but not with --headless, whose scripts run their own).
	Reconciler bool
	// summaryEvery is how often the live summary prints.
	summaryEvery time.Duration
}

// Limits of the demo's flags: enough to look busy, modest on a laptop.
const (
	maxDemoRate    = 100
	maxDemoWorkers = 32
	maxDemoOutage  = 10_000
)

func newDemoCmd() *cobra.Command {
	opts := demoOptions{summaryEvery: 5 * time.Second}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a living operation store on a throw-away PostgreSQL",
		Long: "Start a throw-away PostgreSQL from the server binaries installed on this machine,\n" +
			"migrate it, and run a simulated fleet of workers through the ops library against a\n" +
			"simulated provider on 127.0.0.1. Faults are injected so that every state keeps\n" +
			"appearing: replayed retries, business rejections, released reservations, slow calls\n" +
			"holding live leases, conflicts, and stuck records whose outcome only the provider's\n" +
			"lookup can tell. A configuration file for the console and the commands is written next\n" +
			"to the cluster: its context connects as the demo's operator, opsdesk_demo_operator.\n" +
			"Until interrupted it prints how many records are in each state; then everything is\n" +
			"stopped and removed, unless --keep.\n\n" +
			"With --headless it prints OPSDESK_DSN=… and PROVIDER_URL=… and nothing else on\n" +
			"standard output, and runs until SIGINT or SIGTERM: scripts and tests use the store.",
		Example: "  opsdesk demo\n  opsdesk demo --rate 10 --seed 42 --keep\n  opsdesk demo --headless > demo.env &",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.SeedSet = cmd.Flags().Changed("seed")
			if !cmd.Flags().Changed("reconciler") {
				opts.Reconciler = !opts.Headless
			}
			return runDemo(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Headless, "headless", false, "print OPSDESK_DSN and PROVIDER_URL, then run quietly until SIGINT or SIGTERM")
	f.BoolVar(&opts.NoConsole, "no-console", false, "print a live summary of the store instead of opening the console")
	f.BoolVar(&opts.Keep, "keep", false, "on exit, stop the server but keep its data directory, and say how to start it again")
	f.Float64Var(&opts.Rate, "rate", demo.DefaultRate, "jobs per second the fleet starts (each a request and its retries)")
	f.IntVar(&opts.Workers, "workers", demo.DefaultWorkers, "workers in the fleet, each with its own lease owner")
	f.IntVar(&opts.Outage, "outage", 0, "leave this many charge-card records stuck at start, as a provider outage would "+
		"(R on :stuck tool:charge-card in the console, or opsdesk resolve --filter 'state:stuck tool:charge-card' --by-lookup)")
	f.BoolVar(&opts.Reconciler, "reconciler", true, "run a reconciler (opsdesk reconciler) deciding charge-card's definite lookups "+
		"as its own login (default: on, off with --headless)")
	f.Uint64Var(&opts.Seed, "seed", 0, "seed of the fleet's random choices, to replay a run (default: a random seed, printed)")
	// --hold kept the scripted demo's database up until interrupted: the
	// demo now always runs until interrupted.
	f.Bool("hold", false, "")
	_ = f.MarkDeprecated("hold", "the demo now runs until interrupted")
	return cmd
}

// demoRole is the login role the fleet connects as.
const demoRole = "opsdesk_demo_service"

// demoDatabase is the demo's database in its cluster.
const demoDatabase = "opsdesk"

func runDemo(ctx context.Context, opts demoOptions, stdout, stderr io.Writer) (err error) {
	if opts.Rate <= 0 || opts.Rate > maxDemoRate {
		return usagef("--rate %g: give jobs per second above 0 and at most %d", opts.Rate, maxDemoRate)
	}
	if opts.Workers < 1 || opts.Workers > maxDemoWorkers {
		return usagef("--workers %d: give 1 to %d", opts.Workers, maxDemoWorkers)
	}
	if opts.Outage < 0 || opts.Outage > maxDemoOutage {
		return usagef("--outage %d: give 0 to %d", opts.Outage, maxDemoOutage)
	}
	seed := opts.Seed
	if !opts.SeedSet {
		seed = rand.Uint64()
	}
	// In headless mode standard output carries the two lines scripts read
	// and nothing else.
	info := stdout
	if opts.Headless {
		info = stderr
	}
	say := func(format string, args ...any) { fmt.Fprintf(info, format+"\n", args...) }

	say("starting a throw-away PostgreSQL...")
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return err
	}
	dsn := superuserDSN(cluster)
	catalog := filepath.Join(cluster.Dir(), "opsdesk.yaml")
	defer func() {
		if opts.Keep {
			err = errors.Join(err, keepCluster(cluster, dsn, catalog, info))
			return
		}
		err = errors.Join(err, cluster.Stop())
	}()

	operatorDSN, err := prepareDemoDatabase(ctx, cluster)
	if err != nil {
		return err
	}
	adminCfg, err := db.PoolConfig(dsn, "opsdesk demo")
	if err != nil {
		return err
	}
	storeview.ConfigurePool(adminCfg, statementTimeout)
	adminCfg.ConnConfig.RuntimeParams["application_name"] = "opsdesk demo"
	adminCfg.MaxConns = 4 // the summary or the console
	admin, err := db.Open(ctx, adminCfg)
	if err != nil {
		return err
	}
	defer admin.Close()
	fleetCfg, err := db.PoolConfig(demoDSN(cluster, demoDatabase, demoRole), "opsdesk demo fleet")
	if err != nil {
		return err
	}
	// A connection per call and one per lease renewal, with room for a
	// double submit, and two for the MCP agent.
	fleetCfg.MaxConns = int32(2*opts.Workers + 6)
	pool, err := db.Open(ctx, fleetCfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	provider, stopProvider, err := startDemoProvider(ctx, cluster, int32(2*opts.Workers+4))
	if err != nil {
		return err
	}
	defer stopProvider()
	if err := writeDemoCatalog(catalog, operatorDSN, provider.URL()); err != nil {
		return err
	}
	if err := allowDemoReconciler(ctx, operatorDSN); err != nil {
		return err
	}
	fleet, err := demo.StartFleet(ctx, demo.FleetConfig{
		Pool: pool, ProviderURL: provider.URL(), Workers: opts.Workers, Rate: opts.Rate, Seed: seed,
	})
	if err != nil {
		return err
	}
	defer fleet.Stop()
	// An agent runtime calling an MCP tool through ops/opsmcp, losing
	// answers and retrying: its records are the agent-* keys.
	agent, err := demo.StartAgent(ctx, demo.AgentConfig{Pool: pool, Rate: opts.Rate / 4, Seed: seed})
	if err != nil {
		return err
	}
	defer agent.Stop()
	misbehaved := func() error { return errors.Join(fleet.Err(), agent.Err()) }
	if opts.Outage > 0 {
		say("simulating a provider outage: %d charges left stuck...", opts.Outage)
		if _, err := demo.Outage(ctx, demo.OutageConfig{Pool: pool, Provider: provider, Records: opts.Outage, Seed: seed, Workers: 4}); err != nil {
			return err
		}
	}

	console := !opts.Headless && !opts.NoConsole && isTerminal(stdout)
	if opts.Reconciler {
		logTo := stderr
		if console {
			logTo = io.Discard // the console shows its decisions in the timeline and the audit
		}
		stopReconciler, err := startDemoReconciler(ctx, cluster, operatorDSN, catalog, logTo)
		if err != nil {
			return err
		}
		defer stopReconciler()
	}
	// The exporter's problems would scribble over the console.
	exporterLogs := stderr
	if console {
		exporterLogs = io.Discard
	}
	metricsURL, stopExporter, err := startDemoExporter(ctx, operatorDSN, exporterLogs)
	if err != nil {
		return err
	}
	defer stopExporter()
	fleetLine := fmt.Sprintf("%d workers, %g jobs/s, seed %d, tenants %s",
		opts.Workers, opts.Rate, seed, strings.Join(demo.DefaultTenants, ", "))
	var about []string // what the start said, for :about and the end
	if opts.Headless {
		// OPSDESK_DSN stays the superuser's, for the scripts that create
		// roles with it; it is named once more as what it is, and the
		// operator's (whose decisions the database holds to people's
		// rules) beside it.
		if _, err := fmt.Fprintf(stdout, "OPSDESK_DSN=%s\nPROVIDER_URL=%s\nOPSDESK_SUPERUSER_DSN=%s\nOPSDESK_OPERATOR_DSN=%s\n",
			dsn, provider.URL(), dsn, operatorDSN); err != nil {
			return err
		}
		say("opsdesk demo: fleet running (%s); tool catalog %s; metrics %s; stop with SIGINT or SIGTERM",
			fleetLine, catalog, metricsURL)
		say("opsdesk demo: OPSDESK_DSN is the superuser's (as OPSDESK_SUPERUSER_DSN), to create roles; decide as the operator, "+
			"OPSDESK_OPERATOR_DSN (%s), or with OPSDESK_CONFIG=%s", demoOperator, catalog)
	} else {
		// What the start says is kept: the console shows it on :about,
		// and it is said again when the console closes, which covered it.
		say := func(format string, args ...any) {
			say(format, args...)
			about = append(about, fmt.Sprintf(format, args...))
		}
		say("the demo is running:")
		say("  database  %s", dsn)
		say("  provider  %s  (outcome lookups: %s)", provider.URL(), demo.LookupPath)
		say("  catalog   %s  (OPSDESK_CONFIG for the console and commands, as %s)", catalog, demoOperator)
		say("  fleet     %s", fleetLine)
		say("  agent     an MCP client and server (ops/opsmcp) on the in-memory transport: lost answers retried " +
			"with the same key, reworded retries refused as conflicts (keys agent-*)")
		say("  exporter  %s  (Prometheus metrics of the store: curl it)", metricsURL)
		if opts.Reconciler {
			say("  reconciler as %s, every %v: decides charge-card's stuck records whose lookup is definite "+
				"(auto_reconcile in the catalog; opsdesk reconciler status)", demoReconciler, demoReconcilerInterval)
		}
		if opts.Outage > 0 {
			say("  outage    %d charges stuck (keys outage-*): OPSDESK_CONFIG=%s opsdesk resolve --filter 'state:stuck tool:charge-card' --by-lookup --reason '…'",
				opts.Outage, catalog)
			if opts.Reconciler {
				say("            (the reconciler decides those whose lookup is definite within seconds: --reconciler=false to do it by hand)")
			}
		}
		if console {
			say("  console   as %s, an admin of every tenant: r on a stuck record reconciles it; "+
				"R on :stuck tool:charge-card reconciles them all by lookup", demoOperator)
		}
		say("explore with:  psql '%s'", dsn)
		if opts.Keep {
			say("press ctrl-c to stop; the data directory is kept (--keep)")
		} else {
			say("press ctrl-c to stop and remove everything")
		}
	}

	if console {
		view, opts, pool, err := openDemoConsole(ctx, operatorDSN, catalog)
		if err != nil {
			return err
		}
		defer pool.Close()
		opts.Report = stderr // what a run left half-done, after the console
		opts.About = about
		err = ui.Run(ctx, view, opts)
		if err != nil {
			return err
		}
		say("the demo ran with:")
		for _, l := range about[1 : len(about)-1] { // not "is running" nor "press ctrl-c"
			say("%s", l)
		}
		if ferr := misbehaved(); ferr != nil {
			return fmt.Errorf("the demo fleet failed: %w", ferr)
		}
	} else {
		watchDemo(ctx, opts, admin, misbehaved, stdout, stderr)
	}
	say("stopping...")
	agent.Stop()
	fleet.Stop()
	return nil
}

// isTerminal tells whether w is a terminal the console can draw on.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// watchDemo prints the live summary (not when headless) and the fleet's and
// the agent's unexpected errors (misbehaved) until ctx is done.
func watchDemo(ctx context.Context, opts demoOptions, admin db.Querier, misbehaved func() error, stdout, stderr io.Writer) {
	tick := time.NewTicker(opts.summaryEvery)
	defer tick.Stop()
	reported := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !opts.Headless {
			counts, err := demo.CountStates(ctx, admin)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				fmt.Fprintf(stderr, "opsdesk demo: %s\n", termtext.CleanLines(err.Error()))
			default:
				fmt.Fprintf(stdout, "%s  %s\n", time.Now().Format(time.TimeOnly), counts)
			}
		}
		if err := misbehaved(); err != nil && !reported {
			reported = true
			fmt.Fprintf(stderr, "opsdesk demo: the fleet or the agent misbehaved (a bug in the demo or the library):\n%s\n", termtext.CleanLines(err.Error()))
		}
	}
}

// migrateDemoDatabase installs the schema as a service would, through
// opsmigrate.
func migrateDemoDatabase(ctx context.Context, dsn string) error {
	pool, err := openDSN(ctx, dsn, "opsdesk demo")
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = opsmigrate.Migrate(ctx, pool, nil)
	return err
}

// prepareDemoDatabase creates and migrates the demo's database, the
// business tables the local tools write, the fleet's login role and the
// console's (see demoOperator), and returns the console's DSN.
// demoDSN is the cluster's DSN for database as role instead of its
// superuser. Appending user=role worked (libpq takes a keyword's last
// value) but wrote user= twice into the catalog a newcomer reads and
// copies.
func demoDSN(cluster *pgcluster.Cluster, database, role string) string {
	return strings.Replace(cluster.DSN(database), "user="+pgcluster.Superuser+" ", "user="+role+" ", 1)
}

func prepareDemoDatabase(ctx context.Context, cluster *pgcluster.Cluster) (operatorDSN string, err error) {
	admin, err := pgx.Connect(ctx, cluster.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+demoDatabase); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	ownerCfg, err := pgx.ParseConfig(cluster.DSN(demoDatabase))
	if err != nil {
		return "", err
	}
	ownerCfg.RuntimeParams["application_name"] = "opsdesk demo"
	if err := migrateDemoDatabase(ctx, cluster.DSN(demoDatabase)); err != nil {
		return "", err
	}
	owner, err := pgx.ConnectConfig(ctx, ownerCfg)
	if err != nil {
		return "", err
	}
	defer owner.Close(context.WithoutCancel(ctx))
	if _, err := owner.Exec(ctx, demo.Schema+`
CREATE ROLE `+demoRole+` LOGIN IN ROLE opsdesk_service;`); err != nil {
		return "", fmt.Errorf("prepare the demo's tables and role: %w", err)
	}
	password, err := createDemoOperator(ctx, owner)
	if err != nil {
		return "", err
	}
	return demoDSN(cluster, demoDatabase, demoOperator) + " password=" + password, nil
}

// The simulated provider's own operation store, where idemhttp records the
// requests it gets: a database of its own, so that the console shows the
// fleet's records only, and the login role the provider connects as.
const (
	providerDatabase = "opsdesk_provider"
	providerRole     = "opsdesk_demo_provider"
)

// startDemoProvider creates and migrates the provider's database and
// starts the provider over it, with a pool of maxConns connections. stop
// closes the provider, then its pool.
func startDemoProvider(ctx context.Context, cluster *pgcluster.Cluster, maxConns int32) (p *demo.Provider, stop func(), err error) {
	admin, err := pgx.Connect(ctx, cluster.DSN("postgres"))
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+providerDatabase); err != nil {
		return nil, nil, fmt.Errorf("create the provider's database: %w", err)
	}
	if err := migrateDemoDatabase(ctx, cluster.DSN(providerDatabase)); err != nil {
		return nil, nil, fmt.Errorf("migrate the provider's database: %w", err)
	}
	if _, err := admin.Exec(ctx, `CREATE ROLE `+providerRole+` LOGIN IN ROLE opsdesk_service`); err != nil {
		return nil, nil, fmt.Errorf("create the provider's role: %w", err)
	}
	cfg, err := db.PoolConfig(demoDSN(cluster, providerDatabase, providerRole), "opsdesk demo provider")
	if err != nil {
		return nil, nil, err
	}
	cfg.MaxConns = maxConns
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	p, err = demo.StartProvider(demo.ProviderConfig{Pool: pool})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return p, func() {
		_ = p.Close() // held calls are aborted; nothing to report
		pool.Close()
	}, nil
}

// demoOperator is the login role the demo's console connects as: a person,
// an admin of every tenant, so that the console's decisions go through the
// database's functions, its role checks and row-level security, and the
// audit trail names this role, as it would anyone's.
const demoOperator = "opsdesk_demo_operator"

// createDemoOperator creates (or, in a kept cluster, reuses) the console's
// login role with a new random password, granted opsdesk_admin and access
// to every tenant, as the superuser conn is. It returns the password.
func createDemoOperator(ctx context.Context, conn *pgx.Conn) (string, error) {
	password, err := demoLogin(ctx, conn, demoOperator)
	if err != nil {
		return "", err
	}
	_, err = conn.Exec(ctx, `
GRANT opsdesk_admin TO `+demoOperator+`;
INSERT INTO opsdesk.access (role, tenant, granted_by) VALUES ('`+demoOperator+`', '*', 'opsdesk demo')
ON CONFLICT (role, tenant) DO NOTHING;`)
	if err != nil {
		return "", fmt.Errorf("create the console's role %s: %w", demoOperator, err)
	}
	return password, nil
}

// demoLogin creates (or, in a kept cluster, reuses) the login role role,
// one of the demo's constant names, with a new random password, as the
// superuser conn is, and returns the password.
func demoLogin(ctx context.Context, conn *pgx.Conn, role string) (string, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", err
	}
	password := hex.EncodeToString(b[:]) // hex: safe inside a literal
	_, err := conn.Exec(ctx, `
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '`+role+`') THEN
        ALTER ROLE `+role+` LOGIN PASSWORD '`+password+`';
    ELSE
        CREATE ROLE `+role+` LOGIN PASSWORD '`+password+`';
    END IF;
END
$$`)
	if err != nil {
		return "", fmt.Errorf("create the login role %s: %w", role, err)
	}
	return password, nil
}

// writeDemoCatalog writes the demo's configuration file: its context
// connects as demoOperator, a person, as the demo's console does, so that
// commands run on it (opsdesk resolve, doctor) are checked and audited as
// that person's, never as the superuser's.
func writeDemoCatalog(path, operatorDSN, providerURL string) error {
	return demo.WriteCatalog(path, demo.CatalogParams{DSN: operatorDSN, ProviderURL: providerURL, Lease: demo.DefaultLease})
}

// openDemoConsole opens the console's reads, decisions and purges as
// demoOperator, with the tools of the demo's catalog (lookups at the
// simulated provider, runbooks, retentions), over one pool.
func openDemoConsole(ctx context.Context, operatorDSN, catalog string) (*storeview.Store, ui.Config, *pgxpool.Pool, error) {
	cfg, err := config.Load(config.Options{File: catalog, Context: "demo"})
	if err != nil {
		return nil, ui.Config{}, nil, fmt.Errorf("read the demo's catalog: %w", err)
	}
	cfg.Context.DisplayName = "demo operator"
	cfg.Context.Refresh = 2 * time.Second
	poolCfg, err := db.PoolConfig(operatorDSN, "opsdesk demo console")
	if err != nil {
		return nil, ui.Config{}, nil, err
	}
	storeview.ConfigurePool(poolCfg, statementTimeout)
	// The console's reads, and R's decisions at once beside them.
	poolCfg.MaxConns = 4 + bulk.DefaultConcurrency
	pool, err := db.Open(ctx, poolCfg)
	if err != nil {
		return nil, ui.Config{}, nil, err
	}
	view := storeview.New(pool, storeview.Config{StatementTimeout: statementTimeout})
	opts, err := consoleOptions(cfg, pool)
	if err != nil {
		pool.Close()
		return nil, ui.Config{}, nil, err
	}
	opts.Verifier = consoleVerifier{pool: pool}
	return view, opts, pool, nil
}

// startDemoExporter serves opsdesk exporter over the demo's store on a
// free port of 127.0.0.1, as the console's role, and returns its metrics
// URL; stop stops it.
func startDemoExporter(ctx context.Context, dsn string, logTo io.Writer) (metricsURL string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("start the exporter: %w", err)
	}
	c := config.Context{Name: "demo", DSN: dsn}
	opts := exporterOptions{Listen: l.Addr().String(), Budget: exporter.DefaultBudget}
	pool, _, err := openExporterPools(c, opts)
	if err != nil {
		_ = l.Close()
		return "", nil, err
	}
	exp := newExporter(c, opts, pool, nil, exporterLog(logTo))
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serveExporter(ctx, l, exp) }()
	return "http://" + l.Addr().String() + "/metrics", func() {
		cancel()
		<-served // nothing to report: the demo is stopping
		pool.Close()
	}, nil
}

// superuserDSN is the demo database's DSN as the cluster's superuser, as a
// URL: one word, so that scripts can pass it around unquoted.
func superuserDSN(cluster *pgcluster.Cluster) string {
	cfg, err := pgx.ParseConfig(cluster.DSN(demoDatabase))
	if err != nil {
		// The cluster's own DSN always parses.
		panic(fmt.Sprintf("parse the cluster's DSN: %v", err))
	}
	u := url.URL{
		Scheme: "postgres",
		User:   url.User(cfg.User),
		Path:   "/" + cfg.Database,
		RawQuery: url.Values{
			"host":    {cfg.Host},
			"port":    {strconv.Itoa(int(cfg.Port))},
			"sslmode": {"disable"},
		}.Encode(),
	}
	return u.String()
}

// keepCluster shuts the server down cleanly but keeps its directory, and
// says how to start it again.
func keepCluster(cluster *pgcluster.Cluster, dsn, catalog string, w io.Writer) error {
	if err := cluster.StopAndKeep(); err != nil {
		return fmt.Errorf("keep the demo's data: %w", err)
	}
	dir := cluster.Dir()
	data, start := filepath.Join(dir, "data"), cluster.StartCommand()
	fmt.Fprintf(w, "kept the demo's data directory: %s (server log %s)\n", data, filepath.Join(dir, "postgres.log"))
	fmt.Fprintf(w, "start the server again with:\n  %s &\n", start)
	fmt.Fprintf(w, "then connect with:\n  psql '%s'\n", dsn)
	fmt.Fprintf(w, "tool catalog: %s (its lookups need a running demo provider)\n", catalog)
	fmt.Fprintf(w, "remove it all with:\n  rm -rf %s\n", dir)
	return nil
}
