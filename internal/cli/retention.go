package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/purgereport"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/retention"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ui"
)

func newRetentionCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "Review what expires, purge what expired, hold records",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return usagef("retention needs a command: review, purge, hold or release (see opsdesk retention --help)")
		},
	}
	addGlobalFlags(cmd.PersistentFlags(), g)
	cmd.AddCommand(newReviewCmd(g), newPurgeCmd(g), newHoldCmd(g, true), newHoldCmd(g, false))
	return cmd
}

// newHoldCmd is retention hold (hold true) or retention release.
func newHoldCmd(g *globalFlags, hold bool) *cobra.Command {
	var reason, filter string
	use, short := "hold", "Put records under legal hold: no purge deletes them (admins, audited)"
	if !hold {
		use, short = "release", "Release records from legal hold (admins, audited)"
	}
	cmd := &cobra.Command{
		Use:   use + " [ID...] [--filter 'QUERY'] --reason TEXT",
		Short: short,
		Long: short + ".\nName records by number, or by the filter language (at most 10,000). All or nothing:\n" +
			"when a record is missing (or not visible to you), nothing changes and the command fails naming it.\n" +
			"More than " + strconv.Itoa(retention.HoldBatch) + " records go in batches, each its own transaction, so that decisions\n" +
			"need not wait for the whole set; progress goes to stderr. Should a batch fail (a record\n" +
			"purged meanwhile, say), the command stops and says which records it held and which not.\n  " +
			readmodel.FilterHelp,
		Example: "  opsdesk retention " + use + " 48213 48214 --reason 'litigation hold #12'\n" +
			"  opsdesk retention " + use + " --filter 'tenant:acme tool:charge-card' --reason 'litigation hold #12'",
		RunE: func(cmd *cobra.Command, args []string) error {
			var ids []int64
			for _, a := range args {
				id, err := parseID(a)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			if err := checkReason(reason, "it goes into the audit trail"); err != nil {
				return err
			}
			switch {
			case len(ids) == 0 && filter == "":
				return usagef("name the records: operation numbers, or --filter 'QUERY'")
			case len(ids) > 0 && filter != "":
				return usagef("operation numbers or --filter, not both")
			}
			var f readmodel.Filter
			if filter != "" {
				var err error
				if f, err = readmodel.ParseFilter(filter); err != nil {
					return usagef("--filter: %w", err)
				}
			}
			return withWriter(cmd, g, func(ctx context.Context, w *writer) error {
				if filter != "" {
					var err error
					if ids, err = matchingIDs(ctx, w.view, f); err != nil {
						return err
					}
				}
				done := "held"
				if !hold {
					done = "released"
				}
				// A large set goes in batches: say how far it got.
				var progress func(retention.HoldProgress)
				if len(ids) > retention.HoldBatch {
					progress = func(p retention.HoldProgress) {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s %d of %s (ids up to %d)\n", done, p.Done, counted(p.Total, "record"), p.Through)
					}
				}
				r, err := retention.SetHold(ctx, w.pool, ids, hold, reason, w.cfg.Context.DisplayName, progress)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s; %d already %s\n", done, counted(r.Changed, "record"), r.Unchanged, wasWere(r.Unchanged))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why: kept in the audit trail with each record (required)")
	cmd.Flags().StringVar(&filter, "filter", "", "the records the filter language selects, instead of numbers")
	return cmd
}

// matchingIDs pages through the records f selects, refusing more than
// retention.MaxHold.
func matchingIDs(ctx context.Context, v *storeview.Store, f readmodel.Filter) ([]int64, error) {
	var ids []int64
	q := readmodel.Query{Filter: f, Limit: 1000}
	for {
		page, err := v.List(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Rows {
			ids = append(ids, r.ID)
		}
		if len(ids) > retention.MaxHold {
			return nil, usagef("the filter selects more than %d records: narrow it", retention.MaxHold)
		}
		if page.Next == nil {
			return ids, nil
		}
		q.After = page.Next
	}
}

func newReviewCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "review [-o table|json]",
		Short: "Each tool's retention: what expires soon, what awaits a purge, and what is wrong",
		Long: "For every tool of the store and of the catalog: its policy (retention, retry window,\n" +
			"after_expiry), the completed records expiring within 24 hours and 7 days, the expired ones\n" +
			"a purge would take and those it leaves (held, unreviewed conflicts), the longest-stuck\n" +
			"pending record, and warnings. Counts above 1,000 are estimates (~), or lower bounds (+)\n" +
			"for a role that sees some tenants; a purge's --dry-run counts exactly.",
		Example: "  opsdesk retention review\n  opsdesk retention review -o json",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			return withConfiguredView(cmd, g, func(ctx context.Context, view *storeview.Store, cfg *config.Config) error {
				r, err := view.Review(ctx, ReviewCatalog(cfg))
				if err != nil {
					return err
				}
				if output == "json" {
					return writeJSON(cmd.OutOrStdout(), r)
				}
				return writeReview(cmd.OutOrStdout(), r)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	return cmd
}

// ReviewCatalog is each tool's retention in cfg's catalog, where
// withRecordedPolicies put the policies the services recorded.
func ReviewCatalog(cfg *config.Config) map[string]readmodel.ToolPolicy {
	out := make(map[string]readmodel.ToolPolicy, len(cfg.Tools))
	for name, t := range cfg.Tools {
		out[name] = readmodel.ToolPolicy{Retention: t.Retention, RetryWindow: t.RetryWindow, AfterExpiry: t.AfterExpiry}
	}
	return out
}

// reviewMore says how to see a value of the review whole.
const reviewMore = "opsdesk retention review -o json prints it whole."

func writeReview(w io.Writer, r readmodel.Review) error {
	scope := "every tenant"
	if r.Scoped {
		scope = "the tenants you see"
	}
	fmt.Fprintf(w, "retention review of %s, db time %s\n\n", scope, r.DBTime.UTC().Format("2006-01-02 15:04:05 MST"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tRETENTION\tRETRY WINDOW\tAFTER EXPIRY\tEXPIRING 24H\t7D\tEXPIRED\tPURGEABLE\tHELD\tCONFLICTED\tOLDEST PENDING")
	for _, t := range r.Tools {
		name, retention, window, after := t.Tool, ui.ShortDuration(t.Retention), ui.ShortDuration(t.RetryWindow), t.AfterExpiry
		if !t.InCatalog {
			name, retention, window, after = name+" (not in catalog)", retention+" (default)", "?", "?"
		}
		oldest := "-"
		if p := t.OldestPending; p != nil {
			oldest = fmt.Sprintf("#%d lease %s", p.ID, ui.Relative(p.LeaseExpiresAt.Sub(r.DBTime)))
			if p.Stuck {
				oldest += " (stuck)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", shown(name, cellBytes, reviewMore),
			retention, window, termtext.Clean(after),
			ui.ReviewFigure(t.Expiring24h), ui.ReviewFigure(t.Expiring7d), ui.ReviewFigure(t.Expired),
			ui.ReviewFigure(t.Purgeable), t.Held, t.Conflicted, oldest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	n := r.Warnings()
	if n == 0 {
		_, err := fmt.Fprintln(w, "\nno warnings")
		return err
	}
	if n == 1 {
		fmt.Fprintln(w, "\n1 warning:")
	} else {
		fmt.Fprintf(w, "\n%d warnings:\n", n)
	}
	for _, u := range r.UnfinishedPurges {
		fmt.Fprintf(w, "  ⚠ %s\n", shown(u.Warning(), fieldBytes, reviewMore))
	}
	for _, t := range r.Tools {
		for _, warn := range t.Warnings {
			fmt.Fprintf(w, "  ⚠ %s: %s\n", shown(t.Tool, cellBytes, reviewMore), shown(warn, fieldBytes, reviewMore))
		}
	}
	return nil
}

// purgeJSON is retention purge -o json: what was counted (dry_run), and
// what the purge did (result; null with --dry-run). Tool is null for every
// tool.
type purgeJSON struct {
	Tool   *string             `json:"tool"`
	DryRun purgereport.DryRun  `json:"dry_run"`
	Result *purgereport.Result `json:"result"`
}

type purgeOptions struct {
	Output               string
	Tool, Before, Reason string
	DryRun, Yes          bool
	Batch, Workers       int
	Yield                float64
}

func newPurgeCmd(g *globalFlags) *cobra.Command {
	var opts purgeOptions
	cmd := &cobra.Command{
		Use:   "purge [--tool T] [--before TIME] [--dry-run] [--yes]",
		Short: "Delete completed records whose retention ended, leaving tombstones (audited)",
		Long: "Counts what would go first (the dry run), then deletes it in batches that skip locked rows,\n" +
			"showing progress, and no more than the dry run counted. Pending records, held records and\n" +
			"records with unreviewed conflicts never go. Each purged record leaves a tombstone for its tool's\n" +
			"retry_window (else its retention): a late retry then gets the tool's after_expiry. The run's\n" +
			"start record (who, why, what, the count) commits before anything is deleted; its result record\n" +
			"when it finishes. Interrupted, run it again: it resumes the run, with a resume record.\n\n" +
			"By default the purge paces itself for the services writing to the store: after a batch that\n" +
			"took k times as long per record as its fastest batch, it pauses k-1 times the batch's time, so\n" +
			"on a busy server it works a k-th of the time (at least a fifth), on an idle one all of it. The\n" +
			"progress lines show each batch's time, slowdown and pause. For a maintenance window ask for\n" +
			"speed: --yield 0 (no pauses), or --workers N (N batch loops side by side, no pauses unless\n" +
			"--yield is given too).",
		Example: "  opsdesk retention purge --dry-run\n" +
			"  opsdesk retention purge --tool create-ticket --before 2026-11-01T00:00:00Z --yes\n" +
			"  opsdesk retention purge --yes --yield 0 --workers 4   # maintenance window: full speed",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := retention.PurgeParams{Tool: opts.Tool, Reason: opts.Reason, BatchSize: opts.Batch, Workers: opts.Workers}
			if opts.Before != "" {
				t, err := time.Parse(time.RFC3339, opts.Before)
				if err != nil {
					return usagef("--before %q: a time such as 2026-11-01T00:00:00Z", opts.Before)
				}
				p.Before = t
			}
			if err := checkReason(opts.Reason, "it goes into the audit trail"); err != nil {
				return err
			}
			if err := checkOutput(opts.Output); err != nil {
				return err
			}
			if opts.Batch < 1 || opts.Batch > 10000 {
				return usagef("--batch %d: between 1 and 10000", opts.Batch)
			}
			if !(opts.Yield >= 0 && opts.Yield <= retention.MaxYield) { // NaN fails both
				return usagef("--yield %g: give a number from 0 (full speed) to %d", opts.Yield, retention.MaxYield)
			}
			if opts.Workers < 1 || opts.Workers > maxPurgeWorkers {
				return usagef("--workers %d: between 1 and %d", opts.Workers, maxPurgeWorkers)
			}
			// Paced unless the person asked for a pace: a yield, or
			// workers, which ask for speed.
			switch {
			case cmd.Flags().Changed("yield"):
				p.Pace = retention.FixedYield(opts.Yield)
			case cmd.Flags().Changed("workers"):
				p.Pace = retention.FixedYield(0)
			}
			// A connection per worker.
			return withWriterConns(cmd, g, max(writerConns, opts.Workers), func(ctx context.Context, w *writer) error {
				p.TombstoneFor = tombstoneLifetimes(w.cfg)
				p.DisplayName = w.cfg.Context.DisplayName
				return runPurge(ctx, w, p, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Tool, "tool", "", "only this tool's records")
	f.StringVarP(&opts.Output, "output", "o", "table", "table|json")
	f.StringVar(&opts.Before, "before", "", "only records whose retention ended before this time (RFC 3339; default now)")
	f.BoolVar(&opts.DryRun, "dry-run", false, "count what would go, delete nothing")
	f.BoolVar(&opts.Yes, "yes", false, "purge without asking (required unless --dry-run)")
	f.StringVar(&opts.Reason, "reason", "retention purge", "why: kept in the audit trail")
	f.IntVar(&opts.Batch, "batch", 1000, "records per transaction")
	f.Float64Var(&opts.Yield, "yield", 0,
		"after each batch, wait this many times as long as it took (0: full speed; default: paced by the batches' slowdown)")
	f.IntVar(&opts.Workers, "workers", 1,
		"batches side by side, each on a connection of its own, at full speed unless --yield is given: faster, at the library's expense")
	return cmd
}

// maxPurgeWorkers bounds --workers: each is a connection, and past the
// server's cores more only take from the library (docs/benchmarks.md,
// third measurement).
const maxPurgeWorkers = 8

// tombstoneLifetimes is each catalog tool's retry window, else its
// retention.
func tombstoneLifetimes(cfg *config.Config) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, t := range cfg.Tools {
		switch {
		case t.RetryWindow > 0:
			out[name] = t.RetryWindow
		case t.Retention > 0:
			out[name] = t.Retention
		}
	}
	return out
}

// checkTool refuses a purge of a tool that neither the store (the records
// the role sees) nor the catalog knows: a misspelt name would purge
// nothing and say so as if all were well. (The expired tombstones of a
// tool with tombstones only go with a purge of every tool.)
func checkTool(ctx context.Context, w *writer, tool string) error {
	if _, ok := w.cfg.Tools[tool]; ok {
		return nil
	}
	known, err := w.view.Tools(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(known, tool) {
		return nil
	}
	for name := range w.cfg.Tools {
		if !slices.Contains(known, name) {
			known = append(known, name)
		}
	}
	if len(known) == 0 {
		return fmt.Errorf("no tool %s: the store has no records you see and the catalog names no tools", termtext.Clean(tool))
	}
	slices.Sort(known)
	more := ""
	if len(known) > 20 {
		known, more = known[:20], fmt.Sprintf(" and %d more", len(known)-20)
	}
	for i, name := range known {
		known[i] = termtext.Clean(name)
	}
	return fmt.Errorf("no tool %s: known tools %s%s", termtext.Clean(tool), strings.Join(known, ", "), more)
}

func runPurge(ctx context.Context, w *writer, p retention.PurgeParams, opts purgeOptions, out, errOut io.Writer) error {
	dry, err := retention.Eligible(ctx, w.pool, p)
	if err != nil {
		return err
	}
	// An unfinished run of the tool resumes, though its records are gone
	// (and the catalog may not name it).
	if p.Tool != "" && dry.Resumes == 0 {
		if err := checkTool(ctx, w, p.Tool); err != nil {
			return err
		}
	}
	what := "every tool"
	if p.Tool != "" {
		what = "tool " + termtext.Clean(p.Tool)
	}
	n := dry.Count
	// With -o json the lines for people go to stderr, the report to stdout.
	human := out
	if opts.Output == "json" {
		human = errOut
	}
	report := purgeJSON{DryRun: dry}
	if p.Tool != "" {
		report.Tool = &p.Tool
	}
	fmt.Fprintf(human, "%s of %s would be purged: completed, retention ended before %s, not held, no unreviewed conflicts\n",
		counted(n, "record"), what, dry.Before.UTC().Format(time.RFC3339))
	if dry.Resumes != 0 {
		fmt.Fprintf(human, "this resumes unfinished run %d\n", dry.Resumes)
	}
	if opts.DryRun {
		if opts.Output == "json" {
			return writeJSON(out, report)
		}
		return nil
	}
	if !opts.Yes {
		return usagef("nothing purged: add --yes to purge them")
	}
	// What was counted: nothing that expired since, no more than counted
	// (none when it counted none).
	p.DryRun = &dry
	fmt.Fprintf(errOut, "pace: %s\n", p.Pace)
	res, err := retention.Purge(ctx, w.pool, p, func(pr purgereport.Progress) {
		fmt.Fprintf(errOut, "purged %d of about %d (run %d, batch %d: %s)\n", pr.Purged, n, pr.Run, pr.Batches, batchPace(pr))
	})
	if err != nil {
		return err
	}
	started := "start"
	if dry.Resumes != 0 {
		started = "resume"
	}
	if opts.Output == "json" {
		report.Result = &res
		return writeJSON(out, report)
	}
	_, err = fmt.Fprintf(out, "purged %s in run %d, and %s; audit records %s#%d (%s) and %s#%d (result)\n",
		counted(res.Purged, "record"), res.Run, counted(res.TombstonesExpired, "expired tombstone"), termtext.Clean(res.AuditTenant), res.StartSeq, started, termtext.Clean(res.AuditTenant), res.AuditSeq)
	return err
}

// batchPace says what a purge's batch took and how long the purge pauses
// after it: "1000 records in 130.2ms, 2.6x its fastest; pausing 208.3ms".
func batchPace(pr purgereport.Progress) string {
	text := fmt.Sprintf("%s in %s", counted(pr.Records, "record"), pr.Took.Round(100*time.Microsecond))
	if pr.Slowdown > 0 {
		text += fmt.Sprintf(", %.1fx its fastest", pr.Slowdown)
	}
	if pr.Pause > 0 {
		text += fmt.Sprintf("; pausing %s", pr.Pause.Round(100*time.Microsecond))
	}
	return text
}
