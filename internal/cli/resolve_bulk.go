package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/ui"
)

// bulkOptions are resolve's flags for a bulk reconciliation by lookup.
type bulkOptions struct {
	Filter      string
	ByLookup    bool
	Yes         bool
	Concurrency int
	Accept      []string
	Reason      string
	Output      string
}

// bulkHelp is resolve's help on the bulk form.
const bulkHelp = "\n\nWith --filter and --by-lookup, resolve reconciles every stuck record the filter matches by\n" +
	"its lookup's evidence. The filter is the console's (" + "state:stuck and tool: are required, and each\n" +
	"tool needs a lookup in the catalog; tenant:, key:, id:, owner: and age> narrow it; at most 10,000\n" +
	"records). Every record's lookup runs (--concurrency at once), and the records are grouped:\n" +
	"  found       the provider has the effect: proposed completed, with the provider's reference\n" +
	"  not found   it has none: proposed not executed (released; the next retry runs it)\n" +
	"  no answer   no definite answer (timeout, other status): no proposal, decide one by one\n" +
	"  error       unusable answer (a bad reference) or no exact lookup URL: no proposal\n" +
	"A found or not found record with conflicting attempts nobody reviewed (its key reused with\n" +
	"another intent) goes into a group of its own, found-conflicted or not-found-conflicted, with\n" +
	"the same proposal; it is accepted only when --accept names it, never with the clean records.\n" +
	"Each proposed group (--accept, default found and not-found) is confirmed by typing its number\n" +
	"of records on a terminal, or by --yes; without --yes and without a terminal nothing is decided.\n" +
	"Each record is then decided by itself under its own version check and audit record, with\n" +
	"--reason; all share the run's batch id (the audit records' details.batch). A record that\n" +
	"changed since it was listed is skipped and reported. Ctrl-C stops cleanly: decisions in flight\n" +
	"finish; opsdesk audit batches lists past runs."

func addBulkFlags(cmd *cobra.Command, opts *bulkOptions) {
	f := cmd.Flags()
	f.StringVar(&opts.Filter, "filter", "", "with --by-lookup: the stuck records to reconcile, such as 'state:stuck tool:charge-card'")
	f.BoolVar(&opts.ByLookup, "by-lookup", false, "decide what each record's lookup supports (found: completed; not found: not executed)")
	f.BoolVar(&opts.Yes, "yes", false, "with --by-lookup: accept the proposed groups without typing their counts")
	f.IntVar(&opts.Concurrency, "concurrency", bulk.DefaultConcurrency,
		fmt.Sprintf("with --by-lookup: lookups and decisions at once (1 to %d)", bulk.MaxConcurrency))
	f.StringSliceVar(&opts.Accept, "accept", []string{"found", "not-found"},
		"with --by-lookup: the groups to accept: found, not-found, found-conflicted, not-found-conflicted")
}

// bulkOnlyFlags go with --filter only; singleOnlyFlags with an ID only.
var (
	bulkOnlyFlags   = []string{"by-lookup", "yes", "concurrency", "accept"}
	singleOnlyFlags = []string{"as", "result-ref", "result", "evidence", "expect-version", "snooze", "force", "override", "no-lookup"}
)

// checkBulk refuses bad input before anything is read, looked up or
// decided: a usage error that says what to fix.
func checkBulk(cmd *cobra.Command, args []string, opts *bulkOptions) (readmodel.Filter, []bulk.Verdict, error) {
	flags := cmd.Flags()
	if len(args) > 0 {
		return readmodel.Filter{}, nil, usagef("--filter selects the records: give no ID with it")
	}
	for _, name := range singleOnlyFlags {
		if flags.Changed(name) {
			return readmodel.Filter{}, nil, usagef("--%s decides one record (resolve ID); --filter --by-lookup decides what each record's lookup supports", name)
		}
	}
	if !opts.ByLookup {
		return readmodel.Filter{}, nil, usagef("--filter decides records only --by-lookup: add --by-lookup")
	}
	if strings.TrimFunc(opts.Filter, unicode.IsSpace) == "" {
		return readmodel.Filter{}, nil, usagef("--filter is empty: select the stuck records to reconcile, such as 'state:stuck tool:charge-card'")
	}
	f, err := readmodel.ParseFilter(opts.Filter)
	if err != nil {
		return f, nil, usagef("--filter: %v", err)
	}
	if err := checkOutput(opts.Output); err != nil {
		return f, nil, err
	}
	if opts.Concurrency < 1 || opts.Concurrency > bulk.MaxConcurrency {
		return f, nil, usagef("--concurrency %d: give 1 to %d", opts.Concurrency, bulk.MaxConcurrency)
	}
	var groups []bulk.Verdict
	for _, a := range opts.Accept {
		v := bulk.Verdict(strings.ReplaceAll(strings.TrimSpace(a), "-", "_"))
		if v.Proposal() == "" {
			return f, nil, usagef("--accept %q: found, not-found, found-conflicted or not-found-conflicted "+
				"(the groups with a proposed decision)", a)
		}
		if !slices.Contains(groups, v) {
			groups = append(groups, v)
		}
	}
	if len(groups) == 0 {
		return f, nil, usagef("--accept is empty: found, not-found or both")
	}
	if opts.Reason == "" {
		return f, nil, usagef("--reason is required: it goes into every record's audit record")
	}
	if err := bulk.CheckReason(opts.Reason); err != nil {
		return f, nil, usagef("--reason: %v", err)
	}
	return f, groups, nil
}

// isTerminalIn tells whether r is a terminal a person can type into.
func isTerminalIn(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// bulkRun is what runBulkResolve needs beside the writer.
type bulkRun struct {
	opts   bulkOptions
	filter readmodel.Filter
	groups []bulk.Verdict
	// in is where typed confirmations come from when prompt is set.
	in     *bufio.Reader
	prompt bool
	out    io.Writer
	errOut io.Writer
}

// bulkReport is `resolve --by-lookup -o json`.
type bulkReport struct {
	BatchID string `json:"batch_id"`
	Filter  string `json:"filter"`
	Listed  int    `json:"listed"`
	// LookupSeconds is how long the lookups took.
	LookupSeconds float64           `json:"lookup_seconds"`
	Concurrency   int               `json:"concurrency"`
	NotAsked      []bulk.Item       `json:"not_asked"`
	Groups        []bulkGroupReport `json:"groups"`
	Error         string            `json:"error,omitempty"`
}

type bulkGroupReport struct {
	Verdict  bulk.Verdict       `json:"verdict"`
	Proposal reconcile.Decision `json:"proposal,omitempty"`
	Count    int                `json:"count"`
	// Conflicted is how many of the records have conflicting attempts
	// nobody reviewed, and ConflictCount their conflicting attempts in
	// all.
	Conflicted    int `json:"conflicted"`
	ConflictCount int `json:"conflict_count"`
	// Accepted tells whether the group was confirmed and decided; Counts
	// are its records' outcomes then.
	Accepted bool                     `json:"accepted"`
	Counts   map[bulk.ItemOutcome]int `json:"counts,omitempty"`
	// DecideSeconds is how long the group's decisions took (0: not
	// accepted).
	DecideSeconds float64            `json:"decide_seconds"`
	Note          string             `json:"note,omitempty"`
	Records       []bulkRecordReport `json:"records"`
}

type bulkRecordReport struct {
	bulk.Item
	Outcome    bulk.ItemOutcome `json:"outcome,omitempty"`
	Message    string           `json:"message,omitempty"`
	Audit      string           `json:"audit,omitempty"`
	State      string           `json:"state,omitempty"`
	NewVersion int64            `json:"new_version,omitempty"`
}

func runBulkResolve(ctx context.Context, w *writer, run bulkRun) error {
	r, err := bulk.New(bulk.Config{Desk: w.desk, Lister: w.view, Concurrency: run.opts.Concurrency})
	if err != nil {
		return usagef("%v", err)
	}
	rows, err := r.List(ctx, run.filter)
	if errors.Is(err, bulk.ErrFilter) || errors.Is(err, bulk.ErrTooMany) {
		return usagef("--filter %s: %v", termtext.Clean(run.filter.String()), err)
	}
	if err != nil {
		return err
	}
	text := run.opts.Output != "json"
	say := func(format string, args ...any) {
		if text {
			fmt.Fprintf(run.out, format+"\n", args...)
		}
	}
	if len(rows) == 0 {
		if !text {
			return writeJSON(run.out, bulkReport{Filter: run.filter.String(), Concurrency: run.opts.Concurrency, Groups: []bulkGroupReport{}})
		}
		say("no stuck records you see match %s: nothing to do", termtext.Clean(run.filter.String()))
		return nil
	}
	fmt.Fprintf(run.errOut, "looking up %s (%d at once)...\n", counted(len(rows), "record"), run.opts.Concurrency)
	plan, lookupErr := r.Lookup(ctx, run.filter.String(), rows, throttled(run.errOut, "looked up", len(rows)))
	if plan.BatchID == "" && lookupErr != nil {
		// The run could not start (opsdesk.start_batch): nothing was asked.
		say("the run did not start: nothing was looked up or decided")
		return finishBulk(run, bulkReport{Filter: run.filter.String(), Listed: plan.Listed, Concurrency: run.opts.Concurrency,
			NotAsked: plan.NotAsked, Groups: []bulkGroupReport{}}, lookupErr)
	}
	report := bulkReport{BatchID: plan.BatchID, Filter: run.filter.String(), Listed: plan.Listed,
		LookupSeconds: plan.Took.Seconds(), Concurrency: run.opts.Concurrency, NotAsked: plan.NotAsked}
	if report.NotAsked == nil {
		report.NotAsked = []bulk.Item{}
	}
	say("batch %s: %d stuck records match %s; their lookups took %s", plan.BatchID, plan.Listed,
		termtext.Clean(run.filter.String()), plan.Took.Round(time.Millisecond))
	for _, g := range plan.Groups {
		report.Groups = append(report.Groups, groupReport(g))
		if text {
			writeGroup(run.out, g)
		}
	}
	if lookupErr != nil {
		say("%s not asked: nothing was decided", wereCounted(len(plan.NotAsked), "record"))
		return finishBulk(run, report, lookupErr)
	}

	var stopped error
	for _, v := range run.groups {
		g := plan.Group(v)
		if g == nil || g.Count() == 0 || stopped != nil {
			// A conflicted group is in the plan only when it holds records.
			continue
		}
		gr := &report.Groups[slices.IndexFunc(report.Groups, func(r bulkGroupReport) bool { return r.Verdict == v })]
		confirm := g.Count()
		if !run.opts.Yes {
			confirm, err = askCount(run, *g)
			if err != nil {
				return err
			}
			if confirm != g.Count() {
				gr.Note = "not confirmed: nothing decided"
				say("%s: not confirmed, nothing decided", g.Verdict.Label())
				continue
			}
		}
		res, err := r.Accept(ctx, plan, v, bulk.AcceptParams{Reason: run.opts.Reason, Confirm: confirm},
			throttled(run.errOut, "deciding "+g.Verdict.Label(), g.Count()))
		if errors.Is(err, bulk.ErrNotConfirmed) || errors.Is(err, bulk.ErrNoReason) || errors.Is(err, bulk.ErrNoProposal) {
			return usagef("%v", err)
		}
		gr.Accepted, gr.Counts, gr.DecideSeconds = true, res.Counts, res.Took.Seconds()
		for i, item := range res.Items {
			gr.Records[i] = bulkRecordReport{Item: item.Item, Outcome: item.Outcome, Message: item.Message, Audit: item.Audit,
				State: item.State, NewVersion: item.NewVersion}
		}
		if text {
			writeAccepted(run.out, res)
		}
		if err != nil {
			stopped = err
		} else if res.Counts[bulk.Refused]+res.Counts[bulk.Failed] > 0 {
			stopped = fmt.Errorf("%s: %d refused and %d failed (see above)", g.Verdict.Label(), res.Counts[bulk.Refused], res.Counts[bulk.Failed])
		}
	}
	for _, g := range plan.Groups {
		if g.Verdict.Conflicted() && !slices.Contains(run.groups, g.Verdict) {
			say("%s with conflicting attempts nobody reviewed %s left stuck: review them (opsdesk conflicts list), "+
				"or accept them knowingly with --accept %s", counted(g.Count(), g.Verdict.Lookup().Label()+" record"),
				isAre(g.Count()), g.Verdict.Flag())
		}
	}
	if left := plan.Group(bulk.NoAnswer).Count() + plan.Group(bulk.Error).Count(); left > 0 {
		say("%s without definite evidence %s left stuck: decide them one by one (opsdesk resolve ID --as …), "+
			"or run again once the provider answers", counted(left, "record"), isAre(left))
	}
	say("their audit records carry details.batch = %s", plan.BatchID)
	return finishBulk(run, report, stopped)
}

// finishBulk writes the JSON report, and returns err as the command's.
func finishBulk(run bulkRun, report bulkReport, err error) error {
	if run.opts.Output == "json" {
		if err != nil {
			report.Error = err.Error()
		}
		if jerr := writeJSON(run.out, report); jerr != nil {
			return jerr
		}
	}
	return err
}

func groupReport(g bulk.Group) bulkGroupReport {
	gr := bulkGroupReport{Verdict: g.Verdict, Proposal: g.Proposal, Count: g.Count(), Records: make([]bulkRecordReport, len(g.Items))}
	gr.Conflicted, gr.ConflictCount = g.Conflicted()
	for i, item := range g.Items {
		gr.Records[i] = bulkRecordReport{Item: item}
	}
	return gr
}

// samples is how many records of each group are shown.
const samples = 3

func writeGroup(w io.Writer, g bulk.Group) {
	fmt.Fprintf(w, "  %-9s %6d  → %s\n", g.Verdict.Label(), g.Count(), g.Verdict.ProposalText())
	if g.Verdict.Conflicted() {
		_, conflicts := g.Conflicted()
		fmt.Fprintf(w, "      ≠ each has conflicting attempts nobody reviewed (%s in all); accepted only by --accept %s\n",
			counted(conflicts, "conflicting attempt"), g.Verdict.Flag())
	}
	for _, item := range g.Samples(samples) {
		fmt.Fprintf(w, "      e.g. %s\n", itemLine(item))
	}
}

func itemLine(item bulk.Item) string {
	return termtext.Clean(fmt.Sprintf("%d %s (version %d): %s", item.ID, itemIdentity(item), item.Version, ui.Cut(item.Note, fieldBytes, "")))
}

// itemIdentity is an item's tenant/tool/key, each cut to cellBytes (not
// yet cleaned).
func itemIdentity(item bulk.Item) string {
	return identityText(readmodel.Row{ID: item.ID, Tenant: item.Tenant, Tool: item.Tool, Key: item.Key})
}

// listed is how many records of each outcome are named one by one.
const listed = 20

func writeAccepted(w io.Writer, res bulk.GroupResult) {
	var parts []string
	for _, o := range bulk.ItemOutcomes {
		if n := res.Counts[o]; n > 0 || o == bulk.Decided {
			parts = append(parts, fmt.Sprintf("%d %s", n, o.Label()))
		}
	}
	fmt.Fprintf(w, "%s → %s: %s in %s\n", res.Verdict.Label(), res.Decision, strings.Join(parts, ", "), res.Took.Round(time.Millisecond))
	for _, o := range []bulk.ItemOutcome{bulk.Skipped, bulk.Refused, bulk.Failed} {
		items := res.Only(o)
		for i, item := range items {
			if i == listed {
				fmt.Fprintf(w, "      and %d more %s\n", len(items)-listed, o)
				break
			}
			line := fmt.Sprintf("%s %d %s: %s", o, item.ID, itemIdentity(item.Item), ui.Cut(item.Message, fieldBytes, ""))
			if item.Audit != "" {
				line += " (audit record " + ui.Cut(item.Audit, cellBytes, "") + ")"
			}
			fmt.Fprintf(w, "      %s\n", termtext.Clean(line))
		}
	}
}

// askCount asks the person to type the group's number of records; any
// other answer (or none) leaves the group undecided.
func askCount(run bulkRun, g bulk.Group) (int, error) {
	if !run.prompt {
		return 0, usagef("nothing decided: confirm on a terminal, or pass --yes")
	}
	what := strings.Replace(counted(g.Count(), "record"), " ", " "+g.Verdict.Lookup().Label()+" ", 1)
	if g.Verdict.Conflicted() {
		_, conflicts := g.Conflicted()
		what += fmt.Sprintf(" with %s nobody reviewed", counted(conflicts, "conflicting attempt"))
	}
	fmt.Fprintf(run.errOut, "decide the %s as %s? type %d to confirm, anything else skips: ", what, g.Proposal, g.Count())
	line, err := run.in.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("read the confirmation: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(withoutEscapes(line)))
	if err != nil {
		return -1, nil
	}
	return n, nil
}

// withoutEscapes drops the escape sequences in a typed line: a terminal's
// late answer to a query (its background colour, the cursor's position)
// lands in standard input before what the person typed.
func withoutEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '[': // CSI: parameters up to a final byte
			i += 2
			for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
				i++
			}
		case i+1 < len(s) && s[i+1] == ']': // OSC: up to BEL or ESC \
			i += 2
			for i < len(s) && s[i] != 0x07 && !(s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\') {
				i++
			}
			if i < len(s) && s[i] == 0x1b {
				i++
			}
		default:
			i++
		}
	}
	return b.String()
}

// throttled reports progress on w at most twice a second, and at the end.
func throttled(w io.Writer, what string, total int) func(bulk.Progress) {
	var last time.Time
	return func(p bulk.Progress) {
		if p.Done < p.Total && time.Since(last) < 500*time.Millisecond {
			return
		}
		last = time.Now()
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(p.Counts)) {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ReplaceAll(k, "_", " "), p.Counts[k]))
		}
		fmt.Fprintf(w, "%s %d of %d (%s)\n", what, p.Done, total, strings.Join(parts, ", "))
	}
}
