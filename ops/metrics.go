package ops

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Metrics receives what the library observes about its calls, for
// monitoring: set Config.Metrics (package ops/opsprom implements it for
// Prometheus). Without it the library only checks for nil.
//
// Its methods run on the calling goroutine (Event, for a lease renewal, on
// the goroutine that renews the lease), concurrently for concurrent calls:
// they must be safe for concurrent use and quick, since every call waits
// for them. They are given a call's tool and tenant, never its key, intent,
// result or error text. tool is "" for a request that named no tool of the
// store (or an invalid one), and tenant is "" when the request's tenant is
// invalid: a caller's malformed or unbounded strings never reach them.
type Metrics interface {
	// CallFinished reports a finished DoTx or DoExternal call: its answer
	// and how long it took, from the call to its return.
	CallFinished(tool, tenant string, answer CallClass, d time.Duration)
	// StageFinished reports how long one stage of a call took. A call that
	// passed validation reports StageReserve once; one whose fn ran also
	// reports StageCall and StageComplete, once each.
	StageFinished(tool, tenant string, stage Stage, d time.Duration)
	// Event reports something that happened during a call, at most once
	// per call and event, except EventLeaseRenewalFailed (once per failed
	// renewal). Ignore an Event this version does not know.
	Event(tool, tenant string, event Event)
}

// Stage is a stage of a call, as Metrics.StageFinished reports it (the
// step label of opsdesk_ops_step_duration_seconds: the metric keeps its
// name, while in the API a Step is what an OutcomeUnknownError could not
// observe).
// Its String is the label value.
type Stage uint8

// The stages of a call.
const (
	// StageReserve: from the call's start, once its request is valid, to
	// fn's call; or, when fn does not run, to the call's answer (a replay,
	// a refusal, a failure). It includes the transaction's start, the
	// reservation or takeover, reading the existing record, and, for
	// DoExternal, the commit of the reservation.
	StageReserve Stage = iota
	// StageCall: fn's own run (the business writes in DoTx, the
	// provider's call in DoExternal).
	StageCall
	// StageComplete: from fn's return to the call's answer: storing the
	// outcome and committing (or rolling back fn's error, releasing the
	// reservation of a NotApplied call).
	StageComplete
	phaseCount // keep last
)

var phaseNames = [phaseCount]string{StageReserve: "reserve", StageCall: "call", StageComplete: "complete"}

// String is the stage's label value.
func (p Stage) String() string {
	if p < phaseCount {
		return phaseNames[p]
	}
	return "unknown"
}

// Stages lists every stage, in order of value.
func Stages() []Stage { return enum(phaseCount) }

// Event is something that happened during a call, which the call's CallClass
// alone does not say.
type Event uint8

// The events.
const (
	// EventIntentConflict: the call reused a key with a different intent
	// and the attempt was recorded (ClassConflict), or may have been
	// (ClassOutcomeUnknown with Step StepConflict).
	EventIntentConflict Event = iota
	// EventTakeover: the call took over a pending record whose lease had
	// expired, as a new attempt. (Running a released record again is not
	// a takeover.)
	EventTakeover
	// EventLeaseRenewalFailed: a renewal of DoExternal's lease failed (the
	// database did not answer it). One is harmless; renewals failing for
	// a lease's length cancel the call (EventOwnershipLost).
	EventLeaseRenewalFailed
	// EventOwnershipLost: the attempt lost its record: its lease could not
	// be renewed (taken over, expired, or renewals failed too long) and
	// the call's context was cancelled with ErrLeaseLost, or its
	// completion or release was refused (ClassLostOwnership).
	EventOwnershipLost
	// EventResultNotRecorded: the provider's call finished but its outcome
	// was not recorded (ClassNotRecorded): the record stays pending and
	// will need reconciliation.
	EventResultNotRecorded
	eventCount // keep last
)

var eventNames = [eventCount]string{
	EventIntentConflict:     "intent_conflict",
	EventTakeover:           "takeover",
	EventLeaseRenewalFailed: "lease_renewal_failed",
	EventOwnershipLost:      "ownership_lost",
	EventResultNotRecorded:  "result_not_recorded",
}

// String names the event.
func (e Event) String() string {
	if e < eventCount {
		return eventNames[e]
	}
	return "unknown"
}

// Events lists every event, in order of value.
func Events() []Event { return enum(eventCount) }

// callObservation is what a call's metrics need beyond its request and
// answer. It is filled only when the store has a Metrics hook.
type callObservation struct {
	// reserve is when the valid call started toward the store; called and
	// returned bound fn's run (zero when fn did not run).
	reserve, called, returned time.Time
	// leaseLost is set by the lease keeper when it cancels the call.
	leaseLost atomic.Bool
}

// timed returns fn, timed for the metrics hook when the store has one, and
// marks the start of the call's reservation.
func timed[A, R any](s *Store, c *call, fn func(context.Context, A) (R, error)) func(context.Context, A) (R, error) {
	if s.metrics == nil {
		return fn
	}
	c.obs.reserve = time.Now()
	return func(ctx context.Context, a A) (R, error) {
		c.obs.called = time.Now()
		defer func() { c.obs.returned = time.Now() }() // also when fn panics
		return fn(ctx, a)
	}
}

// labels are the call's tool and tenant as the hook may see them: a tool
// only when the store has a policy for it, a tenant only when it is valid,
// so that a caller's arbitrary strings never become series.
func (s *Store) labels(c *call) (tool, tenant string) {
	if c.policy.Effect != "" { // set only once the identity is valid and the tool known
		return c.Tool, c.Tenant
	}
	if _, known := s.tools[c.Tool]; known {
		tool = c.Tool
	}
	if checkName("tenant", c.Tenant, maxNameBytes) == nil {
		tenant = c.Tenant
	}
	return tool, tenant
}

// observeCall reports a finished call to the hook: its stages, the events
// its answer implies, and the answer. a and err are the call's (see
// classify).
func (s *Store) observeCall(c *call, a CallClass, err error) {
	end := time.Now()
	m := s.metrics
	tool, tenant := s.labels(c)
	if o := &c.obs; !o.reserve.IsZero() {
		if o.called.IsZero() {
			m.StageFinished(tool, tenant, StageReserve, end.Sub(o.reserve))
		} else {
			m.StageFinished(tool, tenant, StageReserve, o.called.Sub(o.reserve))
			m.StageFinished(tool, tenant, StageCall, o.returned.Sub(o.called))
			m.StageFinished(tool, tenant, StageComplete, end.Sub(o.returned))
		}
	}
	switch a {
	case ClassConflict:
		m.Event(tool, tenant, EventIntentConflict)
	case ClassNotRecorded:
		m.Event(tool, tenant, EventResultNotRecorded)
	case ClassOutcomeUnknown:
		if unknown := (*OutcomeUnknownError)(nil); errors.As(err, &unknown) && unknown.Step == StepConflict {
			m.Event(tool, tenant, EventIntentConflict)
		}
	}
	if a == ClassLostOwnership || c.obs.leaseLost.Load() {
		m.Event(tool, tenant, EventOwnershipLost)
	}
	m.CallFinished(tool, tenant, a, end.Sub(c.start))
}

// tookOver reports a takeover of rec, the record as read before it.
func (s *Store) tookOver(c *call, rec *Record) {
	if s.metrics != nil && rec.State == StatePending {
		s.metrics.Event(c.Tool, c.Tenant, EventTakeover)
	}
}

// watchLease returns the lease keeper's cancel function, noting for the
// metrics hook that the lease was lost when it is called.
func (s *Store) watchLease(c *call, lost context.CancelCauseFunc) context.CancelCauseFunc {
	if s.metrics == nil {
		return lost
	}
	return func(cause error) {
		c.obs.leaseLost.Store(true)
		lost(cause)
	}
}

// renewalFailed reports a lease renewal that failed with err, unless err
// is nil or the caller's ctx ended (the call is over, not the lease).
func (s *Store) renewalFailed(ctx context.Context, c *call, err error) {
	if s.metrics != nil && err != nil && ctx.Err() == nil {
		s.metrics.Event(c.Tool, c.Tenant, EventLeaseRenewalFailed)
	}
}
