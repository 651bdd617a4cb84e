package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile/auto"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// reconcilerOptions are opsdesk reconciler's flags.
type reconcilerOptions struct {
	Once         bool
	Interval     time.Duration
	DryRun       bool
	Concurrency  int
	Rate         float64
	MaxErrorRate float64
	MaxRecords   int
	MetricsAddr  string
	Output       string
}

// reconcilerHelp is the command's long help.
const reconcilerHelp = "Decide, as this context's login, the stuck records whose outcome lookup is definite, for\n" +
	"the tools whose catalog entry names auto_reconcile (found, not_found or both), and leave\n" +
	"everything else to people. The login must be granted the reconciler level (opsdesk access\n" +
	"grant NAME --as reconciler), and an admin must let each tool in the store's allowlist\n" +
	"(opsdesk reconciler allow): the database refuses a reconciler anything else. Each record is\n" +
	"decided by itself, at the version it was looked up at, with its own audit record whose reason\n" +
	"names the policy, the evidence and the pass's batch. Records under hold, with unreviewed\n" +
	"conflicting attempts or deferred by a person are skipped, and so is a record changed since\n" +
	"its lookup. When more than --max-error-rate of a tool's lookups in a pass fail or give no\n" +
	"answer, nothing of that tool is decided in the pass. An admin's opsdesk reconciler pause stops\n" +
	"every reconciler within one cycle. SIGINT or SIGTERM stops it after the decisions in flight."

// defaultReconcilerInterval is --interval's default: with the default
// rate a pass of 1,000 records takes 10s, and every definite one of an
// outage that size is decided within 30s of becoming stuck.
const defaultReconcilerInterval = 5 * time.Second

func newReconcilerCmd(g *globalFlags) *cobra.Command {
	var opts reconcilerOptions
	cmd := &cobra.Command{
		Use:   "reconciler [--once] [--dry-run]",
		Short: "Decide stuck records their lookup settles, as a machine's login (audited); pause, resume, allow",
		Long:  reconcilerHelp,
		Example: "  opsdesk reconciler --once\n" +
			"  opsdesk reconciler --metrics-addr 127.0.0.1:9466\n" +
			"  opsdesk reconciler --once --dry-run -o json\n" +
			"  opsdesk reconciler allow charge-card --verdicts found,not_found --reason 'payments agreed, INC-12'\n" +
			"  opsdesk reconciler pause --reason 'provider answers look wrong'",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			return withWriterConns(cmd, g, max(writerConns, opts.Concurrency+2), func(ctx context.Context, w *writer) error {
				return runReconciler(ctx, w, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	addGlobalFlags(cmd.PersistentFlags(), g)
	f := cmd.Flags()
	f.BoolVar(&opts.Once, "once", false, "run one pass, print what it did, and exit")
	f.DurationVar(&opts.Interval, "interval", defaultReconcilerInterval, "time between passes (1s to 1h)")
	f.BoolVar(&opts.DryRun, "dry-run", false, "decide nothing: print what would be decided")
	f.IntVar(&opts.Concurrency, "concurrency", auto.DefaultConcurrency, fmt.Sprintf("lookups and decisions at once (1 to %d)", bulk.MaxConcurrency))
	f.Float64Var(&opts.Rate, "rate", auto.DefaultRate, "decisions a second at most")
	f.Float64Var(&opts.MaxErrorRate, "max-error-rate", auto.DefaultMaxErrorRate,
		"share of a tool's lookups in a pass that may fail or give no answer before nothing of the tool is decided (0 to 1)")
	f.IntVar(&opts.MaxRecords, "max-records", auto.DefaultMaxRecords, fmt.Sprintf("stuck records a pass takes (1 to %d)", bulk.DefaultMaxRecords))
	f.StringVar(&opts.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address, such as 127.0.0.1:9466")
	f.StringVarP(&opts.Output, "output", "o", "table", "table|json")
	cmd.AddCommand(newReconcilerPauseCmd(g, true), newReconcilerPauseCmd(g, false), newReconcilerAllowCmd(g), newReconcilerStatusCmd(g))
	return cmd
}

// check refuses bad flags before anything is read.
func (o reconcilerOptions) check() error {
	switch {
	case o.Interval < time.Second || o.Interval > time.Hour:
		return usagef("--interval %v: give 1s to 1h", o.Interval)
	case o.Concurrency < 1 || o.Concurrency > bulk.MaxConcurrency:
		return usagef("--concurrency %d: give 1 to %d", o.Concurrency, bulk.MaxConcurrency)
	case !(o.Rate > 0) || o.Rate > 10_000:
		return usagef("--rate %v: give decisions a second, more than 0 and at most 10000", o.Rate)
	case !(o.MaxErrorRate > 0) || o.MaxErrorRate > 1:
		return usagef("--max-error-rate %v: a share above 0 and at most 1, such as 0.2", o.MaxErrorRate)
	case o.MaxRecords < 1 || o.MaxRecords > bulk.DefaultMaxRecords:
		return usagef("--max-records %d: give 1 to %d", o.MaxRecords, bulk.DefaultMaxRecords)
	}
	return checkOutput(o.Output)
}

// autoTools is the catalog's auto_reconcile, by tool.
func autoTools(cfg *config.Config) map[string][]bulk.Verdict {
	out := map[string][]bulk.Verdict{}
	for name, t := range cfg.Tools {
		for _, v := range t.AutoReconcile {
			out[name] = append(out[name], bulk.Verdict(v))
		}
	}
	return out
}

// storeSettings reads the store's reconciler settings for a pass.
func storeSettings(w *writer) func(context.Context) (auto.Settings, error) {
	return func(ctx context.Context) (auto.Settings, error) {
		s, err := desk.ReadReconcilerState(ctx, w.pool)
		if err != nil {
			return auto.Settings{}, err
		}
		out := auto.Settings{Paused: s.Paused, PausedBy: s.By, PauseReason: s.Reason, Allow: map[string][]bulk.Verdict{}}
		for tool, vs := range s.Allow {
			for _, v := range vs {
				out.Allow[tool] = append(out.Allow[tool], bulk.Verdict(v))
			}
		}
		return out, nil
	}
}

func runReconciler(ctx context.Context, w *writer, opts reconcilerOptions, out, errOut io.Writer) error {
	tools := autoTools(w.cfg)
	if len(tools) == 0 {
		return usagef("no tool in the catalog names auto_reconcile: add auto_reconcile: [found, not_found] (or [found]) " +
			"to a tool with a lookup")
	}
	client := bulk.HTTPClient(opts.Concurrency)
	defer client.CloseIdleConnections()
	w.desk.Client = client
	b, err := bulk.New(bulk.Config{Desk: w.desk, Lister: w.view, Concurrency: opts.Concurrency})
	if err != nil {
		return usagef("%v", err)
	}
	r, err := auto.New(auto.Config{Bulk: b, Desk: w.desk, Lister: w.view, Settings: storeSettings(w), Tools: tools,
		MaxErrorRate: opts.MaxErrorRate, MaxRecords: opts.MaxRecords, Concurrency: opts.Concurrency, Rate: opts.Rate,
		DryRun: opts.DryRun})
	if err != nil {
		return usagef("%v", err)
	}
	m := newReconcilerMetrics()
	if opts.MetricsAddr != "" {
		l, err := net.Listen("tcp", opts.MetricsAddr)
		if err != nil {
			return usagef("--metrics-addr %s: %v", opts.MetricsAddr, err)
		}
		srv := &http.Server{Handler: m.handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: exporterMaxHeaderBytes}
		go func() { _ = srv.Serve(l) }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		fmt.Fprintf(errOut, "reconciler: metrics on http://%s/metrics\n", l.Addr())
	}
	if opts.Once {
		rep, err := r.Pass(ctx)
		m.observe(rep, err)
		if err != nil {
			return fmt.Errorf("reconciler pass: %w", err)
		}
		if opts.Output == "json" {
			return writeJSON(out, rep)
		}
		writePass(out, rep, true)
		return nil
	}
	fmt.Fprintf(errOut, "reconciler: %s, a pass every %v%s; SIGINT or SIGTERM stops it\n", toolsWords(tools), opts.Interval,
		map[bool]string{true: " (dry run: deciding nothing)"}[opts.DryRun])
	for {
		rep, err := r.Pass(ctx)
		m.observe(rep, err)
		switch {
		case err != nil && ctx.Err() == nil:
			// The store is down or the login lost its access: say so,
			// and try again next cycle.
			fmt.Fprintln(errOut, "reconciler: pass failed:", termtext.CleanLines(err.Error()))
		case opts.Output == "json":
			if err := writeJSON(out, rep); err != nil {
				return err
			}
		default:
			writePass(out, rep, false)
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(errOut, "reconciler: stopped")
			return nil
		case <-time.After(opts.Interval):
		}
	}
}

// toolsWords names the tools and their verdicts.
func toolsWords(tools map[string][]bulk.Verdict) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		var vs []string
		for _, v := range tools[name] {
			vs = append(vs, string(v))
		}
		parts = append(parts, fmt.Sprintf("%s [%s]", name, strings.Join(vs, ", ")))
	}
	return strings.Join(parts, ", ")
}

// writePass prints one pass: its counts, and with details each record
// not decided for a reason a person should see.
func writePass(w io.Writer, rep auto.Report, details bool) {
	if rep.Paused {
		fmt.Fprintln(w, termtext.Clean(fmt.Sprintf("reconciler: paused by %s (%s): nothing decided; an admin resumes it with "+
			"opsdesk reconciler resume --reason …", rep.PausedBy, rep.PauseReason)))
		return
	}
	what := "decided"
	if rep.DryRun {
		what = "would decide"
	}
	var dec []string
	for _, v := range []bulk.Verdict{bulk.Found, bulk.NotFound} {
		dec = append(dec, fmt.Sprintf("%s %d", v.Label(), rep.Decided[v]))
	}
	if rep.DryRun {
		dec = dec[:0]
		n := map[string]int{}
		for _, rec := range rep.Records {
			if rec.Outcome == auto.SkipDryRun {
				n[string(rec.Verdict)]++
			}
		}
		for _, v := range []bulk.Verdict{bulk.Found, bulk.NotFound} {
			dec = append(dec, fmt.Sprintf("%s %d", v.Label(), n[string(v)]))
		}
	}
	var skip []string
	for _, reason := range auto.SkipReasons {
		if n := rep.Skipped[reason]; n > 0 && !(rep.DryRun && reason == auto.SkipDryRun) {
			skip = append(skip, fmt.Sprintf("%s %d", strings.ReplaceAll(reason, "_", " "), n))
		}
	}
	if len(skip) == 0 {
		skip = []string{"none"}
	}
	line := fmt.Sprintf("reconciler: %d stuck listed, %d looked up; %s: %s; skipped: %s; in %s",
		rep.Listed, rep.Asked, what, strings.Join(dec, ", "), strings.Join(skip, ", "), rep.Took.Round(time.Millisecond))
	if rep.BatchID != "" {
		line += "; batch " + rep.BatchID
	}
	fmt.Fprintln(w, termtext.Clean(line))
	for _, tool := range rep.ProviderDown {
		fmt.Fprintln(w, termtext.Clean(fmt.Sprintf("  provider of %s: %d lookups failed or gave no answer, over --max-error-rate: "+
			"nothing of it decided this pass", tool, rep.ProviderErrors[tool])))
	}
	if rep.Stopped != "" {
		fmt.Fprintln(w, "  stopped:", termtext.Clean(rep.Stopped))
	}
	if !details {
		return
	}
	shown := 0
	for _, rec := range rep.Records {
		if rec.Outcome == "decided" || rec.Outcome == auto.SkipProviderDown {
			continue
		}
		if shown == listed {
			fmt.Fprintf(w, "  and more (-o json lists every record)\n")
			break
		}
		shown++
		fmt.Fprintln(w, "  "+termtext.Clean(fmt.Sprintf("%s %d %s: %s", strings.ReplaceAll(rec.Outcome, "_", " "), rec.ID,
			itemIdentity(rec.Item), rec.Message)))
	}
}

func newReconcilerPauseCmd(g *globalFlags, pause bool) *cobra.Command {
	verb, what := "resume", "Let every reconciler decide again (an admin of every tenant; audited)"
	if pause {
		verb, what = "pause", "Stop every reconciler's decisions within one cycle (an admin of every tenant; audited)"
	}
	var reason, output string
	cmd := &cobra.Command{
		Use:     verb + " --reason TEXT",
		Short:   what,
		Example: "  opsdesk reconciler " + verb + " --reason 'provider incident INC-7'",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := checkReason(reason, "it goes into the audit trail"); err != nil {
				return err
			}
			return withWriter(cmd, g, func(ctx context.Context, w *writer) error {
				res, err := desk.SetReconcilerPause(ctx, w.pool, pause, reason, w.cfg.Context.DisplayName)
				return writeDecision(cmd.OutOrStdout(), output, "reconciler "+verb, res, err)
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why: kept in the audit trail (required)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	return cmd
}

func newReconcilerAllowCmd(g *globalFlags) *cobra.Command {
	var reason, output string
	var verdicts []string
	cmd := &cobra.Command{
		Use:   "allow TOOL --verdicts found,not_found --reason TEXT",
		Short: "Let reconcilers decide a tool's stuck records on these lookup answers (an admin of every tenant; audited)",
		Long: "Write the store's allowlist for TOOL: the lookup answers on which a reconciler's login may\n" +
			"decide its stuck records (found: completed with the provider's reference; not_found: not\n" +
			"executed). --verdicts none takes the tool off the list. The catalog's auto_reconcile says what\n" +
			"a reconciler asks for; this says what the database lets it do.",
		Example: "  opsdesk reconciler allow charge-card --verdicts found,not_found --reason 'payments team agreed, INC-12'\n" +
			"  opsdesk reconciler allow charge-card --verdicts none --reason 'provider migration this week'",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			vs, err := allowVerdicts(verdicts)
			if err != nil {
				return err
			}
			if err := checkReason(reason, "it goes into the audit trail"); err != nil {
				return err
			}
			return withWriter(cmd, g, func(ctx context.Context, w *writer) error {
				res, err := desk.SetAutoReconcile(ctx, w.pool, args[0], vs, reason, w.cfg.Context.DisplayName)
				what := fmt.Sprintf("reconcilers may decide %s on %s", args[0], strings.Join(vs, ", "))
				if len(vs) == 0 {
					what = fmt.Sprintf("reconcilers may decide nothing of %s", args[0])
				}
				return writeDecision(cmd.OutOrStdout(), output, what, res, err)
			})
		},
	}
	cmd.Flags().StringSliceVar(&verdicts, "verdicts", nil, "found, not_found, both, or none (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why: kept in the audit trail (required)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	return cmd
}

// allowVerdicts checks --verdicts: found and not_found (not-found too), or
// none alone.
func allowVerdicts(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, usagef("--verdicts is required: found, not_found, both (found,not_found), or none")
	}
	var out []string
	for _, v := range in {
		v = strings.ReplaceAll(strings.TrimSpace(v), "-", "_")
		switch {
		case v == "none" && len(in) == 1:
			return []string{}, nil
		case !slices.Contains(config.AutoReconcileVerdicts, v):
			return nil, usagef("--verdicts %q: found, not_found, both, or none alone", v)
		case !slices.Contains(out, v):
			out = append(out, v)
		}
	}
	return out, nil
}

func newReconcilerStatusCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show whether reconcilers are paused, the store's allowlist and the catalog's auto_reconcile",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd, g)
			if err != nil {
				return err
			}
			cat := autoTools(cfg)
			return withUnsealedAuditPool(cmd, g, func(ctx context.Context, pool *pgxpool.Pool) error {
				s, err := desk.ReadReconcilerState(ctx, pool)
				if err != nil {
					return err
				}
				if output == "json" {
					type status struct {
						Paused  bool                      `json:"paused"`
						By      string                    `json:"by"`
						At      time.Time                 `json:"at"`
						Reason  string                    `json:"reason"`
						Allow   map[string][]string       `json:"allow"`
						Catalog map[string][]bulk.Verdict `json:"catalog"`
					}
					return writeJSON(cmd.OutOrStdout(), status{s.Paused, s.By, s.At, s.Reason, s.Allow, cat})
				}
				return writeReconcilerStatus(cmd.OutOrStdout(), s, cat)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	return cmd
}

func writeReconcilerStatus(w io.Writer, s desk.ReconcilerState, cat map[string][]bulk.Verdict) error {
	state := "running (not paused)"
	if s.Paused {
		state = "paused"
	}
	fmt.Fprintln(w, termtext.Clean(fmt.Sprintf("reconcilers: %s, set by %s at %s: %s", state, s.By, s.At.UTC().Format(time.RFC3339), s.Reason)))
	for _, tool := range slices.Sorted(maps.Keys(mergeKeys(s.Allow, cat))) {
		var c []string
		for _, v := range cat[tool] {
			c = append(c, string(v))
		}
		line := fmt.Sprintf("  %s: store allows [%s], catalog asks [%s]", tool, strings.Join(s.Allow[tool], ", "), strings.Join(c, ", "))
		for _, v := range c {
			if !slices.Contains(s.Allow[tool], v) {
				line += fmt.Sprintf("; %s is not allowed: opsdesk reconciler allow %s --verdicts … (an admin)", v, tool)
				break
			}
		}
		fmt.Fprintln(w, termtext.Clean(line))
	}
	return nil
}

func mergeKeys(a map[string][]string, b map[string][]bulk.Verdict) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// doctorReconciler says whether reconcilers are paused and names each
// catalog auto_reconcile the store's allowlist does not let (a reconciler
// would skip those records), with the admin's command that fixes it.
// Silent when the catalog names none and nothing is paused.
func doctorReconciler(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config, out *doctorOut) {
	cat := autoTools(cfg)
	s, err := desk.ReadReconcilerState(ctx, pool)
	if err != nil {
		if len(cat) > 0 {
			out.add("warning", "reconciler", "cannot read the reconciler's settings: "+err.Error())
		}
		return
	}
	if len(cat) == 0 && !s.Paused {
		return
	}
	if s.Paused {
		out.add("warning", "reconciler", fmt.Sprintf("paused by %s at %s: %s (opsdesk reconciler resume --reason …, an admin)",
			s.By, s.At.UTC().Format(time.RFC3339), s.Reason))
	}
	var missing []string
	for _, tool := range slices.Sorted(maps.Keys(cat)) {
		for _, v := range cat[tool] {
			if !slices.Contains(s.Allow[tool], string(v)) {
				missing = append(missing, fmt.Sprintf("%s on %s", tool, v))
			}
		}
	}
	if len(missing) > 0 {
		out.add("warning", "reconciler", "the catalog's auto_reconcile asks for what the store's allowlist does not let: "+
			strings.Join(missing, ", ")+" (an admin runs opsdesk reconciler allow TOOL --verdicts …)")
		return
	}
	if !s.Paused {
		out.check(true, "reconciler", "the store lets every catalog auto_reconcile: "+toolsWords(cat))
	}
}
