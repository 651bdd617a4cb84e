package ops

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryOpts tunes Retry. The zero value uses the defaults.
type RetryOpts struct {
	// MinWait is the shortest pause between two attempts (default 50ms).
	MinWait time.Duration
	// MaxWait is the longest (default 5s; at most an hour). An owner's
	// lease with longer to run is waited out in several pauses: each
	// attempt learns the time left afresh.
	MaxWait time.Duration
}

// Defaults of RetryOpts.
const (
	DefaultRetryMinWait = 50 * time.Millisecond
	DefaultRetryMaxWait = 5 * time.Second
)

// Retry calls fn, typically a DoTx or DoExternal call with the same request,
// until it returns an answer that waiting cannot change, or until ctx ends.
// It tries again only where a retry with the same key settles the call
// without a person:
//
//   - ErrInProgress: after the InProgressError's RetryAfter, the time left
//     on the owner's lease by the database clock;
//   - ErrUnavailable: after a pause that doubles from MinWait up to
//     MaxWait;
//   - ErrOutcomeUnknown whose Step is StepCommit, StepReserve or
//     StepConflict: nothing ran outside the database, so the next attempt
//     replays, executes, or answers as the record says.
//
// Every pause lies within [MinWait, MaxWait], with up to a fifth added at
// random so that waiting callers do not return in step. Anything else,
// ErrOutcomeUnknown from a provider call (StepCall) included, is returned at
// once: whether to ask the provider again is the caller's decision. When
// ctx ends, or its deadline would pass during the next pause, Retry returns
// the last error without waiting: it still matches its class, and carries
// RetryAfter where it has one.
func Retry[T any](ctx context.Context, opts *RetryOpts, fn func(ctx context.Context) (T, error)) (T, error) {
	minWait, maxWait := DefaultRetryMinWait, DefaultRetryMaxWait
	if opts != nil && opts.MinWait > 0 {
		minWait = opts.MinWait
	}
	if opts != nil && opts.MaxWait > 0 {
		maxWait = opts.MaxWait
	}
	// An hour at most, so that a pause and its jitter cannot overflow.
	minWait, maxWait = min(minWait, time.Hour), min(max(maxWait, minWait), time.Hour)
	backoff := minWait
	for {
		v, err := fn(ctx)
		wait, ok := retryAfter(err)
		if !ok || ctx.Err() != nil {
			return v, err
		}
		if wait == 0 { // unavailable: back off
			wait, backoff = backoff, min(2*backoff, maxWait)
		}
		wait = min(max(wait, minWait), maxWait)
		wait += rand.N(wait/5 + 1)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// retryAfter tells whether Retry tries err again, and after how long the
// error itself asks for (0: back off).
func retryAfter(err error) (time.Duration, bool) {
	var inProgress *InProgressError
	var unknown *OutcomeUnknownError
	switch {
	case err == nil:
		return 0, false
	case errors.As(err, &inProgress):
		return max(inProgress.RetryAfter, time.Nanosecond), true
	case errors.Is(err, ErrUnavailable):
		return 0, true
	case errors.As(err, &unknown):
		return 0, unknown.Step != StepCall && unknown.Step != ""
	}
	return 0, false
}
