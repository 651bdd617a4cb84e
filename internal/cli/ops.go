package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ui"
)

func newOpsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ops",
		Short: "List, show and look up operations (the console's queries, for scripts)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("ops needs a command: list, show, get or reveal (see opsdesk ops --help)")
		},
	}
	addGlobalFlags(cmd.PersistentFlags(), g)
	cmd.AddCommand(newOpsListCmd(g), newOpsShowCmd(g), newOpsGetCmd(g), newRevealCmd(g))
	return cmd
}

type opsListOptions struct {
	State, Tenant, Tool, Filter string
	Sort                        string
	Limit                       int
	Output                      string
}

func newOpsListCmd(g *globalFlags) *cobra.Command {
	var opts opsListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List operations, newest first",
		Long:  "List operations. Filter with flags or the console's filter language:\n  " + readmodel.FilterHelp,
		Example: "  opsdesk ops list --state stuck --tool create-ticket\n" +
			"  opsdesk ops list --filter 'state:stuck tenant:acme age>10m' -o json",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withView(cmd, g, func(ctx context.Context, v *storeview.Store) error {
				return runOpsList(ctx, v, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.State, "state", "", "pending|stuck|completed|rejected|released|conflicted (a,b for either)")
	f.StringVar(&opts.Tenant, "tenant", "", "only this tenant")
	f.StringVar(&opts.Tool, "tool", "", "only this tool")
	f.StringVar(&opts.Filter, "filter", "", "a filter in the console's language")
	f.StringVar(&opts.Sort, "sort", string(readmodel.SortNewest),
		"newest; lease: pending records by lease expiry, then the others newest first; expires: completed records by retention expiry, then the others")
	f.IntVar(&opts.Limit, "limit", 50, "at most this many operations (1-1000)")
	f.StringVarP(&opts.Output, "output", "o", "table", "table|json")
	return cmd
}

// withView loads the configuration, opens the read store and runs fn.
func withView(cmd *cobra.Command, g *globalFlags, fn func(context.Context, *storeview.Store) error) error {
	return withConfiguredView(cmd, g, func(ctx context.Context, v *storeview.Store, _ *config.Config) error { return fn(ctx, v) })
}

// withConfiguredView is withView for a command that also needs the
// configuration (the tool catalog, say).
func withConfiguredView(cmd *cobra.Command, g *globalFlags, fn func(context.Context, *storeview.Store, *config.Config) error) error {
	cfg, err := loadConfig(cmd, g)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	view, pool, err := openView(ctx, cfg.Context)
	if err != nil {
		return err
	}
	defer pool.Close()
	// Sealed first, as the console's poll does: what people decided counts
	// (a deferral), and its audit record has its place, in what this shows.
	// A seal that fails leaves entries queued, which verify and the
	// exporter report.
	_, _ = view.Seal(ctx)
	return fn(ctx, view, withRecordedPolicies(ctx, view, cfg))
}

// listFilter combines --filter with the shorthand flags through the filter
// language, so the same rules (and errors) apply.
func (o opsListOptions) listFilter() (readmodel.Filter, error) {
	terms := []string{o.Filter}
	for field, v := range map[string]string{"state": o.State, "tenant": o.Tenant, "tool": o.Tool} {
		if v != "" {
			terms = append(terms, field+":"+strconv.Quote(v))
		}
	}
	f, err := readmodel.ParseFilter(strings.Join(terms, " "))
	if err != nil {
		return f, usagef("filter: %w", err)
	}
	return f, nil
}

func runOpsList(ctx context.Context, v *storeview.Store, opts opsListOptions, w, notes io.Writer) error {
	if err := checkOutput(opts.Output); err != nil {
		return err
	}
	if opts.Limit < 1 || opts.Limit > 1000 {
		return usagef("--limit %d: give a number from 1 to 1000", opts.Limit)
	}
	f, err := opts.listFilter()
	if err != nil {
		return err
	}
	sort := readmodel.Sort(opts.Sort)
	if !validSort(sort) {
		return usagef("--sort %q: one of newest, lease, expires", opts.Sort)
	}
	page, err := v.List(ctx, readmodel.Query{Filter: f, Sort: sort, Limit: opts.Limit})
	if err != nil {
		return err
	}
	if page.Next != nil {
		// Never a silent cut: say so where scripts reading stdout won't trip.
		fmt.Fprintf(notes, "opsdesk: showing the first %s; more match (raise --limit, up to 1000, or narrow --filter)\n", counted(opts.Limit, "operation"))
	}
	if opts.Output == "json" {
		items := make([]listItem, len(page.Rows))
		for i, r := range page.Rows {
			items[i] = newListItem(r)
		}
		return writeJSON(w, items)
	}
	return writeTable(w, page.Rows)
}

func validSort(s readmodel.Sort) bool {
	for _, known := range readmodel.Sorts {
		if s == known {
			return true
		}
	}
	return false
}

func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return usagef("-o %q: one of table, json", o)
	}
	return nil
}

// listItem is a row in `ops list -o json`.
type listItem struct {
	ID                    int64      `json:"id"`
	Tenant                string     `json:"tenant"`
	Tool                  string     `json:"tool"`
	Key                   string     `json:"key"`
	State                 string     `json:"state"`
	Stuck                 bool       `json:"stuck"`
	Conflicted            bool       `json:"conflicted"`
	Owner                 string     `json:"owner"`
	Attempt               int        `json:"attempt"`
	LeaseAgeSeconds       *float64   `json:"lease_age_seconds"`
	LeaseExpiresInSeconds *float64   `json:"lease_expires_in_seconds"`
	ExpiresAt             *time.Time `json:"expires_at"`
	Version               int64      `json:"version"`
	Held                  bool       `json:"held"`
	DBTime                time.Time  `json:"db_time"`
}

func newListItem(r readmodel.Row) listItem {
	it := listItem{
		ID: r.ID, Tenant: r.Tenant, Tool: r.Tool, Key: r.Key, State: string(r.State), Stuck: r.Stuck(),
		Conflicted: r.Conflicted, Owner: r.Owner, Attempt: r.Attempt, Version: r.Version, Held: r.Held, DBTime: r.DBTime,
	}
	if r.Pending() {
		age, in := seconds(r.LeaseAge()), seconds(r.LeaseExpiresIn())
		it.LeaseAgeSeconds, it.LeaseExpiresInSeconds = &age, &in
	}
	if !r.ExpiresAt.IsZero() {
		it.ExpiresAt = &r.ExpiresAt
	}
	return it
}

func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// writeJSON writes v as -o json does: in opsdesk's JSON convention
// (conventional), indented, with the controls a terminal acts on escaped.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(conventional(v)); err != nil {
		return err
	}
	_, err := w.Write(termtext.EscapeControls(buf.Bytes()))
	return err
}

func writeTable(w io.Writer, rows []readmodel.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tTOOL\tKEY\tSTATE\tOWNER\tLEASE AGE\tLEASE\tTRY\tRETENTION")
	for _, r := range rows {
		age, lease := "-", "-"
		if r.Pending() {
			age, lease = ui.ShortDuration(r.LeaseAge()), ui.Relative(r.LeaseExpiresIn())
		}
		retention := "-"
		if !r.ExpiresAt.IsZero() {
			retention = ui.Relative(r.ExpiresAt.Sub(r.DBTime))
		}
		// Stored text goes to the terminal only cut and cleaned (shown):
		// a key may hold escape sequences, an owner a megabyte.
		more := opsShowMore(r.ID)
		cell := func(s string) string { return shown(s, cellBytes, more) }
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, cell(r.Tenant), cell(r.Tool), cell(r.Key),
			ui.RowStateText(r), dash(cell(r.Owner)), age, lease, r.Attempt, retention)
	}
	if len(rows) == 0 {
		fmt.Fprintln(tw, "(no operations match)")
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type opsShowOptions struct {
	Output string
}

func newOpsShowCmd(g *globalFlags) *cobra.Command {
	var opts opsShowOptions
	cmd := &cobra.Command{
		Use:     "show ID",
		Short:   "Show one operation by its number",
		Example: "  opsdesk ops show 48213",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("%q is not an operation number (such as 48213)", args[0])
			}
			if err := checkOutput(opts.Output); err != nil {
				return err
			}
			return withView(cmd, g, func(ctx context.Context, v *storeview.Store) error {
				d, err := v.Get(ctx, id)
				if errors.Is(err, readmodel.ErrNotFound) {
					return fmt.Errorf("no operation %d", id)
				}
				if err != nil {
					return err
				}
				return writeDetail(cmd.OutOrStdout(), d, opts.Output)
			})
		},
	}
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "table", "table|json")
	return cmd
}

type opsGetOptions struct {
	Tenant, Tool, Key string
	Output            string
}

func newOpsGetCmd(g *globalFlags) *cobra.Command {
	var opts opsGetOptions
	cmd := &cobra.Command{
		Use:     "get --tenant T --tool T --key K",
		Short:   "Look up an operation by its identity, or explain why there is none",
		Example: "  opsdesk ops get --tenant acme --tool create-ticket --key run-42:create-ticket",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Tenant == "" || opts.Tool == "" || opts.Key == "" {
				return usagef("--tenant, --tool and --key are all required")
			}
			if err := checkOutput(opts.Output); err != nil {
				return err
			}
			return withView(cmd, g, func(ctx context.Context, v *storeview.Store) error {
				return runOpsGet(ctx, v, opts, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Tenant, "tenant", "", "tenant (required)")
	f.StringVar(&opts.Tool, "tool", "", "tool (required)")
	f.StringVar(&opts.Key, "key", "", "idempotency key (required)")
	f.StringVarP(&opts.Output, "output", "o", "table", "table|json")
	return cmd
}

// absentExplanation says what an absent identity means. (A released
// record is not absent: its detail says who released it, when and why.)
const absentExplanation = "no attempt was ever recorded for this identity: the next call with it will execute"

func runOpsGet(ctx context.Context, v *storeview.Store, opts opsGetOptions, w io.Writer) error {
	d, err := v.GetByIdentity(ctx, opts.Tenant, opts.Tool, opts.Key)
	if purged, ok := errors.AsType[*readmodel.PurgedError](err); ok {
		if opts.Output == "json" {
			return writeJSON(w, map[string]any{
				"tenant": opts.Tenant, "tool": opts.Tool, "key": opts.Key, "state": "purged",
				"operation_id": purged.OperationID, "purged_at": purged.PurgedAt, "tombstone_until": purged.TombstoneUntil,
				"explanation": ui.AfterPurge,
			})
		}
		_, err := fmt.Fprintf(w, "%s/%s/%s: purged\nrecord %d was purged %s (%s); its tombstone lasts until %s.\n%s\n",
			termtext.Clean(opts.Tenant), termtext.Clean(opts.Tool), termtext.Clean(opts.Key), purged.OperationID,
			purged.PurgedAt.UTC().Format("2006-01-02 15:04:05 MST"), ui.Relative(purged.PurgedAt.Sub(purged.DBTime)),
			purged.TombstoneUntil.UTC().Format("2006-01-02 15:04:05 MST"), ui.AfterPurge)
		return err
	}
	if errors.Is(err, readmodel.ErrNotFound) {
		check := ""
		if absent, ok := errors.AsType[*readmodel.AbsentError](err); ok {
			check = absent.Check()
		}
		if opts.Output == "json" {
			return writeJSON(w, map[string]string{
				"tenant": opts.Tenant, "tool": opts.Tool, "key": opts.Key, "state": "absent", "explanation": absentExplanation,
				"check": check,
			})
		}
		_, err := fmt.Fprintf(w, "%s/%s/%s: absent\n%s\n", termtext.Clean(opts.Tenant), termtext.Clean(opts.Tool), termtext.Clean(opts.Key), absentExplanation)
		if err == nil && check != "" {
			_, err = fmt.Fprintln(w, termtext.Clean(check))
		}
		return err
	}
	if err != nil {
		return err
	}
	return writeDetail(w, d, opts.Output)
}

func writeDetail(w io.Writer, d readmodel.Detail, output string) error {
	if output == "json" {
		return writeJSON(w, d)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	more := opsShowMore(d.ID)
	// Each value is cut (shown); a line made of several stored values
	// (a conflict's, a decision's) has them cut one by one as well, so
	// that a huge owner does not push the rest of the line out.
	line := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, shown(v, fieldBytes, more)) }
	at := atTime(d.DBTime)
	line("id", strconv.FormatInt(d.ID, 10))
	line("identity", identityText(d.Row))
	line("state", ui.RowStateText(d.Row))
	if d.Outcome != "" {
		line("outcome", d.Outcome)
	}
	line("effect", d.Effect)
	line("tool version", d.ToolVersion)
	line("fingerprint", d.FingerprintTag+" (keyed tag: equal tags, equal requests)")
	line("owner", dash(d.Owner))
	line("attempt", strconv.Itoa(d.Attempt))
	line("version", strconv.FormatInt(d.Version, 10))
	line("created", at(d.CreatedAt))
	line("leased", at(d.LeasedAt))
	if d.Pending() {
		line("lease expires", at(d.LeaseExpiresAt))
	}
	line("completed", at(d.CompletedAt))
	line("retention ends", at(d.ExpiresAt))
	if d.Held {
		line("legal hold", "held: no purge deletes it until an admin releases it")
	}
	line("result ref", dash(d.ResultRef))
	if d.HasResult {
		line("result", fmt.Sprintf("hidden: opsdesk ops reveal %d --reason TEXT shows it (audited)", d.ID))
	}
	line("conflicts", fmt.Sprintf("%d (last %s)", d.ConflictCount, at(d.LastConflictAt)))
	for _, c := range d.Conflicts {
		line("", conflictText(d, c, more))
	}
	if len(d.Conflicts) > 0 {
		line("", fmt.Sprintf("what differs: opsdesk conflicts show %d --reveal --reason TEXT (audited)", d.ID))
	}
	for i, dec := range d.Decisions {
		k := ""
		if i == 0 {
			k = "decisions"
		}
		line(k, decisionText(dec, at, more))
	}
	line("database time", d.DBTime.UTC().Format(time.RFC3339))
	return tw.Flush()
}

// atTime writes a time for people: UTC, and how long ago or ahead of
// dbTime (the database's clock) it is; "-" for none.
func atTime(dbTime time.Time) func(time.Time) string {
	return func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		when, ok := ui.Infinite(t)
		if !ok {
			when = t.UTC().Format("2006-01-02 15:04:05 MST")
		}
		return when + " (" + ui.Relative(t.Sub(dbTime)) + ")"
	}
}

// identityText is a record's tenant/tool/key, each cut to cellBytes (not
// yet cleaned).
func identityText(r readmodel.Row) string {
	more := opsShowMore(r.ID)
	return ui.Cut(r.Tenant, cellBytes, more) + "/" + ui.Cut(r.Tool, cellBytes, more) + "/" + ui.Cut(r.Key, cellBytes, more)
}

// conflictText is one of record d's conflicts for people, its stored
// values cut to cellBytes, more saying how to see them whole (not yet
// cleaned).
func conflictText(d readmodel.Detail, c readmodel.Conflict, more string) string {
	reviewed := "unreviewed"
	if c.Reviewed {
		reviewed = "reviewed"
	}
	cut := func(s string) string { return ui.Cut(s, cellBytes, more) }
	return fmt.Sprintf("#%d %s by %s: %s (version %s) vs original %s (version %s), %s",
		c.ID, atTime(d.DBTime)(c.AttemptedAt), cut(c.Owner), cut(c.FingerprintTag), cut(c.ToolVersion),
		cut(d.FingerprintTag), cut(d.ToolVersion), reviewed)
}

// decisionText is one decision for people: what, who, when, why, its
// stored values cut (not yet cleaned).
func decisionText(d readmodel.Decision, at func(time.Time) string, more string) string {
	cut := func(s string) string { return ui.Cut(s, cellBytes, more) }
	who := cut(d.Role)
	if d.DisplayName != "" {
		who += " (says " + cut(d.DisplayName) + ")"
	}
	what := cut(strings.TrimPrefix(d.Action, "decide:"))
	switch {
	case d.ResultRef != "":
		what += " " + cut(d.ResultRef)
	case !d.SnoozeUntil.IsZero():
		what += " until " + at(d.SnoozeUntil)
	}
	if d.Forced {
		what += " [forced]"
	}
	if d.Override {
		what += " [override]"
	}
	return fmt.Sprintf("%s by %s %s: %s (audit #%d)", what, who, at(d.At), ui.Cut(d.Reason, fieldBytes, more), d.AuditSeq)
}
