// Package bulk reconciles many stuck records at once, guided by evidence:
// after a provider outage, hundreds of records wait for a person, and the
// provider's outcome lookup can tell most of them apart.
//
// A run has three steps, each its own call so that a screen can show what
// happens between them:
//
//  1. List: the stuck records a filter matches, as the person sees them
//     (row-level security decides which tenants), each with the version it
//     was seen at.
//  2. Lookup: the tool's outcome lookup for every listed record, a bounded
//     number at once, with progress; the records are grouped by verdict
//     (found, not found, no answer, error), and each definite group gets
//     the decision its evidence supports (found: completed with the
//     provider's reference; not found: not executed). A definite record
//     with conflicting attempts nobody reviewed goes into a group of its
//     own (found, conflicted; not found, conflicted), accepted apart from
//     the clean ones, so that nobody decides it without seeing that.
//  3. Accept, group by group: one reason for the group and the number of
//     its records typed as confirmation. Each record is then decided by
//     itself, through the people's function decide, under its own check of
//     the version seen and with its own audit record; the records of a run
//     share its batch id in the audit trail. A record that changed since it
//     was listed is skipped and reported, never decided.
//
// Nothing but the listed records is read again or decided. Cancelling the
// context stops a step cleanly: lookups not yet answered are reported as
// not asked, and decisions not yet started are not made, while those in
// flight finish (each bounded by Config.DecideTimeout), so that no
// decision is left half known.
//
// For a screen: run each step in a command of its own with a context the
// screen cancels (esc). Progress is reported from the goroutine that
// called the step, one call at a time, after every record; forward it to
// the screen without blocking (dropping reports a busy screen missed
// costs nothing: each carries the totals so far). CheckFilter tells
// whether the list's filter can start a run at all, Group.Count is the
// number to type, Group.Samples the records to show, and GroupResult the
// outcome of each record of an accepted group.
package bulk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// Verdict is what a record's lookup told, as a run groups the records.
type Verdict string

// Verdicts.
const (
	// Found: the provider has the effect, and names a usable reference.
	Found Verdict = "found"
	// NotFound: the provider has no such effect.
	NotFound Verdict = "not_found"
	// NoAnswer: the provider gave no definite answer (a timeout, a refused
	// connection, a status that is neither found nor not found, a
	// redirect); asking again later may tell.
	NoAnswer Verdict = "no_answer"
	// Error: the answer cannot be used or the question cannot be asked: a
	// found answer without a usable reference (missing, too long, control
	// characters, a member named twice), an identity that makes no exact
	// lookup URL, a tool without a lookup.
	Error Verdict = "error"

	// FoundConflicted and NotFoundConflicted name the groups of the
	// records whose lookup was definite but which have conflicting
	// attempts nobody reviewed (their key was reused with another
	// intent): the evidence proposes the same decision as for the clean
	// records, but a person accepts them on their own, knowingly, never
	// together with the clean ones. Only a plan's groups (and their
	// items) carry them; a lookup's progress counts the lookup's verdict.
	FoundConflicted    Verdict = "found_conflicted"
	NotFoundConflicted Verdict = "not_found_conflicted"
)

// Verdicts lists what a lookup tells, in the order a run shows their
// groups and counts its progress. A plan shows the conflicted groups
// after the clean definite ones, and only when they hold records.
var Verdicts = []Verdict{Found, NotFound, NoAnswer, Error}

// groupOrder is the order of a plan's groups.
var groupOrder = []Verdict{Found, NotFound, FoundConflicted, NotFoundConflicted, NoAnswer, Error}

// Conflicted tells whether v names a group of records with unreviewed
// conflicting attempts.
func (v Verdict) Conflicted() bool { return v == FoundConflicted || v == NotFoundConflicted }

// Lookup is what the lookup told of v's records: Found for
// FoundConflicted, NotFound for NotFoundConflicted, v itself otherwise.
func (v Verdict) Lookup() Verdict {
	switch v {
	case FoundConflicted:
		return Found
	case NotFoundConflicted:
		return NotFound
	}
	return v
}

// withConflicts is the group of a record of lookup verdict v that has
// unreviewed conflicting attempts: the records without a proposal stay
// in their group, decided one by one anyway.
func (v Verdict) withConflicts() Verdict {
	switch v {
	case Found:
		return FoundConflicted
	case NotFound:
		return NotFoundConflicted
	}
	return v
}

// Proposal is the decision a group's evidence supports; "" for the
// groups without definite evidence, which are decided one by one.
func (v Verdict) Proposal() reconcile.Decision {
	switch v.Lookup() {
	case Found:
		return reconcile.Completed
	case NotFound:
		return reconcile.NotExecuted
	}
	return ""
}

// ProposalText says in words what accepting the verdict's group does to
// each of its records: one wording for the console and the command line.
func (v Verdict) ProposalText() string {
	if k, ok := reconcile.KindOf(v.Proposal()); ok && k.Words.Group != "" {
		return k.Words.Group
	}
	return "no proposal: decided one by one"
}

// Label is the verdict in words.
func (v Verdict) Label() string {
	if v.Conflicted() {
		return v.Lookup().Label() + ", conflicted"
	}
	return strings.ReplaceAll(string(v), "_", " ")
}

// Flag is the verdict as a command line names it: found-conflicted.
func (v Verdict) Flag() string { return strings.ReplaceAll(string(v), "_", "-") }

// Decider is what a run needs of one person's desk. *desk.Decider
// satisfies it.
type Decider interface {
	// HasLookup tells whether the catalog gives tool an outcome lookup.
	HasLookup(tool string) bool
	// Ask runs the tool's lookup; ok is false when the tool has none.
	Ask(ctx context.Context, tenant, tool, key string) (reconcile.Answer, bool)
	// Decide applies one decision; a refusal is a *reconcile.RefusedError.
	Decide(ctx context.Context, tool string, p reconcile.DecideParams) (reconcile.Result, error)
	// SealResults seals the audit trail and gives results their sequence
	// numbers: a run's decisions leave their entries queued
	// (DecideParams.SealLater), and the run seals them at once at its end.
	SealResults(ctx context.Context, results []*reconcile.Result) error
}

// BatchStarter starts runs: Lookup and Start need a Decider that is one
// too (*desk.Desk is). It is apart from Decider so that a desk that only
// looks up (a screen's test) need not pretend to start runs.
type BatchStarter interface {
	// StartBatch records a run about to decide, planned from filter, and
	// returns its batch id (opsdesk.start_batch): decide takes no other.
	StartBatch(ctx context.Context, filter string) (string, error)
}

// Lister lists records as the person sees them. *storeview.Store
// satisfies it.
type Lister interface {
	List(ctx context.Context, q readmodel.Query) (readmodel.Page, error)
}

// Limits and defaults.
const (
	// DefaultConcurrency is how many lookups (and decisions) run at once
	// unless Config says otherwise.
	DefaultConcurrency = 8
	// MaxConcurrency bounds Config.Concurrency: a provider that just came
	// back from an outage is not to be flooded, and each decision in
	// flight holds a connection.
	MaxConcurrency = 64
	// DefaultMaxRecords is how many records a run takes at most unless
	// Config says otherwise; a filter that matches more is refused, so
	// that a run is always one the person looked at in full.
	DefaultMaxRecords = 10_000
	// DefaultDecideTimeout bounds one decision unless Config says
	// otherwise: decide waits for a record's lock held by the library
	// without bound, and one such record must not hold up a run.
	DefaultDecideTimeout = 30 * time.Second
	// maxReasonBytes is the longest reason decide takes (00016).
	maxReasonBytes = 2000
	// maxNote bounds an item's note.
	maxNote = 300
	// pageSize is the records read per query (storeview's cap).
	pageSize = 1000
	// maxFailuresInARow stops a group whose decisions keep failing (not
	// refused: failing, such as a store that went away).
	maxFailuresInARow = 10
)

// Errors of a run's input, matched with errors.Is: nothing was looked up
// or decided.
var (
	ErrFilter       = errors.New("the filter cannot select records for a bulk reconciliation")
	ErrTooMany      = errors.New("the filter matches too many records")
	ErrNoReason     = errors.New("a reason is required")
	ErrNotConfirmed = errors.New("not confirmed")
	ErrNoProposal   = errors.New("the group has no proposed decision")
	ErrConfig       = errors.New("bad bulk configuration")
)

// HTTPClient is a client for a run's lookups (desk.Desk.Client): it
// keeps a connection per lookup in flight to each provider, where
// http.DefaultClient keeps two and opens and closes the others for every
// lookup. Proxies and timeouts are the default transport's.
func HTTPClient(concurrency int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(concurrency, 2)
	return &http.Client{Transport: tr}
}

// Config configures a Reconciler.
type Config struct {
	Desk   Decider
	Lister Lister
	// Concurrency is how many lookups, and then decisions, run at once:
	// 1 to MaxConcurrency, 0 for DefaultConcurrency.
	Concurrency int
	// MaxRecords is how many records a run takes at most: 1 to
	// DefaultMaxRecords, 0 for DefaultMaxRecords.
	MaxRecords int
	// DecideTimeout bounds each decision (0: DefaultDecideTimeout).
	DecideTimeout time.Duration
}

// Reconciler runs bulk reconciliations for one person.
type Reconciler struct {
	cfg Config
}

// New checks cfg and returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	switch {
	case cfg.Desk == nil || cfg.Lister == nil:
		return nil, fmt.Errorf("%w: a desk and a lister are required", ErrConfig)
	case cfg.Concurrency < 0 || cfg.Concurrency > MaxConcurrency:
		return nil, fmt.Errorf("%w: concurrency %d: give 1 to %d", ErrConfig, cfg.Concurrency, MaxConcurrency)
	case cfg.MaxRecords < 0 || cfg.MaxRecords > DefaultMaxRecords:
		return nil, fmt.Errorf("%w: at most %d records a run, not %d", ErrConfig, DefaultMaxRecords, cfg.MaxRecords)
	case cfg.DecideTimeout < 0:
		return nil, fmt.Errorf("%w: a negative decision timeout", ErrConfig)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.MaxRecords == 0 {
		cfg.MaxRecords = DefaultMaxRecords
	}
	if cfg.DecideTimeout == 0 {
		cfg.DecideTimeout = DefaultDecideTimeout
	}
	return &Reconciler{cfg: cfg}, nil
}

// CheckFilter tells whether f can select a run's records: it keeps only
// stuck records (state:stuck and no other state: only a pending record
// whose lease expired is decided by evidence, and never by force), of one
// or more named tools (tool:charge-card: the evidence is one provider's,
// and an outage is one provider's), each with a lookup in the catalog. An
// empty filter, which would take every record, is refused with the rest;
// tenant:, key:, id:, owner: and age terms narrow further, and records the
// person may not see are never listed whatever the filter names.
func (r *Reconciler) CheckFilter(f readmodel.Filter) error {
	if len(f.States) != 1 || f.States[0] != readmodel.StateStuck || f.Conflicted {
		what := "the filter is empty"
		if s := f.String(); s != "" {
			what = fmt.Sprintf("%q selects more than stuck records", s)
		}
		return fmt.Errorf("%w: %s; write state:stuck and the tool, such as 'state:stuck tool:charge-card' "+
			"(only a pending record whose lease expired is decided by evidence)", ErrFilter, what)
	}
	if len(f.Tools) == 0 {
		return fmt.Errorf("%w: name the tool whose provider to ask, such as 'state:stuck tool:charge-card'", ErrFilter)
	}
	for _, tool := range f.Tools {
		if !r.cfg.Desk.HasLookup(tool) {
			return fmt.Errorf("%w: the catalog has no outcome lookup for tool %q, so its records cannot be reconciled by "+
				"evidence (add a lookup to the tool's catalog entry, or decide them one by one)", ErrFilter, tool)
		}
	}
	return nil
}

// List returns the records f matches (CheckFilter first), oldest first,
// each with the version it was seen at. More than Config.MaxRecords is
// ErrTooMany.
func (r *Reconciler) List(ctx context.Context, f readmodel.Filter) ([]readmodel.Row, error) {
	if err := r.CheckFilter(f); err != nil {
		return nil, err
	}
	rows, err := r.list(ctx, f, r.cfg.MaxRecords)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(rows, func(a, b readmodel.Row) int { return cmp.Compare(a.ID, b.ID) })
	return rows, nil
}

// list pages through f's records, at most limit of them.
func (r *Reconciler) list(ctx context.Context, f readmodel.Filter, limit int) ([]readmodel.Row, error) {
	var rows []readmodel.Row
	var after *readmodel.Cursor
	for {
		page, err := r.cfg.Lister.List(ctx, readmodel.Query{Filter: f, Sort: readmodel.SortNewest, Limit: pageSize, After: after})
		if err != nil {
			return nil, fmt.Errorf("list the records: %w", err)
		}
		rows = append(rows, page.Rows...)
		if len(rows) > limit {
			return nil, fmt.Errorf("%w: more than %d; narrow it (tenant:, age>, id:) and run again", ErrTooMany, limit)
		}
		if page.Next == nil {
			return rows, nil
		}
		after = page.Next
	}
}

// Item is one listed record and what its lookup told.
type Item struct {
	ID     int64  `json:"id"`
	Tenant string `json:"tenant"`
	Tool   string `json:"tool"`
	Key    string `json:"key"`
	// Version is the version the record was listed at: the one its
	// decision expects.
	Version int64 `json:"version"`
	// Verdict names the record's group: what its lookup told, and for a
	// definite answer whether Conflicted.
	Verdict Verdict `json:"verdict"`
	// Conflicted: when listed, the record had conflicting attempts nobody
	// reviewed; ConflictCount is how many conflicting attempts it has
	// (reviewed or not).
	Conflicted    bool `json:"conflicted"`
	ConflictCount int  `json:"conflict_count"`
	// Ref is the provider's reference of a found record.
	Ref string `json:"ref,omitempty"`
	// Note says what the lookup answered, or why the record has no
	// proposal: at most 300 bytes, without control characters.
	Note string `json:"note"`
	// Evidence goes into the record's audit record with its decision.
	Evidence reconcile.Evidence `json:"-"`
}

// Group is a run's records of one verdict.
type Group struct {
	Verdict Verdict `json:"verdict"`
	// Proposal is the decision the evidence supports ("" for none).
	Proposal reconcile.Decision `json:"proposal,omitempty"`
	Items    []Item             `json:"-"`
}

// Count is how many records the group holds: the number a person types
// to accept it.
func (g Group) Count() int { return len(g.Items) }

// Conflicted is how many of the group's records have unreviewed
// conflicting attempts, and Conflicts how many conflicting attempts they
// have in all.
func (g Group) Conflicted() (records, conflicts int) {
	for _, it := range g.Items {
		if it.Conflicted {
			records++
			conflicts += it.ConflictCount
		}
	}
	return records, conflicts
}

// Samples returns up to n of the group's records, spread over it (the
// first and the last among them), for a person to look at.
func (g Group) Samples(n int) []Item {
	if n <= 0 || len(g.Items) == 0 {
		return nil
	}
	if len(g.Items) <= n {
		return slices.Clone(g.Items)
	}
	out := make([]Item, 0, n)
	for i := range n {
		out = append(out, g.Items[i*(len(g.Items)-1)/max(n-1, 1)])
	}
	return out
}

// Plan is a run's lookups, grouped: what a person accepts group by group.
type Plan struct {
	// BatchID names the run in the audit trail: every decision of the run
	// carries it. The database chose it (Start).
	BatchID string
	// Filter is what the run was planned from, as its batch records it.
	Filter string
	// Groups holds a group for each of Verdicts, and after the clean
	// definite groups one for each conflicted verdict that holds records
	// (Place puts records in them).
	Groups []Group
	// NotAsked are the records whose lookup did not run or was cut short
	// because the run was cancelled: they are in no group.
	NotAsked []Item
	// Listed is how many records the run looked up (or meant to).
	Listed int
	// Took is how long the lookups took.
	Took time.Duration
}

// Group returns the group of verdict v.
func (p *Plan) Group(v Verdict) *Group {
	for i := range p.Groups {
		if p.Groups[i].Verdict == v {
			return &p.Groups[i]
		}
	}
	return nil
}

// Place puts item in its group: the one of its verdict, or, when it is
// Conflicted and its verdict definite, the conflicted group of that
// verdict (made when first needed, in its place among the groups), whose
// name item.Verdict then carries.
func (p *Plan) Place(item Item) {
	if item.Conflicted {
		item.Verdict = item.Verdict.withConflicts()
	}
	g := p.Group(item.Verdict)
	if g == nil {
		p.Groups = append(p.Groups, Group{Verdict: item.Verdict, Proposal: item.Verdict.Proposal()})
		slices.SortStableFunc(p.Groups, func(a, b Group) int {
			return cmp.Compare(slices.Index(groupOrder, a.Verdict), slices.Index(groupOrder, b.Verdict))
		})
		g = p.Group(item.Verdict)
	}
	g.Items = append(g.Items, item)
}

// Phase is a step of a run, as progress reports it.
type Phase string

// Phases.
const (
	PhaseLookup Phase = "lookup"
	PhaseDecide Phase = "decide"
)

// Progress is how far a step got. Counts are by verdict while looking up
// and by outcome while deciding.
type Progress struct {
	Phase       Phase
	Done, Total int
	Counts      map[string]int
}

// Lookup starts a run (Start: its batch, recording filter, what the rows
// were listed by: Filter.String of List's filter), then asks the provider
// about every row,
// Config.Concurrency at once, and groups the answers. A run that cannot
// start (a role that may not decide, a store that does not answer) asks
// nothing: every record is NotAsked, and the error says why. progress (may be nil) is called after each
// answer, from the calling goroutine, one call at a time. When ctx is
// cancelled the lookups in flight are cut short and no more start: the
// plan holds what was answered, the rest are NotAsked, and the error is
// ctx's.
func (r *Reconciler) Lookup(ctx context.Context, filter string, rows []readmodel.Row, progress func(Progress)) (*Plan, error) {
	started := &Plan{}
	if err := r.Start(ctx, started, filter); err != nil {
		plan := &Plan{Listed: len(rows)}
		for _, v := range Verdicts {
			plan.Groups = append(plan.Groups, Group{Verdict: v, Proposal: v.Proposal()})
		}
		for _, row := range rows {
			plan.NotAsked = append(plan.NotAsked, itemOf(row))
		}
		return plan, err
	}
	plan, err := r.LookupOnly(ctx, rows, progress)
	plan.BatchID, plan.Filter = started.BatchID, started.Filter
	return plan, err
}

// Start records plan's run as about to decide, planned from filter
// (opsdesk.start_batch; cut to reconcile.MaxBatchFilterBytes), and gives
// plan the run's batch id and filter.
// The database picks the id and keeps who started the run: decide
// refuses the run's id to any other login.
func (r *Reconciler) Start(ctx context.Context, plan *Plan, filter string) error {
	starter, ok := r.cfg.Desk.(BatchStarter)
	if !ok {
		return fmt.Errorf("%w: the desk (%T) cannot start a run", ErrConfig, r.cfg.Desk)
	}
	filter = reconcile.CutBatchFilter(filter)
	id, err := starter.StartBatch(ctx, filter)
	if err != nil {
		return err
	}
	plan.BatchID, plan.Filter = id, filter
	return nil
}

// LookupOnly is Lookup without starting a run: the plan has no batch id
// until Start gives it one (a reconciler pass starts its run only when it
// has something to decide, so that a pass that decides nothing leaves
// nothing behind).
func (r *Reconciler) LookupOnly(ctx context.Context, rows []readmodel.Row, progress func(Progress)) (*Plan, error) {
	start := time.Now()
	plan := &Plan{Listed: len(rows)}
	items := make([]Item, len(rows))
	asked := make([]bool, len(rows))
	counts := map[string]int{}
	done := 0
	runBounded(ctx, len(rows), r.cfg.Concurrency, func(ctx context.Context, i int) func() {
		item, ok := r.ask(ctx, rows[i])
		return func() {
			items[i], asked[i] = item, ok
			done++
			if ok {
				counts[string(item.Verdict)]++
			}
			if progress != nil {
				progress(Progress{Phase: PhaseLookup, Done: done, Total: len(rows), Counts: maps.Clone(counts)})
			}
		}
	})
	for _, v := range Verdicts {
		plan.Groups = append(plan.Groups, Group{Verdict: v, Proposal: v.Proposal()})
	}
	for i, item := range items {
		if !asked[i] {
			plan.NotAsked = append(plan.NotAsked, itemOf(rows[i]))
			continue
		}
		plan.Place(item)
	}
	plan.Took = time.Since(start)
	if err := ctx.Err(); err != nil {
		return plan, fmt.Errorf("lookups stopped after %d of %d: %w", len(rows)-len(plan.NotAsked), len(rows), err)
	}
	return plan, nil
}

// runBounded calls work for 0..n-1, at most limit at once, until ctx is
// done. The function each call returns runs on the calling goroutine, one
// at a time, as each call ends, and before its worker takes the next
// index: what it does (cancelling ctx, say) is seen by every later call.
func runBounded(ctx context.Context, n, limit int, work func(ctx context.Context, i int) func()) {
	type ended struct {
		then func()
		ack  chan struct{}
	}
	next := make(chan int)
	results := make(chan ended)
	go func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	workers := min(limit, n)
	finished := make(chan struct{})
	for range workers {
		go func() {
			defer func() { finished <- struct{}{} }()
			ack := make(chan struct{}, 1)
			for i := range next {
				results <- ended{work(ctx, i), ack}
				<-ack
			}
		}()
	}
	for running := workers; running > 0; {
		select {
		case e := <-results:
			e.then()
			e.ack <- struct{}{}
		case <-finished:
			running--
		}
	}
}

func itemOf(row readmodel.Row) Item {
	return Item{ID: row.ID, Tenant: row.Tenant, Tool: row.Tool, Key: row.Key, Version: row.Version,
		Conflicted: row.Conflicted, ConflictCount: row.ConflictCount}
}

// ask runs one record's lookup; ok is false when ctx ended before it
// answered.
func (r *Reconciler) ask(ctx context.Context, row readmodel.Row) (Item, bool) {
	item := itemOf(row)
	if ctx.Err() != nil {
		return item, false
	}
	ans, ok := r.cfg.Desk.Ask(ctx, row.Tenant, row.Tool, row.Key)
	if ctx.Err() != nil {
		// Cut short: its "no answer" says nothing of the provider.
		return item, false
	}
	item.Evidence = ans.Evidence
	item.Note = note(ans.Evidence.Summary)
	switch {
	case !ok:
		item.Verdict = Error
		item.Note = note("the catalog has no lookup for " + row.Tool)
	case ans.Evidence.Lookup == reconcile.LookupFound:
		err := ans.Err // why the answer gives no reference
		if err == nil {
			// Checked again: a Desk may answer other than reconcile.Ask.
			err = reconcile.CheckRef(ans.ResultRef)
		}
		if err != nil {
			// A summary may quote the reference: leave it out.
			item.Verdict = Error
			item.Note = note("the provider has it, but " + err.Error())
			break
		}
		item.Verdict, item.Ref = Found, ans.ResultRef
	case ans.Evidence.Lookup == reconcile.LookupNotFound:
		item.Verdict = NotFound
	case errors.Is(ans.Err, reconcile.ErrCannotAsk):
		item.Verdict = Error
	default:
		item.Verdict = NoAnswer
	}
	return item, true
}

// note is s cut to maxNote bytes, each control or invisible character
// replaced by U+FFFD.
func note(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	for _, c := range s {
		if !unicode.IsGraphic(c) {
			c = '\uFFFD'
		}
		if b.Len()+utf8.RuneLen(c) > maxNote-len("…") {
			b.WriteString("…")
			break
		}
		b.WriteRune(c)
	}
	return b.String()
}

// CheckReason tells whether reason can be a group's reason: not only
// white space (tabs, newlines and U+3000 included), at most 2,000 bytes,
// UTF-8 without NUL (which PostgreSQL's text cannot hold: every decision
// would fail).
func CheckReason(reason string) error {
	trimmed := strings.TrimFunc(reason, reconcile.IsSpace)
	switch {
	case trimmed == "":
		return fmt.Errorf("%w: it goes into each record's audit record, and white space is no reason", ErrNoReason)
	case len(trimmed) > maxReasonBytes:
		return fmt.Errorf("%w: at most %d bytes, not %d", ErrNoReason, maxReasonBytes, len(trimmed))
	case !utf8.ValidString(reason) || strings.ContainsRune(reason, 0):
		return fmt.Errorf("%w: it must be UTF-8 text without NUL characters", ErrNoReason)
	}
	return nil
}

// ItemOutcome is how a record of an accepted group ended.
type ItemOutcome string

// Outcomes.
const (
	// Decided: the decision was applied, with its audit record.
	Decided ItemOutcome = "decided"
	// Skipped: the record changed since it was listed (another decision,
	// a retry, a takeover, a purge), so it was not decided.
	Skipped ItemOutcome = "skipped"
	// Refused: the database refused the decision (and audited it).
	Refused ItemOutcome = "refused"
	// Failed: the decision did not complete (a timeout, a lost
	// connection); the record's history says whether it took effect.
	Failed ItemOutcome = "failed"
	// NotAttempted: the group stopped (cancelled, or the role may not
	// decide) before the record's turn.
	NotAttempted ItemOutcome = "not_attempted"
)

// ItemOutcomes lists the outcomes in the order results show them.
var ItemOutcomes = []ItemOutcome{Decided, Skipped, Refused, Failed, NotAttempted}

// Label is the outcome in words.
func (o ItemOutcome) Label() string { return strings.ReplaceAll(string(o), "_", " ") }

// ItemResult is one record's part in an accepted group.
type ItemResult struct {
	Item
	Outcome ItemOutcome `json:"outcome"`
	// Message says why a record was not decided.
	Message string `json:"message,omitempty"`
	// Audit names the audit record of the decision or refusal, "acme#42".
	Audit string `json:"audit,omitempty"`
	// State and NewVersion are the record's after the decision.
	State      string `json:"state,omitempty"`
	NewVersion int64  `json:"new_version,omitempty"`

	// audit is the decision's answer, its entry sealed at the run's end.
	audit reconcile.Result
}

// GroupResult is what accepting a group did, record by record.
type GroupResult struct {
	BatchID  string              `json:"batch_id"`
	Verdict  Verdict             `json:"verdict"`
	Decision reconcile.Decision  `json:"decision"`
	Items    []ItemResult        `json:"-"`
	Counts   map[ItemOutcome]int `json:"counts"`
	Took     time.Duration       `json:"-"`
}

// seal seals the run's audit entries into their chains at once, after
// its decisions: sealing after each would make the decisions of one
// tenant take its chain's head in turn. Items then name their records by
// sequence number; if the seal fails they keep naming the queued entry,
// which the next seal (any command's, the console's poll) takes.
func (r *Reconciler) seal(ctx context.Context, items []ItemResult) {
	var results []*reconcile.Result
	for i := range items {
		if items[i].audit.Entry != 0 {
			results = append(results, &items[i].audit)
		}
	}
	if len(results) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.DecideTimeout)
	defer cancel()
	if err := r.cfg.Desk.SealResults(ctx, results); err != nil {
		return
	}
	for i := range items {
		if items[i].audit.Entry != 0 {
			items[i].Audit = items[i].audit.AuditRef()
		}
	}
}

// Only returns the results with outcome o.
func (g GroupResult) Only(o ItemOutcome) []ItemResult {
	var out []ItemResult
	for _, r := range g.Items {
		if r.Outcome == o {
			out = append(out, r)
		}
	}
	return out
}

// AcceptParams is a person's acceptance of a group.
type AcceptParams struct {
	// Reason goes into every record's audit record.
	Reason string
	// Confirm is the number of records the person typed: it must be the
	// group's count.
	Confirm int
}

// Accept decides every record of plan's group v as the group's proposal,
// each by itself: a record whose version or state changed since it was
// listed is skipped (read again first, then checked again by decide). Up
// to Config.Concurrency decisions run at once; progress (may be nil) is
// called after each record, from the calling goroutine. The first refusal
// that says the role may not decide stops the group (it is audited, as
// every refusal is; the rest are not attempted), and so do ten failures
// in a row and a cancelled ctx: decisions in flight then finish, none
// starts. The error says why a group stopped; the result is valid either
// way.
func (r *Reconciler) Accept(ctx context.Context, plan *Plan, v Verdict, p AcceptParams, progress func(Progress)) (GroupResult, error) {
	g := plan.Group(v)
	if g == nil {
		return GroupResult{}, fmt.Errorf("%w: no group %q", ErrNoProposal, v)
	}
	res := GroupResult{BatchID: plan.BatchID, Verdict: v, Decision: g.Proposal, Counts: map[ItemOutcome]int{}}
	switch {
	case plan.BatchID == "":
		return res, fmt.Errorf("%w: the plan's run was never started (Lookup starts it; after LookupOnly, Start)", ErrConfig)
	case g.Proposal == "":
		return res, fmt.Errorf("%w: %s records have no definite evidence; decide them one by one", ErrNoProposal, v.Label())
	case len(g.Items) == 0:
		return res, fmt.Errorf("%w: the %s group is empty", ErrNoProposal, v.Label())
	case p.Confirm != len(g.Items):
		return res, fmt.Errorf("%w: the %s group holds %d records, and %d was typed: nothing was decided",
			ErrNotConfirmed, v.Label(), len(g.Items), p.Confirm)
	}
	if err := CheckReason(p.Reason); err != nil {
		return res, err
	}
	start := time.Now()
	res.Items = make([]ItemResult, len(g.Items))
	for i, item := range g.Items {
		res.Items[i] = ItemResult{Item: item, Outcome: NotAttempted}
	}
	current, err := r.Current(ctx, g.Items)
	if err != nil {
		// Nothing was attempted, and the counts say so as the items do:
		// a screen that reads the counts offers the group again.
		res.Counts[NotAttempted] = len(res.Items)
		return res, err
	}

	// stop ends the dispatch of decisions; in-flight ones finish.
	dispatch, stop := context.WithCancel(ctx)
	defer stop()
	var stopped error
	failures, done := 0, 0
	runBounded(dispatch, len(g.Items), r.cfg.Concurrency, func(dispatch context.Context, i int) func() {
		out := r.decideOne(dispatch, g.Items[i], g.Proposal, plan.BatchID, p.Reason, current)
		return func() {
			res.Items[i] = out.ItemResult
			done++
			res.Counts[out.Outcome]++
			var refused *reconcile.RefusedError
			switch {
			case out.Outcome == Refused && errors.As(out.err, &refused) && errors.Is(refused, reconcile.ErrNotPermitted):
				if stopped == nil {
					stopped = fmt.Errorf("stopped at the first refusal: %w", out.err)
				}
				stop()
			case out.Outcome == Failed:
				failures++
				if failures >= maxFailuresInARow && stopped == nil {
					stopped = fmt.Errorf("stopped after %d failed decisions in a row: %w", failures, out.err)
					stop()
				}
			default:
				failures = 0
			}
			if progress != nil {
				counts := map[string]int{}
				for o, n := range res.Counts {
					counts[string(o)] = n
				}
				progress(Progress{Phase: PhaseDecide, Done: done, Total: len(g.Items), Counts: counts})
			}
		}
	})
	clear(res.Counts)
	for _, out := range res.Items {
		res.Counts[out.Outcome]++
	}
	r.seal(ctx, res.Items)
	res.Took = time.Since(start)
	switch {
	case stopped != nil:
		return res, stopped
	case ctx.Err() != nil:
		return res, fmt.Errorf("decisions stopped after %d of %d: %w", done, len(g.Items), ctx.Err())
	}
	return res, nil
}

// Changed says how item's record changed since it was listed, by current
// (its records read again, by id: Current); "" when it is as listed: at
// the same version, still stuck, and with no conflicting attempt it did
// not have. A changed record is never decided.
func Changed(item Item, current map[int64]readmodel.Row) string {
	now, ok := current[item.ID]
	switch {
	case !ok:
		return "no longer visible: purged, or the role's access changed"
	case now.Version != item.Version:
		return fmt.Sprintf("changed since the lookup: now version %d (%s), listed at version %d", now.Version, now.State, item.Version)
	case now.State != readmodel.StateStuck:
		return fmt.Sprintf("no longer stuck: %s", now.State)
	case now.Conflicted && !item.Conflicted:
		// A conflict leaves the version as it was: the plan showed the
		// record clean, and the person accepted it as such.
		return "a conflicting attempt was recorded since the lookup: review it, or run again to accept the record knowingly"
	}
	return ""
}

// Current reads the items' records again, as the connected role sees them
// now, by id.
func (r *Reconciler) Current(ctx context.Context, items []Item) (map[int64]readmodel.Row, error) {
	out := make(map[int64]readmodel.Row, len(items))
	for chunk := range slices.Chunk(items, pageSize) {
		ids := make([]int64, len(chunk))
		for i, item := range chunk {
			ids[i] = item.ID
		}
		rows, err := r.list(ctx, readmodel.Filter{IDs: ids}, len(ids))
		if err != nil {
			return nil, fmt.Errorf("read the records again: %w", err)
		}
		for _, row := range rows {
			out[row.ID] = row
		}
	}
	return out, nil
}

// result is an ItemResult and the error behind it.
type result struct {
	ItemResult
	err error
}

// decideOne decides one record, unless it changed since it was listed or
// dispatch ended before its turn. The decision runs to its end whatever
// happens to dispatch (bounded by DecideTimeout), so that its outcome is
// known.
func (r *Reconciler) decideOne(dispatch context.Context, item Item, d reconcile.Decision, batch, reason string, current map[int64]readmodel.Row) result {
	out := result{ItemResult: ItemResult{Item: item}}
	if dispatch.Err() != nil {
		out.Outcome = NotAttempted
		return out
	}
	if why := Changed(item, current); why != "" {
		out.Outcome, out.Message = Skipped, why
		return out
	}
	p := reconcile.DecideParams{
		OperationID: item.ID, Decision: d, ExpectVersion: item.Version, Reason: reason,
		Evidence: item.Evidence, Batch: batch,
	}
	if k, _ := reconcile.KindOf(d); k.NeedsRef {
		p.ResultRef = item.Ref
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(dispatch), r.cfg.DecideTimeout)
	defer cancel()
	p.SealLater = true
	res, err := r.cfg.Desk.Decide(ctx, item.Tool, p)
	out.err = err
	out.audit = res
	if res.Entry != 0 {
		out.Audit = res.AuditRef()
	}
	var refused *reconcile.RefusedError
	switch {
	case err == nil:
		out.Outcome, out.State, out.NewVersion = Decided, res.State, res.Version
	case errors.As(err, &refused) && (errors.Is(err, reconcile.ErrChanged) || errors.Is(err, reconcile.ErrNotPending) ||
		errors.Is(err, reconcile.ErrLeaseLive)):
		out.Outcome, out.Message = Skipped, note("changed since the lookup: "+refused.Message)
	case errors.As(err, &refused):
		out.Outcome, out.Message = Refused, note(refused.Message)
	default:
		out.Outcome = Failed
		out.Message = note(fmt.Sprintf("%v (not known to be decided: the record's history says whether it was)", err))
	}
	return out
}
