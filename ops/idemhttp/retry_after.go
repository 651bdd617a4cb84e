package idemhttp

import (
	"sync/atomic"
	"time"
)

// typical estimates how long the endpoint's handler takes: the configured
// Config.TypicalDuration, or else a moving average of the durations of
// the handler runs this middleware has seen (in this process).
type typical struct {
	configured time.Duration
	// average is in nanoseconds; 0 until a run has been seen.
	average atomic.Int64
}

// observe notes one run of the handler.
func (t *typical) observe(d time.Duration) {
	if t.configured > 0 {
		return
	}
	for {
		old := t.average.Load()
		next := int64(d)
		if old != 0 {
			// Each run weighs an eighth: a few slow runs move the
			// estimate, one does not.
			next = old + (int64(d)-old)/8
		}
		next = max(next, 1)
		if t.average.CompareAndSwap(old, next) {
			return
		}
	}
}

// retryAfter is the Retry-After of an in-progress answer whose record's
// attempt has run for running and whose lease has leaseLeft to run: what
// remains of the handler's typical duration (the running attempt most
// likely answers by then) when that is shorter, at least a second. Until a
// typical duration is known it is the lease's remainder: by then the
// attempt has answered, or its lease has ended.
func (t *typical) retryAfter(leaseLeft, running time.Duration) time.Duration {
	estimate := t.configured
	if estimate == 0 {
		estimate = time.Duration(t.average.Load())
	}
	if estimate > 0 {
		// An attempt already past its typical duration is retried
		// soon: it may answer at any moment.
		leaseLeft = min(leaseLeft, max(estimate-running, 0))
	}
	return max(leaseLeft, time.Second)
}
