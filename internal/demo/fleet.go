package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/ops"
)

// Defaults of a FleetConfig's zero fields.
const (
	DefaultWorkers     = 4
	DefaultRate        = 2.0
	DefaultCallTimeout = time.Second
)

// DefaultTenants are the tenants the fleet works for.
var DefaultTenants = []string{"acme", "globex", "initech"}

// normalTimeout bounds a provider call nobody asked to misbehave: generous,
// so that a loaded machine does not turn it into an unknown outcome.
const normalTimeout = 15 * time.Second

// maxErrors bounds the unexpected errors a fleet keeps.
const maxErrors = 10

// maxAbandoned bounds the abandoned records a fleet remembers.
const maxAbandoned = 10000

// FleetConfig configures a Fleet.
type FleetConfig struct {
	// Pool reaches the operation store as a role granted opsdesk_service,
	// in a database where Schema ran. It needs about two connections per
	// worker.
	Pool *pgxpool.Pool
	// ProviderURL is the simulated provider's base URL.
	ProviderURL string
	// Workers is how many workers run jobs at once (default
	// DefaultWorkers). Each is an ops.Store with its own owner.
	Workers int
	// Rate is how many jobs per second the fleet starts (default
	// DefaultRate). A job is one request and its retries.
	Rate float64
	// Seed makes the sequence of jobs (tenants, tools, intents, faults)
	// repeatable.
	Seed uint64
	// Tenants defaults to DefaultTenants.
	Tenants []string
	// Lease of every tool (default DefaultLease).
	Lease time.Duration
	// CallTimeout is how long a worker waits for a provider that does not
	// answer (default DefaultCallTimeout).
	CallTimeout time.Duration
	// SlowCall is how long a slow provider call takes (default two
	// leases): longer than a lease, so the lease is renewed while it runs.
	SlowCall time.Duration
	// Logger is given to every worker's store (nil: no logging).
	Logger *slog.Logger
}

func (c FleetConfig) withDefaults() (FleetConfig, error) {
	if c.Pool == nil {
		return c, errors.New("fleet: no pool")
	}
	if c.ProviderURL == "" {
		return c, errors.New("fleet: no provider URL")
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Workers < 1 || c.Rate < 0 || interval(c.Rate) < time.Millisecond {
		return c, fmt.Errorf("fleet: %d workers at %g jobs/s: need at least one worker and a rate in (0, 1000]", c.Workers, c.Rate)
	}
	if len(c.Tenants) == 0 {
		c.Tenants = DefaultTenants
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.SlowCall == 0 {
		c.SlowCall = 2 * c.Lease
	}
	return c, nil
}

// Fleet is a simulated fleet of workers running the demo's tools through
// the ops library, with faults injected so that every state appears: it
// leaves records completed (succeeded and rejected), released, pending with
// a live lease, stuck with opposite truths at the provider, and conflicts.
type Fleet struct {
	cfg      FleetConfig
	policies map[string]ops.Policy
	client   *providerClient
	cancel   context.CancelFunc
	done     sync.WaitGroup
	stop     sync.Once

	mu        sync.Mutex
	stats     map[string]int64
	abandoned []abandonedRecord
	errs      []error
}

// Abandoned is a record a worker left pending after a crash or a call
// nobody saw the end of, with what the provider really did: the truth an
// operator must find out.
type Abandoned struct {
	ops.Identity
	// Scenario names what went wrong.
	Scenario string
	// ProviderActed is true when the provider applied the effect.
	ProviderActed bool
}

type abandonedRecord struct {
	Abandoned
	req ops.Request
}

// StartFleet starts the fleet's workers. They run until ctx is done or Stop
// is called.
func StartFleet(ctx context.Context, cfg FleetConfig) (*Fleet, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	f := &Fleet{
		cfg:      cfg,
		policies: Policies(cfg.Lease),
		client:   newProviderClient(cfg.ProviderURL),
		stats:    map[string]int64{},
	}
	workers := make([]*worker, cfg.Workers)
	for i := range workers {
		workers[i] = &worker{f: f, id: i + 1}
		if err := workers[i].restart(); err != nil {
			return nil, err
		}
	}
	ctx, f.cancel = context.WithCancel(ctx)
	jobs := make(chan job)
	f.done.Add(1 + len(workers))
	go func() {
		defer f.done.Done()
		f.dispatch(ctx, jobs)
	}()
	for _, w := range workers {
		go func() {
			defer f.done.Done()
			for j := range jobs {
				w.run(ctx, j)
			}
		}()
	}
	return f, nil
}

// Stop stops the fleet and waits for its workers. A call in flight is
// abandoned the way a killed process abandons it.
func (f *Fleet) Stop() {
	f.stop.Do(func() {
		f.cancel()
		f.done.Wait()
		f.client.close()
	})
}

// dispatch hands out the planner's jobs at the configured rate.
func (f *Fleet) dispatch(ctx context.Context, jobs chan<- job) {
	defer close(jobs)
	p := newPlanner(f.cfg.Seed, f.cfg.Tenants)
	tick := time.NewTicker(interval(f.cfg.Rate))
	defer tick.Stop()
	for {
		j := p.next()
		select {
		case jobs <- j:
		case <-ctx.Done():
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// Stats counts how the fleet's calls ended, by disposition ("created",
// "replayed", "rejected", "conflict", "in_progress", …), plus "crash" for
// simulated worker crashes.
func (f *Fleet) Stats() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int64, len(f.stats))
	for k, v := range f.stats {
		out[k] = v
	}
	return out
}

// Abandoned lists the records the fleet left pending on purpose and did
// not see resolved since.
func (f *Fleet) Abandoned() []Abandoned {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Abandoned, len(f.abandoned))
	for i, a := range f.abandoned {
		out[i] = a.Abandoned
	}
	return out
}

// Err reports the first unexpected errors: a call that did not end the way
// its scenario says it must. Nil in a healthy run.
func (f *Fleet) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

func (f *Fleet) count(what string) {
	f.mu.Lock()
	f.stats[what]++
	f.mu.Unlock()
}

func (f *Fleet) unexpected(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats["unexpected"]++
	if len(f.errs) < maxErrors {
		f.errs = append(f.errs, err)
	}
}

func (f *Fleet) abandon(sc scenario, req ops.Request, acted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.abandoned) == maxAbandoned {
		f.abandoned = f.abandoned[1:]
	}
	f.abandoned = append(f.abandoned, abandonedRecord{
		Abandoned: Abandoned{Identity: req.Identity, Scenario: sc.String(), ProviderActed: acted}, req: req})
}

// abandonedAt returns the abandoned record pick chooses, if any.
func (f *Fleet) abandonedAt(pick uint64) (abandonedRecord, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.abandoned) == 0 {
		return abandonedRecord{}, false
	}
	return f.abandoned[pick%uint64(len(f.abandoned))], true
}

// forget drops an abandoned record that was resolved (by an operator).
func (f *Fleet) forget(id ops.Identity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, a := range f.abandoned {
		if a.Identity == id {
			f.abandoned = append(f.abandoned[:i], f.abandoned[i+1:]...)
			return
		}
	}
}

// worker is one simulated process: a store with its own owner. A crash
// replaces its store, as a restarted process would come back.
type worker struct {
	f           *Fleet
	id          int
	incarnation int
	store       *ops.Store
}

func (w *worker) restart() error {
	w.incarnation++
	owner := fmt.Sprintf("worker-%d", w.id)
	if w.incarnation > 1 {
		owner = fmt.Sprintf("%s.%d", owner, w.incarnation)
	}
	s, err := ops.New(w.f.cfg.Pool, ops.Config{Tools: w.f.policies, Owner: owner, Logger: w.f.cfg.Logger})
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	w.store = s
	return nil
}

// crashPoint is where a simulated crash happens in an external call.
type crashPoint int

const (
	noCrash crashPoint = iota
	crashBeforeCall
	crashAfterCall
)

// errCrashed is what a crashed worker's call returns in place of dying:
// the library sees an unknown outcome and leaves the record pending, as
// after a real crash.
var errCrashed = errors.New("worker crashed")

// plan is how one call goes wrong.
type plan struct {
	fault string
	crash crashPoint
}

// answer is a call's success.
type answer struct {
	disposition ops.Disposition
	ref         string
	attempt     int
}

// run plays one job and reports a call that did not end as its scenario
// says it must. Errors caused by the fleet stopping are not reported.
func (w *worker) run(ctx context.Context, j job) {
	err := w.play(ctx, j)
	switch {
	case err == nil || ctx.Err() != nil:
	case storeStalled(err):
		// The store did not answer (an operator stopped it, or a session
		// held its locks): the library said so, as it must. Counted, not
		// reported as the fleet failing.
		w.f.count("store did not answer")
	default:
		w.f.unexpected(fmt.Errorf("job %d (%s) %s: %w", j.seq, j.scenario, j.req.Identity, err))
	}
}

// storeStalled tells an error that says the store did not answer: nothing
// written (ErrUnavailable), or a write whose answer was lost
// (ErrOutcomeUnknown) for want of one: a connection error or a timeout,
// never a refusal or a wrong answer.
func storeStalled(err error) bool {
	if !errors.Is(err, ops.ErrUnavailable) && !errors.Is(err, ops.ErrOutcomeUnknown) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// The database answered: a lock or statement timeout is a stall,
		// anything else is an answer to look at.
		return pgErr.Code == pgerrcode.LockNotAvailable || pgErr.Code == pgerrcode.QueryCanceled ||
			pgerrcode.IsConnectionException(pgErr.Code) || pgErr.Code == pgerrcode.AdminShutdown ||
			pgErr.Code == pgerrcode.CannotConnectNow
	}
	return true // no answer at all: a connection error, a deadline
}

func (w *worker) play(ctx context.Context, j job) error {
	req := j.req
	switch j.scenario {
	case scNote, scTicket, scEmail, scCharge, scDeploy:
		_, err := w.expect(ctx, req, plan{}, "created")
		return err

	case scTicketRejected, scChargeDeclined, scDeployRejected:
		_, err := w.expect(ctx, req, plan{}, "rejected")
		return err

	case scLostAfterCommit:
		if _, err := w.expect(ctx, req, plan{}, "created"); err != nil {
			return err
		}
		_, err := w.expect(ctx, req, plan{}, "replayed")
		return err

	case scDoubleSubmit:
		// The library serializes the twins on the record's primary key:
		// one runs, the other waits for it and replays its result.
		var wg sync.WaitGroup
		got := make([]string, 2)
		for i := range got {
			wg.Go(func() {
				a, err := w.call(ctx, req, plan{})
				got[i] = disposition(err, a.disposition)
			})
		}
		wg.Wait()
		slices.Sort(got)
		if !slices.Equal(got, []string{"created", "replayed"}) {
			return fmt.Errorf("double submit ended %v, want created and replayed", got)
		}
		return nil

	case scConflict:
		if _, err := w.expect(ctx, req, plan{}, "created"); err != nil {
			return err
		}
		wrong := req
		wrong.Intent = j.changed
		_, err := w.expect(ctx, wrong, plan{}, "conflict")
		return err

	case scEmailLost, scEmailTimeout, scEmailCrash:
		p := plan{fault: FaultLoseResponse}
		switch j.scenario {
		case scEmailTimeout:
			p = plan{fault: FaultTimeoutBeforeActing}
		case scEmailCrash:
			p = plan{crash: crashAfterCall}
		}
		if _, err := w.expect(ctx, req, p, "outcome_unknown"); err != nil {
			return err
		}
		if j.scenario == scEmailCrash {
			if err := w.crash(); err != nil {
				return err
			}
		}
		// The provider honours the key: the retry takes the record over
		// at once and the provider sends no second email.
		a, err := w.untilFree(ctx, req, "created")
		if err == nil && a.attempt < 2 {
			return fmt.Errorf("retry ran as attempt %d, want a takeover", a.attempt)
		}
		return err

	case scLostResponse, scTimeoutBefore, scCrashAfter, scCrashBefore:
		p, acted := plan{fault: FaultLoseResponse}, true
		switch j.scenario {
		case scTimeoutBefore:
			p, acted = plan{fault: FaultTimeoutBeforeActing}, false
		case scCrashAfter:
			p = plan{crash: crashAfterCall}
		case scCrashBefore:
			p, acted = plan{crash: crashBeforeCall}, false
		}
		if _, err := w.expect(ctx, req, p, "outcome_unknown"); err != nil {
			return err
		}
		w.f.abandon(j.scenario, req, acted)
		if p.crash != noCrash {
			if err := w.crash(); err != nil {
				return err
			}
		}
		if j.changed != nil {
			// The restarted worker's buggy retry changes the request.
			wrong := req
			wrong.Intent = j.changed
			_, err := w.expect(ctx, wrong, plan{}, "conflict")
			return err
		}
		// A caller that saw a timeout retries at once: the record is
		// someone's (in progress) until its lease runs out, then it waits
		// for a person.
		_, err := w.expect(ctx, req, plan{}, "in_progress", "needs_reconciliation")
		return err

	case scUnavailable:
		if _, err := w.expect(ctx, req, plan{fault: FaultUnavailable}, "not_applied"); err != nil {
			return err
		}
		if !j.retry {
			return nil
		}
		a, err := w.expect(ctx, req, plan{}, "created")
		if err == nil && a.attempt < 2 {
			return fmt.Errorf("retry of a released record ran as attempt %d", a.attempt)
		}
		return err

	case scSlow:
		_, err := w.expect(ctx, req, plan{fault: fmt.Sprintf("%s=%s", FaultSlow, w.f.cfg.SlowCall)}, "created")
		return err

	case scRetryStuck:
		rec, ok := w.f.abandonedAt(j.pick)
		if !ok {
			w.f.count("idle")
			return nil
		}
		_, err := w.call(ctx, rec.req, plan{})
		switch d := disposition(err, ""); d {
		case "in_progress", "needs_reconciliation", "conflict":
			return nil
		case "error", "unavailable", "lost_ownership", "not_recorded", "outcome_unknown":
			return err
		default:
			// An operator decided: the record is no longer abandoned.
			w.f.forget(rec.Identity)
			return nil
		}
	}
	return fmt.Errorf("unknown scenario %d", j.scenario)
}

// crash simulates the worker process dying and coming back.
func (w *worker) crash() error {
	w.f.count("crash")
	return w.restart()
}

// untilFree retries a call that meets another attempt's live lease until
// it gets through, a few times, waiting out the lease.
func (w *worker) untilFree(ctx context.Context, req ops.Request, want ...string) (answer, error) {
	for try := 1; ; try++ {
		a, err := w.call(ctx, req, plan{})
		var busy *ops.InProgressError
		if !errors.As(err, &busy) || try == 3 {
			return a, check(a, err, want)
		}
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(busy.RetryAfter + 50*time.Millisecond):
		}
	}
}

// expect makes a call and checks it ended in one of the wanted ways.
func (w *worker) expect(ctx context.Context, req ops.Request, p plan, want ...string) (answer, error) {
	a, err := w.call(ctx, req, p)
	return a, check(a, err, want)
}

func check(a answer, err error, want []string) error {
	got := disposition(err, a.disposition)
	for _, d := range want {
		if got == d {
			return nil
		}
	}
	if err == nil {
		return fmt.Errorf("got %s, want %v", got, want)
	}
	return fmt.Errorf("got %s, want %v: %w", got, want, err)
}

// call runs req through the library, counting how it ended.
func (w *worker) call(ctx context.Context, req ops.Request, p plan) (a answer, err error) {
	defer func() {
		d := disposition(err, a.disposition)
		if ctx.Err() != nil && d == "error" {
			d = "interrupted" // by the fleet stopping
		}
		w.f.count(d)
	}()
	if w.f.policies[req.Tool].Effect == ops.EffectLocal {
		return w.local(ctx, req)
	}
	return w.external(ctx, req, p)
}

func (w *worker) local(ctx context.Context, req ops.Request) (answer, error) {
	switch in := req.Intent.(type) {
	case noteIntent:
		out, err := ops.DoTx(ctx, w.store, req, func(ctx context.Context, tx pgx.Tx) (noteResult, error) {
			var r noteResult
			err := tx.QueryRow(ctx, `INSERT INTO demo.notes (tenant, title, body) VALUES ($1, $2, $3) RETURNING id`,
				req.Tenant, in.Title, in.Body).Scan(&r.NoteID)
			return r, err
		})
		return answer{out.Disposition, out.Result.ResultRef(), out.Attempt}, err
	case ticketIntent:
		out, err := ops.DoTx(ctx, w.store, req, func(ctx context.Context, tx pgx.Tx) (ticketResult, error) {
			return createTicket(ctx, tx, req.Tenant, in)
		})
		return answer{out.Disposition, out.Result.ResultRef(), out.Attempt}, err
	}
	return answer{}, fmt.Errorf("no local tool takes intent %T", req.Intent)
}

func (w *worker) external(ctx context.Context, req ops.Request, p plan) (answer, error) {
	timeout := normalTimeout
	switch {
	case p.fault == FaultLoseResponse, p.fault == FaultTimeoutBeforeActing:
		timeout = w.f.cfg.CallTimeout
	case p.fault != "" && p.fault != FaultUnavailable: // slow
		timeout = w.f.cfg.SlowCall + normalTimeout
	}
	out, err := ops.DoExternal(ctx, w.store, req, func(ctx context.Context, at ops.Attempt) (providerResult, error) {
		if p.crash == crashBeforeCall {
			return providerResult{}, errCrashed
		}
		ref, err := w.f.client.act(ctx, at, req.Intent, p.fault, timeout)
		var perr *providerError
		switch {
		case err == nil:
		case errors.Is(err, ops.ErrNotApplied):
			return providerResult{}, err
		case errors.As(err, &perr) && perr.business():
			return providerResult{}, ops.Reject(rejection{Code: perr.Code, Message: perr.Message})
		case errors.As(err, &perr):
			// The provider said it did nothing: the next attempt may run.
			return providerResult{}, ops.NotApplied(err)
		default:
			return providerResult{}, err
		}
		if p.crash == crashAfterCall {
			return providerResult{}, errCrashed
		}
		return providerResult{Ref: ref}, nil
	})
	return answer{out.Disposition, out.Result.Ref, out.Attempt}, err
}

// createTicket opens a ticket in tx, or rejects one for the closed queue:
// the create-ticket tool's effect, for the fleet and the MCP agent alike.
func createTicket(ctx context.Context, tx pgx.Tx, tenant string, in ticketIntent) (ticketResult, error) {
	var r ticketResult
	if in.Queue == closedQueue {
		return r, ops.Reject(rejection{Code: "queue_closed", Message: "the legacy queue no longer takes tickets"})
	}
	err := tx.QueryRow(ctx, `INSERT INTO demo.tickets (tenant, title, queue, priority) VALUES ($1, $2, $3, $4) RETURNING id`,
		tenant, in.Title, in.Queue, in.Priority).Scan(&r.TicketID)
	return r, err
}

// disposition names how a call ended, as the library's logs do.
func disposition(err error, d ops.Disposition) string {
	if err == nil {
		return string(d)
	}
	var rej *ops.RejectedError
	switch {
	case errors.As(err, &rej) && rej.Replayed:
		return "replayed_rejection"
	case errors.Is(err, ops.ErrRejected):
		return "rejected"
	case errors.Is(err, ops.ErrIntentConflict):
		return "conflict"
	case errors.Is(err, ops.ErrInProgress):
		return "in_progress"
	case errors.Is(err, ops.ErrNeedsReconciliation):
		return "needs_reconciliation"
	case errors.Is(err, ops.ErrLostOwnership):
		return "lost_ownership"
	case errors.Is(err, ops.ErrOutcomeUnknown):
		return "outcome_unknown"
	case errors.Is(err, ops.ErrNotApplied):
		return "not_applied"
	case errors.Is(err, ops.ErrNotRecorded):
		return "not_recorded"
	case errors.Is(err, ops.ErrUnavailable):
		return "unavailable"
	}
	return "error"
}
