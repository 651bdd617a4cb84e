package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/ui"
)

type auditListOptions struct {
	Filter string
	Limit  int
	After  string
	Output string
}

func newAuditListCmd(g *globalFlags) *cobra.Command {
	var opts auditListOptions
	cmd := &cobra.Command{
		Use:   "list [FILTER...]",
		Short: "List audit records newest first, the console's audit browser for scripts",
		Long: "List the audit records the connected role may see, newest first across every chain. The\n" +
			"arguments are a filter in the console's language:\n  " +
			strings.ReplaceAll(readmodel.AuditFilterHelp, "\n", "\n  ") + "\n" +
			"When more records match, the next page's cursor goes to standard error (table) or into the\n" +
			"JSON's \"next\"; pass it to --after.",
		Example: "  opsdesk audit list tenant:acme action:decide:* age<24h\n" +
			"  opsdesk audit list outcome:denied,failed since:2026-11-30T10:00Z --limit 200 -o json\n" +
			"  opsdesk audit list tenant:acme id:48213 --after a1.MTc2…",
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Filter = strings.Join(args, " ")
			return withView(cmd, g, func(ctx context.Context, v *storeview.Store) error {
				return runAuditList(ctx, v, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	addPageFlags(cmd, &opts.Limit, &opts.After, &opts.Output, "records")
	return cmd
}

// addPageFlags gives a paged list command (audit list, audit batches)
// its --limit, --after and -o, worded for what it lists.
func addPageFlags(cmd *cobra.Command, limit *int, after, output *string, what string) {
	f := cmd.Flags()
	f.IntVar(limit, "limit", 50, "at most this many "+what+" (1-1000)")
	f.StringVar(after, "after", "", "continue after this cursor (printed when more "+what+" match)")
	f.StringVarP(output, "output", "o", "table", "table|json")
}

// auditListJSON is `audit list -o json`.
type auditListJSON struct {
	Records []readmodel.AuditRow `json:"records"`
	DBTime  time.Time            `json:"db_time"`
	// Next continues the list (--after); empty on the last page.
	Next string `json:"next"`
}

func runAuditList(ctx context.Context, v *storeview.Store, opts auditListOptions, w, notes io.Writer) error {
	if err := checkOutput(opts.Output); err != nil {
		return err
	}
	if opts.Limit < 1 || opts.Limit > 1000 {
		return usagef("--limit %d: give a number from 1 to 1000", opts.Limit)
	}
	f, err := readmodel.ParseAuditFilter(opts.Filter)
	if err != nil {
		return usagef("filter: %w", err)
	}
	if len(f.Tenants) > 0 {
		role, missing, err := v.AuditChainsNotVisible(ctx, f.Tenants)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return fmt.Errorf("no audit chain %s visible to %s", tenantList(missing), termtext.Clean(role))
		}
	}
	q := readmodel.AuditQuery{Filter: f, Limit: opts.Limit}
	if opts.After != "" {
		c, err := readmodel.ParseAuditCursor(opts.After)
		if err != nil {
			return usagef("--after: %w", err)
		}
		q.After = &c
	}
	page, err := v.AuditList(ctx, q)
	if err != nil {
		return err
	}
	next := ""
	if page.Next != nil {
		next = page.Next.String()
	}
	if opts.Output == "json" {
		return writeJSON(w, auditListJSON{Records: page.Rows, DBTime: page.DBTime, Next: next}) // nil is [] (writeJSON)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT (UTC)\tTENANT\tSEQ\tROLE\tACTION\tOUTCOME\tTOOL\tKEY\tOP\tCHANGE\tFLAGS")
	// Stored text is cut (shown): a tool name or a change may be of any
	// size.
	const more = "the same audit list with -o json prints it whole."
	cell := func(s string) string { return shown(s, cellBytes, more) }
	for _, r := range page.Rows {
		var change []string
		for _, c := range r.Changes() {
			change = append(change, c.Field+" "+c.Before+"→"+c.After)
		}
		var flags []string
		for _, fl := range []struct {
			on   bool
			name string
		}{{r.Forced, "forced"}, {r.Override, "override"}, {r.HasEvidence, "evidence"}} {
			if fl.on {
				flags = append(flags, fl.name)
			}
		}
		op := "-"
		if r.OperationID > 0 {
			op = fmt.Sprint(r.OperationID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.At.UTC().Format("2006-01-02 15:04:05.000"), cell(audited.TenantName(r.Tenant)), r.Seq, cell(r.Role),
			cell(r.Action), ui.OutcomeText(r.Outcome), dash(cell(r.Tool)), dash(cell(r.Key)), op,
			dash(shown(strings.Join(change, ", "), fieldBytes, more)), dash(strings.Join(flags, ",")))
	}
	if len(page.Rows) == 0 {
		fmt.Fprintln(tw, "(no audit records match)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		// Where a script reading the table won't trip on it.
		fmt.Fprintf(notes, "opsdesk: more records match; next page: --after %s\n", next)
	}
	return nil
}

type auditExportOptions struct {
	Tenant      *string
	SinceSeq    int64
	Checkpoints []string
	Out         string
	Resume      string
}

func newAuditExportCmd(g *globalFlags) *cobra.Command {
	var opts auditExportOptions
	var tenant string
	cmd := &cobra.Command{
		Use:   "export [--tenant T] [--since-seq N] [--checkpoint FILE]... [-o FILE | --resume FILE]",
		Short: "Export the audit chains as JSON lines that verify without the database",
		Long: "Write the audit records the connected role may see (or --tenant's chain), chain by chain in seq\n" +
			"order with every column their hashes cover, and the given signed checkpoints, as JSON lines:\n" +
			"opsdesk audit verify --from-export FILE then verifies them on any machine, with no database.\n" +
			"Each line has a \"kind\": export (a header), record, checkpoint, end (a trailer; a file cut short\n" +
			"lacks it).\n\n" +
			"Resuming: --resume FILE appends to FILE the records after the last seq of each chain FILE holds,\n" +
			"as a new segment; the whole file verifies as one trail. --since-seq N (with --tenant) starts\n" +
			"that chain after seq N: a chain that starts after seq 1 verifies anchored by its first record's\n" +
			"prev_hash, which only a checkpoint can vouch for.",
		Example: "  opsdesk audit export --checkpoint cp-2026-11-30.json -o audit.jsonl\n" +
			"  opsdesk audit export --resume audit.jsonl --checkpoint cp-2026-12-01.json\n" +
			"  opsdesk audit export --tenant acme --since-seq 1200 > acme-tail.jsonl",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("tenant") {
				opts.Tenant = &tenant
			}
			if cmd.Flags().Changed("since-seq") && opts.Tenant == nil {
				return usagef("--since-seq counts one chain's records: give --tenant too (or --resume FILE for every chain)")
			}
			if opts.SinceSeq < 0 {
				return usagef("--since-seq %d: give a seq of 0 or more", opts.SinceSeq)
			}
			if opts.Out != "" && opts.Resume != "" {
				return usagef("-o and --resume both name the file to write: --resume appends to its file, -o writes a new one")
			}
			if opts.Resume != "" && cmd.Flags().Changed("since-seq") {
				return usagef("--resume continues each chain after the last seq its file holds: leave out --since-seq")
			}
			cps := make([]*audit.Checkpoint, len(opts.Checkpoints))
			for i, path := range opts.Checkpoints {
				cp, err := audit.ReadCheckpoint(path)
				if err != nil {
					return usagef("--checkpoint: %w", err)
				}
				if _, err := cp.CheckSignature(nil); err != nil {
					return usagef("--checkpoint %s: %w", path, err)
				}
				cps[i] = cp
			}
			exportOpts := audit.ExportOpts{Tenant: opts.Tenant, Checkpoints: cps}
			if opts.Tenant != nil && opts.SinceSeq > 0 {
				exportOpts.After = map[string]int64{*opts.Tenant: opts.SinceSeq}
			}
			w, finish, err := opts.open(&exportOpts, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			err = withAuditPool(cmd, g, func(ctx context.Context, pool *pgxpool.Pool) error {
				sum, err := audit.Export(ctx, pool, exportOpts, w)
				if err != nil {
					// It names chains and roles as the database holds them.
					return errors.New(termtext.Clean(err.Error()))
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "opsdesk: exported %s of %s and %s as %s at %s\n",
					counted(sum.Records, "record"), counted(len(sum.Chains), "chain"), counted(len(cps), "checkpoint"), termtext.Clean(sum.Role), sum.At.UTC().Format(time.RFC3339))
				return nil
			})
			return errors.Join(err, finish(err))
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "only this tenant's chain ('' is the chain of events outside any tenant)")
	f.Int64Var(&opts.SinceSeq, "since-seq", 0, "with --tenant: only the records after this seq")
	f.StringArrayVar(&opts.Checkpoints, "checkpoint", nil, "a checkpoint file to include (repeat for several)")
	f.StringVarP(&opts.Out, "output", "o", "", "write to this new file (default: standard output)")
	f.StringVar(&opts.Resume, "resume", "", "append to this earlier export what it lacks")
	return cmd
}

// open returns where the export goes, and a function that closes it: a
// new file (-o), the file resumed (--resume, after reading where each
// chain stops), or standard output. A failed export removes the new file;
// a failed resume cuts the file back to its length before it, so that it
// never ends in half a segment.
func (o auditExportOptions) open(opts *audit.ExportOpts, stdout io.Writer) (io.Writer, func(error) error, error) {
	switch {
	case o.Out != "":
		f, err := os.OpenFile(o.Out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			return nil, nil, usagef("-o %s exists: an export is never overwritten (choose another file, or --resume it)", o.Out)
		}
		if err != nil {
			return nil, nil, usagef("-o: %w", err)
		}
		return f, func(failed error) error {
			err := f.Close()
			if failed != nil {
				return os.Remove(o.Out)
			}
			return err
		}, nil
	case o.Resume != "":
		f, err := os.OpenFile(o.Resume, os.O_RDWR, 0)
		if err != nil {
			return nil, nil, usagef("--resume: %w", err)
		}
		last, err := audit.LastSeqs(f)
		if err != nil {
			f.Close()
			return nil, nil, usagef("--resume %s: %w", o.Resume, err)
		}
		if opts.Tenant != nil {
			last = map[string]int64{*opts.Tenant: last[*opts.Tenant]}
		}
		opts.After = last
		size, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("--resume %s: %w", o.Resume, err)
		}
		return f, func(failed error) error {
			if failed != nil {
				return errors.Join(f.Truncate(size), f.Close())
			}
			return f.Close()
		}, nil
	}
	return stdout, func(error) error { return nil }, nil
}

// runAuditVerifyExport verifies an export file without any database.
func runAuditVerifyExport(opts auditVerifyOptions, w io.Writer) error {
	f, err := os.Open(opts.FromExport)
	if err != nil {
		return usagef("--from-export: %w", err)
	}
	defer f.Close()
	vopts := audit.ExportVerifyOpts{Partial: opts.Partial}
	if opts.PublicKey != "" {
		pub, err := audit.ReadPublicKey(opts.PublicKey)
		if err != nil {
			return usagef("--public-key: %w", err)
		}
		vopts.PublicKey = pub
	}
	if opts.Checkpoint != "" {
		cp, err := audit.ReadCheckpoint(opts.Checkpoint)
		if err != nil {
			return usagef("--checkpoint: %w", err)
		}
		vopts.Checkpoints = []*audit.Checkpoint{cp}
	}
	rep, err := audit.VerifyExport(f, vopts)
	if err != nil {
		return fmt.Errorf("%s: %w", opts.FromExport, err)
	}
	if opts.Output == "json" {
		if err := writeJSON(w, rep); err != nil {
			return err
		}
	} else {
		outside := ""
		if len(vopts.Checkpoints) > 0 {
			outside = fmt.Sprintf(" and %d kept outside it (%s)", len(vopts.Checkpoints), termtext.Clean(opts.Checkpoint))
		}
		fmt.Fprintf(w, "export %s: %s, %s%s, verified without a database\n",
			termtext.Clean(opts.FromExport), counted(rep.Segments, "segment"), counted(checkpointCount(rep)-len(vopts.Checkpoints), "checkpoint"), outside)
		for i, r := range rep.Reports {
			if i > 0 {
				fmt.Fprintln(w)
			}
			// No ✓ for the chains when the file around them fails.
			shown := *r
			shown.OK = r.OK && rep.Problem == ""
			if err := writeAuditReport(w, &shown); err != nil {
				return err
			}
		}
		if rep.Problem != "" {
			fmt.Fprintf(w, "✗ %s\n", termtext.Clean(rep.Problem))
		}
		if rep.Warning != "" {
			fmt.Fprintf(w, "! %s (verify with --checkpoint and --public-key to vouch for it)\n", rep.Warning)
		}
	}
	for _, r := range rep.Reports {
		if err := auditFailure(r); err != nil {
			return err
		}
	}
	if rep.Problem != "" {
		return fmt.Errorf("the export does not verify: %s", termtext.Clean(rep.Problem))
	}
	return nil
}

func checkpointCount(rep *audit.ExportReport) int {
	n := 0
	for _, r := range rep.Reports {
		if r.Checkpoint != nil {
			n++
		}
	}
	return n
}
