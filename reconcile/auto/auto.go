// Package auto is the reconciler's pass: it decides, as a machine's login,
// the stuck records whose lookup is definite, for the tools whose catalog
// entry names auto_reconcile and the store's allowlist lets, and leaves
// everything else to people.
//
// A pass:
//
//  1. reads the store's settings (the pause, the allowlist): paused, it
//     decides nothing;
//  2. lists the stuck records of its tools (the longest stuck first, at
//     most Config.MaxRecords), and sets aside those a person must see
//     (held, unreviewed conflicting attempts, deferred by a person) and
//     those of tools the allowlist does not let;
//  3. asks each record's lookup (bulk.Reconciler.Lookup), and per tool
//     stops when the provider's error and no-answer rate passes
//     Config.MaxErrorRate: a provider half down must not release charges
//     that happened;
//  4. decides each definite record by itself, at the version it was listed
//     at, after reading it again (a record changed since is skipped), with
//     a reason naming the policy, the evidence and the batch, at most
//     Config.Concurrency at once and Config.Rate a second.
//
// The database enforces what a reconciler may do (migration 00027); the
// pass only avoids asking for what it would refuse. Cancelling the context
// stops dispatching: decisions in flight finish, so that none is left half
// known.
package auto

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
)

// Settings are the store's reconciler settings.
type Settings struct {
	Paused      bool
	PausedBy    string
	PauseReason string
	// Allow maps each tool to the verdicts the store lets a reconciler
	// decide on.
	Allow map[string][]bulk.Verdict
}

// Skip reasons: why a listed record was not decided.
const (
	SkipHeld         = "held"           // under legal hold
	SkipConflicted   = "conflicted"     // unreviewed conflicting attempts
	SkipDeferred     = "deferred"       // a person deferred it
	SkipNotAllowed   = "not_allowed"    // the store's allowlist does not let the tool or verdict
	SkipNoAnswer     = "no_answer"      // the provider gave no definite answer
	SkipLookupError  = "lookup_error"   // the answer cannot be used
	SkipProviderDown = "provider_down"  // the tool's error rate passed the threshold: nothing of it decided
	SkipChanged      = "changed"        // changed since the lookup
	SkipRefused      = "refused"        // the database refused it
	SkipFailed       = "failed"         // the decision's outcome is not known
	SkipNotAttempted = "not_attempted"  // the pass stopped first
	SkipDryRun       = "dry_run"        // --dry-run: would be decided
	SkipPaused       = "paused"         // the reconciler is paused
	SkipNotAsked     = "not_asked"      // the pass stopped before its lookup
	SkipTooMany      = "beyond_a_pass"  // more stuck records than a pass takes: next pass
	SkipForPeople    = "left_to_people" // the database left it to people
)

// SkipReasons lists the reasons in the order reports show them.
var SkipReasons = []string{SkipHeld, SkipConflicted, SkipDeferred, SkipForPeople, SkipNotAllowed, SkipNoAnswer,
	SkipLookupError, SkipProviderDown, SkipChanged, SkipRefused, SkipFailed, SkipNotAttempted, SkipNotAsked, SkipPaused,
	SkipTooMany, SkipDryRun}

// Defaults. A pass of 1,000 stuck records takes ten seconds at the
// default rate, so that with the command's default interval (5s) every
// definite one of an outage that size is decided within 30 seconds of
// becoming stuck (issue 23's target; docs/benchmarks.md measures it).
const (
	DefaultMaxErrorRate = 0.2
	DefaultMaxRecords   = 1000
	DefaultConcurrency  = 8
	DefaultRate         = 100.0
)

// Config configures a Runner.
type Config struct {
	// Bulk asks the lookups (its Concurrency bounds them).
	Bulk *bulk.Reconciler
	// Desk decides; Lister lists and reads records again.
	Desk   bulk.Decider
	Lister bulk.Lister
	// Settings reads the store's pause and allowlist.
	Settings func(ctx context.Context) (Settings, error)
	// Tools maps each tool the catalog names auto_reconcile for to its
	// verdicts.
	Tools map[string][]bulk.Verdict
	// MaxErrorRate is the share of a tool's lookups in a pass that may be
	// errors or no answers before the pass decides nothing of the tool
	// (0 < rate ≤ 1; 0 for DefaultMaxErrorRate).
	MaxErrorRate float64
	// MaxRecords is the most records a pass lists (0: DefaultMaxRecords).
	MaxRecords int
	// Concurrency is the decisions at once (0: DefaultConcurrency).
	Concurrency int
	// Rate is the most decisions a second (0: DefaultRate).
	Rate float64
	// DryRun decides nothing: the report says what would be decided.
	DryRun bool
	// DecideTimeout bounds each decision (0: bulk.DefaultDecideTimeout).
	DecideTimeout time.Duration
}

// Runner runs passes.
type Runner struct{ cfg Config }

// ErrConfig is a bad Config.
var ErrConfig = errors.New("bad reconciler configuration")

// New checks cfg.
func New(cfg Config) (*Runner, error) {
	switch {
	case cfg.Bulk == nil || cfg.Desk == nil || cfg.Lister == nil || cfg.Settings == nil:
		return nil, fmt.Errorf("%w: bulk, desk, lister and settings are required", ErrConfig)
	case !(cfg.MaxErrorRate >= 0 && cfg.MaxErrorRate <= 1): // NaN too: it would turn the check off
		return nil, fmt.Errorf("%w: the error rate is a share from 0 to 1, not %v", ErrConfig, cfg.MaxErrorRate)
	case cfg.MaxRecords < 0 || cfg.MaxRecords > bulk.DefaultMaxRecords:
		return nil, fmt.Errorf("%w: at most %d records a pass, not %d", ErrConfig, bulk.DefaultMaxRecords, cfg.MaxRecords)
	case cfg.Concurrency < 0 || cfg.Concurrency > bulk.MaxConcurrency:
		return nil, fmt.Errorf("%w: concurrency %d: give 1 to %d", ErrConfig, cfg.Concurrency, bulk.MaxConcurrency)
	case !(cfg.Rate >= 0) || math.IsInf(cfg.Rate, 1): // NaN or +Inf would lift the bound (0 is the default)
		return nil, fmt.Errorf("%w: a rate is a number of decisions a second from 0 (the default) up, not %v", ErrConfig, cfg.Rate)
	}
	for tool, vs := range cfg.Tools {
		if !cfg.Desk.HasLookup(tool) {
			return nil, fmt.Errorf("%w: tool %q has auto_reconcile but no lookup", ErrConfig, tool)
		}
		for _, v := range vs {
			if v.Proposal() == "" {
				return nil, fmt.Errorf("%w: tool %q: auto_reconcile names %q (found, not_found)", ErrConfig, tool, v)
			}
		}
	}
	cfg.MaxErrorRate = cmpOr(cfg.MaxErrorRate, DefaultMaxErrorRate)
	cfg.MaxRecords = cmpOr(cfg.MaxRecords, DefaultMaxRecords)
	cfg.Concurrency = cmpOr(cfg.Concurrency, DefaultConcurrency)
	cfg.Rate = cmpOr(cfg.Rate, DefaultRate)
	cfg.DecideTimeout = cmpOr(cfg.DecideTimeout, bulk.DefaultDecideTimeout)
	return &Runner{cfg: cfg}, nil
}

func cmpOr[T int | float64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Report is what one pass did.
type Report struct {
	BatchID string `json:"batch_id"`
	DryRun  bool   `json:"dry_run"`
	// Paused: the store's pause stopped the pass (PausedBy, PauseReason).
	Paused      bool   `json:"paused"`
	PausedBy    string `json:"paused_by,omitempty"`
	PauseReason string `json:"pause_reason,omitempty"`
	// Listed stuck records of the tools; Asked lookups answered.
	Listed int `json:"listed"`
	Asked  int `json:"asked"`
	// Decided counts the decisions by verdict; Skipped the records left
	// undecided by reason.
	Decided map[bulk.Verdict]int `json:"decided"`
	Skipped map[string]int       `json:"skipped"`
	// ProviderErrors counts the lookups without a definite usable answer,
	// per tool; ProviderDown names the tools whose rate passed the
	// threshold this pass.
	ProviderErrors map[string]int `json:"provider_errors"`
	ProviderDown   []string       `json:"provider_down"`
	// Deciding tells, for each tool of the catalog's auto_reconcile,
	// whether the pass could decide its records: not paused, let by the
	// store's allowlist, its provider not down. A tool whose stuck records
	// pile up while it is false is waiting for people.
	Deciding map[string]bool `json:"deciding"`
	// Records are the records looked at, with what became of each.
	Records []Record `json:"records"`
	// Stopped says why the pass stopped early ("" when it ran through).
	Stopped string        `json:"stopped,omitempty"`
	Took    time.Duration `json:"-"`
	TookMS  int64         `json:"took_ms"`
}

// Record is one record's part in a pass.
type Record struct {
	bulk.Item
	// Decision is the decision made (or, in a dry run, that would be).
	Decision reconcile.Decision `json:"decision,omitempty"`
	// Outcome is "decided", or the skip reason.
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
	Audit   string `json:"audit,omitempty"`
}

// decided is a Record's outcome when it was decided.
const decided = "decided"

// Pass runs one pass. Its error is a failure to read the store or the
// settings; what happened to each record is in the report either way.
func (r *Runner) Pass(ctx context.Context) (rep Report, err error) {
	start := time.Now()
	// rep is the named result, so that the deferred Took reaches the
	// caller: a local copy's returned before the defer ran, and every
	// report said 0 ms.
	rep = Report{DryRun: r.cfg.DryRun, Decided: map[bulk.Verdict]int{}, Skipped: map[string]int{},
		ProviderErrors: map[string]int{}, ProviderDown: []string{}, Records: []Record{}, Deciding: map[string]bool{}}
	for tool := range r.cfg.Tools {
		rep.Deciding[tool] = false
	}
	defer func() { rep.Took = time.Since(start); rep.TookMS = rep.Took.Milliseconds() }()
	s, err := r.cfg.Settings(ctx)
	if err != nil {
		return rep, err
	}
	if s.Paused {
		rep.Paused, rep.PausedBy, rep.PauseReason = true, s.PausedBy, s.PauseReason
		rep.Stopped = "paused"
		return rep, nil
	}
	// What the store lets, per tool: the catalog's verdicts it allows.
	// Only those tools are listed: the stuck records of a tool the store
	// does not let (yet) would fill every pass's --max-records, oldest
	// first, and starve the others.
	allowed := map[string][]bulk.Verdict{}
	var tools, barred []string
	for _, tool := range slices.Sorted(maps.Keys(r.cfg.Tools)) {
		for _, v := range r.cfg.Tools[tool] {
			if slices.Contains(s.Allow[tool], v) {
				allowed[tool] = append(allowed[tool], v)
			}
		}
		rep.Deciding[tool] = len(allowed[tool]) > 0
		if rep.Deciding[tool] {
			tools = append(tools, tool)
		} else {
			barred = append(barred, tool)
		}
	}
	var rows []readmodel.Row
	if len(tools) > 0 {
		var more bool
		if rows, more, err = r.list(ctx, tools); err != nil {
			return rep, err
		}
		if more {
			rep.Skipped[SkipTooMany]++ // at least one: the next pass takes them
		}
	}
	if len(barred) > 0 {
		// Listed apart, only to say why they wait (not allowed).
		b, _, err := r.list(ctx, barred)
		if err != nil {
			return rep, err
		}
		rows = append(rows, b...)
	}
	rep.Listed = len(rows)
	var ask []readmodel.Row
	for _, row := range rows {
		reason := ""
		switch {
		case row.Held:
			reason = SkipHeld
		case row.Conflicted:
			reason = SkipConflicted
		case row.DeferredBy != "":
			reason = SkipDeferred
		case len(allowed[row.Tool]) == 0:
			reason = SkipNotAllowed
		}
		if reason != "" {
			rep.skip(Record{Item: bulk.Item{ID: row.ID, Tenant: row.Tenant, Tool: row.Tool, Key: row.Key, Version: row.Version}}, reason,
				skipMessage(reason, row.Tool))
			continue
		}
		ask = append(ask, row)
	}
	if len(ask) == 0 {
		return rep, nil
	}
	// The run starts (its batch) only when the pass has something to
	// decide: a pass that decides nothing leaves no run behind.
	plan, lookupErr := r.cfg.Bulk.LookupOnly(ctx, ask, nil)
	for _, item := range plan.NotAsked {
		rep.skip(Record{Item: item}, SkipNotAsked, "the pass stopped before its lookup")
	}
	// The provider's health, per tool.
	asked, failed := map[string]int{}, map[string]int{}
	for _, g := range plan.Groups {
		for _, item := range g.Items {
			asked[item.Tool]++
			rep.Asked++
			if g.Verdict == bulk.NoAnswer || g.Verdict == bulk.Error {
				failed[item.Tool]++
			}
		}
	}
	down := map[string]bool{}
	for tool, n := range asked {
		if failed[tool] > 0 {
			rep.ProviderErrors[tool] = failed[tool]
		}
		if float64(failed[tool]) > r.cfg.MaxErrorRate*float64(n) {
			down[tool] = true
			rep.Deciding[tool] = false
			rep.ProviderDown = append(rep.ProviderDown, tool)
		}
	}
	slices.Sort(rep.ProviderDown)

	var todo []Record
	for _, g := range plan.Groups {
		for _, item := range g.Items {
			rec := Record{Item: item}
			switch {
			case down[item.Tool]:
				rep.skip(rec, SkipProviderDown, fmt.Sprintf("%s's lookups failed or gave no answer for %d of %d records this pass "+
					"(more than %.0f%%): nothing of it is decided until they answer", item.Tool, failed[item.Tool], asked[item.Tool],
					100*r.cfg.MaxErrorRate))
			case g.Verdict.Conflicted():
				// Listed clean, conflicted by the lookup's end: for people.
				rep.skip(rec, SkipConflicted, skipMessage(SkipConflicted, item.Tool))
			case g.Verdict == bulk.NoAnswer:
				rep.skip(rec, SkipNoAnswer, item.Note)
			case g.Verdict == bulk.Error:
				rep.skip(rec, SkipLookupError, item.Note)
			case !slices.Contains(allowed[item.Tool], g.Verdict):
				rep.skip(rec, SkipNotAllowed, skipMessage(SkipNotAllowed, item.Tool)+" on "+g.Verdict.Label())
			default:
				rec.Decision = g.Proposal
				todo = append(todo, rec)
			}
		}
	}
	if lookupErr != nil {
		for _, rec := range todo {
			rep.skip(rec, SkipNotAttempted, "the pass stopped during the lookups")
		}
		rep.Stopped = lookupErr.Error()
		return rep, nil
	}
	if r.cfg.DryRun {
		for _, rec := range todo {
			rep.skip(rec, SkipDryRun, "would be decided "+string(rec.Decision))
		}
		return rep, nil
	}
	if len(todo) == 0 {
		return rep, nil
	}
	if err := r.cfg.Bulk.Start(ctx, plan, PassFilter(todo)); err != nil {
		for _, rec := range todo {
			rep.skip(rec, SkipNotAttempted, "the pass's run did not start")
		}
		rep.Stopped = err.Error()
		return rep, nil
	}
	rep.BatchID = plan.BatchID
	r.decide(ctx, &rep, plan.BatchID, todo)
	return rep, nil
}

// PassFilter is what a pass's run records as its filter: the reconciler's
// own selection, stuck records of the allowlisted tools it decides.
func PassFilter(todo []Record) string {
	var tools []string
	for _, rec := range todo {
		if !slices.Contains(tools, rec.Tool) {
			tools = append(tools, rec.Tool)
		}
	}
	slices.Sort(tools)
	return reconcile.CutBatchFilter("auto_reconcile pass: stuck records of " + strings.Join(tools, ", "))
}

func (rep *Report) skip(rec Record, reason, message string) {
	rec.Outcome, rec.Message = reason, message
	rep.Skipped[reason]++
	rep.Records = append(rep.Records, rec)
}

func skipMessage(reason, tool string) string {
	switch reason {
	case SkipHeld:
		return "under legal hold: left to people"
	case SkipConflicted:
		return "conflicting attempts nobody reviewed: left to people"
	case SkipDeferred:
		return "deferred by a person: left to people"
	case SkipNotAllowed:
		return fmt.Sprintf("the store's allowlist does not let a reconciler decide %s (an admin runs opsdesk reconciler allow %s …)", tool, tool)
	}
	return ""
}

// list reads the stuck records of tools, the longest stuck first, at most
// MaxRecords; more says there were others.
func (r *Runner) list(ctx context.Context, tools []string) (rows []readmodel.Row, more bool, err error) {
	f := readmodel.Filter{States: []readmodel.State{readmodel.StateStuck}, Tools: tools}
	if err := r.cfg.Bulk.CheckFilter(f); err != nil {
		return nil, false, err
	}
	var after *readmodel.Cursor
	for {
		page, err := r.cfg.Lister.List(ctx, readmodel.Query{Filter: f, Sort: readmodel.SortLease,
			Limit: min(1000, r.cfg.MaxRecords-len(rows)+1), After: after})
		if err != nil {
			return nil, false, fmt.Errorf("list the stuck records: %w", err)
		}
		rows = append(rows, page.Rows...)
		if len(rows) > r.cfg.MaxRecords {
			return rows[:r.cfg.MaxRecords], true, nil
		}
		if page.Next == nil {
			return rows, false, nil
		}
		after = page.Next
	}
}

// outcome is one record's decision, and whether it stops the pass.
type outcome struct {
	Record
	stopsThePass bool
	audit        reconcile.Result
}

// decide decides todo, each by itself, bounded in concurrency and rate.
func (r *Runner) decide(ctx context.Context, rep *Report, batch string, todo []Record) {
	items := make([]bulk.Item, len(todo))
	for i, rec := range todo {
		items[i] = rec.Item
	}
	current, err := r.cfg.Bulk.Current(ctx, items)
	if err != nil {
		for _, rec := range todo {
			rep.skip(rec, SkipNotAttempted, err.Error())
		}
		rep.Stopped = err.Error()
		return
	}
	dispatch, stop := context.WithCancel(ctx)
	defer stop()
	tick := time.NewTicker(max(time.Duration(float64(time.Second)/r.cfg.Rate), time.Microsecond))
	defer tick.Stop()

	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, r.cfg.Concurrency)
	)
	out := make([]outcome, len(todo))
	for i, rec := range todo {
		out[i].Record = rec
		out[i].Outcome, out[i].Message = SkipNotAttempted, "the pass stopped first"
	}
	for i, rec := range todo {
		if i > 0 {
			select {
			case <-tick.C:
			case <-dispatch.Done():
			}
		}
		select {
		case sem <- struct{}{}:
		case <-dispatch.Done():
		}
		if dispatch.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o := r.decideOne(dispatch, batch, rec, current)
			mu.Lock()
			defer mu.Unlock()
			out[i] = o
			if o.stopsThePass {
				if rep.Stopped == "" {
					rep.Stopped = o.Message
				}
				stop()
			}
		}()
	}
	wg.Wait()
	var results []*reconcile.Result
	for i := range out {
		if out[i].audit.Entry != 0 {
			results = append(results, &out[i].audit)
		}
	}
	if len(results) > 0 {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.DecideTimeout)
		defer cancel()
		if err := r.cfg.Desk.SealResults(sctx, results); err == nil {
			// Sealed: name each by its place in its chain; unsealed they
			// keep naming their queued entry, which the next seal takes.
			for i := range out {
				if out[i].audit.Entry != 0 {
					out[i].Audit = out[i].audit.AuditRef()
				}
			}
		}
	}
	for _, o := range out {
		if o.Outcome == decided {
			rep.Decided[o.Verdict]++
			rep.Records = append(rep.Records, o.Record)
			continue
		}
		rep.skip(o.Record, o.Outcome, o.Message)
	}
	if rep.Stopped == "" && ctx.Err() != nil {
		rep.Stopped = ctx.Err().Error()
	}
}

// Reason is the reason a reconciler's decision is audited with: the
// policy, the evidence and the batch.
func Reason(item bulk.Item, batch string) string {
	return cut(fmt.Sprintf("opsdesk reconciler, by the catalog's auto_reconcile for %s (%s on %s); evidence: %s (%s); batch %s",
		item.Tool, item.Verdict.Proposal(), item.Verdict, item.Note, item.Evidence.Digest, batch), 1900)
}

// cut is s in at most n bytes, on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-len("…")], "") + "…"
}

// decideOne decides one record unless it changed since it was listed. The
// decision runs to its end whatever happens to dispatch (bounded by
// DecideTimeout), so that its outcome is known.
func (r *Runner) decideOne(dispatch context.Context, batch string, rec Record, current map[int64]readmodel.Row) outcome {
	o := outcome{Record: rec}
	if why := bulk.Changed(rec.Item, current); why != "" {
		o.Outcome, o.Message = SkipChanged, why
		return o
	}
	p := reconcile.DecideParams{OperationID: rec.ID, Decision: rec.Decision, ExpectVersion: rec.Version,
		Reason: Reason(rec.Item, batch), Evidence: rec.Evidence, Batch: batch, SealLater: true}
	if k, _ := reconcile.KindOf(rec.Decision); k.NeedsRef {
		p.ResultRef = rec.Ref
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(dispatch), r.cfg.DecideTimeout)
	defer cancel()
	res, err := r.cfg.Desk.Decide(ctx, rec.Tool, p)
	o.audit = res
	if res.Entry != 0 {
		o.Audit = res.AuditRef()
	}
	var refused *reconcile.RefusedError
	switch {
	case err == nil:
		o.Outcome = decided
	case errors.Is(err, reconcile.ErrPaused):
		o.Outcome, o.Message, o.stopsThePass = SkipPaused, refusedMessage(err), true
	case errors.Is(err, reconcile.ErrChanged) || errors.Is(err, reconcile.ErrNotPending) || errors.Is(err, reconcile.ErrLeaseLive):
		o.Outcome, o.Message = SkipChanged, "changed since the lookup: "+refusedMessage(err)
	case errors.Is(err, reconcile.ErrForPeople):
		o.Outcome, o.Message = SkipForPeople, refusedMessage(err)
	case errors.As(err, &refused):
		// Not permitted (the allowlist changed, the grant was revoked) or
		// invalid: asking again for the rest would be refused the same.
		o.Outcome, o.Message, o.stopsThePass = SkipRefused, refusedMessage(err), errors.Is(err, reconcile.ErrNotPermitted)
	default:
		o.Outcome = SkipFailed
		o.Message = fmt.Sprintf("%v (not known to be decided: the record's history says whether it was)", err)
	}
	return o
}

func refusedMessage(err error) string {
	var refused *reconcile.RefusedError
	if errors.As(err, &refused) && refused.Message != "" {
		return strings.TrimSpace(refused.Message)
	}
	return err.Error()
}
