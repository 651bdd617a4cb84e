package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ui"
)

type auditBatchesOptions struct {
	Limit  int
	After  string
	Output string
}

func newAuditBatchesCmd(g *globalFlags) *cobra.Command {
	var opts auditBatchesOptions
	cmd := &cobra.Command{
		Use:   "batches",
		Short: "List past bulk reconciliations and reconciler passes newest first, with their decisions' counts",
		Long: "List the bulk runs (resolve --by-lookup, R in the console) and reconciler passes the connected role\n" +
			"may see, newest first: when it started and by whom, the filter it was planned from, when its\n" +
			"decisions were made, the tenants and tools decided, and each group's counts by lookup verdict and\n" +
			"decision (decided; skipped: refused as changed since the lookup; failed: any other refusal).\n" +
			"Row-level security decides: a role sees the runs it started, every run when it sees every tenant,\n" +
			"and otherwise the runs with a decision it may see, and of those only their records it may see (a\n" +
			"one-tenant role sees its tenant's part of a run). A run from before migration 00029 has no\n" +
			"filter (\"not recorded\"). A record the run skipped before trying leaves no audit record.\n" +
			"audit list batch:ID lists a run's records.\n" +
			"When more runs match, the next page's cursor goes to standard error (table) or into the JSON's\n" +
			"\"next\"; pass it to --after.",
		Example: "  opsdesk audit batches\n" +
			"  opsdesk audit batches --limit 10 -o json\n" +
			"  opsdesk audit list batch:0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkAuditBatches(opts); err != nil {
				return err
			}
			return withView(cmd, g, func(ctx context.Context, v *storeview.Store) error {
				return runAuditBatches(ctx, v, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	addPageFlags(cmd, &opts.Limit, &opts.After, &opts.Output, "runs")
	return cmd
}

// auditBatchesJSON is `audit batches -o json`.
type auditBatchesJSON struct {
	Batches []readmodel.Batch `json:"batches"`
	DBTime  time.Time         `json:"db_time"`
	// Next continues the list (--after); empty on the last page.
	Next string `json:"next"`
}

// checkAuditBatches refuses bad flags before the database is asked.
func checkAuditBatches(opts auditBatchesOptions) error {
	if err := checkOutput(opts.Output); err != nil {
		return err
	}
	if opts.Limit < 1 || opts.Limit > 1000 {
		return usagef("--limit %d: give a number from 1 to 1000", opts.Limit)
	}
	if opts.After != "" {
		if _, err := readmodel.ParseBatchCursor(opts.After); err != nil {
			return usagef("--after: %w", err)
		}
	}
	return nil
}

func runAuditBatches(ctx context.Context, v *storeview.Store, opts auditBatchesOptions, w, notes io.Writer) error {
	if err := checkAuditBatches(opts); err != nil {
		return err
	}
	q := readmodel.BatchQuery{Limit: opts.Limit}
	if opts.After != "" {
		c, _ := readmodel.ParseBatchCursor(opts.After) // checked above
		q.After = &c
	}
	page, err := v.AuditBatches(ctx, q)
	if err != nil {
		return err
	}
	next := ""
	if page.Next != nil {
		next = page.Next.String()
	}
	if opts.Output == "json" {
		return writeJSON(w, auditBatchesJSON{Batches: page.Batches, DBTime: page.DBTime, Next: next}) // nil is [] (writeJSON)
	}
	const more = "audit batches -o json prints it whole."
	list := func(values []string, name func(string) string) string {
		out := make([]string, len(values))
		for i, s := range values {
			out[i] = name(s)
		}
		return shown(strings.Join(out, ", "), fieldBytes, more)
	}
	same := func(s string) string { return s }
	for i, b := range page.Batches {
		if i > 0 {
			fmt.Fprintln(w)
		}
		started := b.StartedBy
		if b.StartedByName != nil {
			started += " (" + *b.StartedByName + ")"
		}
		fmt.Fprintf(w, "batch %s  started %s UTC by %s\n", termtext.Clean(b.ID), b.StartedAt.UTC().Format("2006-01-02 15:04:05"),
			shown(started, fieldBytes, more))
		fmt.Fprintf(w, "  filter   %s\n", shown(b.FilterText(), fieldBytes, more))
		if b.FirstAt == nil || b.LastAt == nil {
			fmt.Fprintf(w, "  decided  nothing you may see\n")
		} else {
			fmt.Fprintf(w, "  decided  %s → %s UTC (%s), %s\n", b.FirstAt.UTC().Format("2006-01-02 15:04:05"),
				b.LastAt.UTC().Format("15:04:05"), ui.ShortDuration(b.Span), counted(b.Records, "audit record"))
			by := list(b.Roles, same)
			if len(b.DisplayNames) > 0 {
				by += " (" + list(b.DisplayNames, same) + ")"
			}
			fmt.Fprintf(w, "  by       %s\n", by)
			fmt.Fprintf(w, "  records  %s of %s in %s\n", counted(b.Operations, "record"), list(b.Tools, same), list(b.Tenants, audited.TenantName))
		}
		for _, g := range b.Groups {
			fmt.Fprintf(w, "  %-26s %s\n", shown(g.Label(), cellBytes, more), g.Counts())
		}
		fmt.Fprintf(w, "  records: opsdesk audit list batch:%s\n", termtext.Clean(b.ID))
	}
	if len(page.Batches) == 0 {
		fmt.Fprintln(w, "(no bulk runs you may see)")
	}
	if next != "" {
		fmt.Fprintf(notes, "opsdesk: more runs match; next page: --after %s\n", next)
	}
	return nil
}
