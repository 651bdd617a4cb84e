package ops_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
)

// holdLease starts an attempt whose provider call lasts until the test ends
// or finish is closed, and returns once the call runs.
func holdLease(t *testing.T, b *bundle, p *provider, key string) (finish chan struct{}, done <-chan error) {
	t.Helper()
	inCall, finish, errs := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := ops.DoExternal(b.ctx, b.store, emailReq(key), func(ctx context.Context, a ops.Attempt) (receipt, error) {
			close(inCall)
			select {
			case <-finish:
			case <-ctx.Done():
			}
			return p.record(a), nil
		})
		errs <- err
	}()
	<-inCall
	return finish, errs
}

func TestRetryWaitsOutALiveLeaseAndReplays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newProvider()
	finish, owner := holdLease(t, b, p, "k1")

	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	tries := 0
	out, err := ops.Retry(ctx, nil, func(ctx context.Context) (ops.Reply[receipt], error) {
		out, err := ops.DoExternal(ctx, b.store, emailReq("k1"), neverCalled[receipt](t))
		if tries++; tries == 1 {
			requireClass(t, err, ops.ErrInProgress)
			close(finish) // the owner completes while this caller waits
		}
		return out, err
	})
	require.NoError(t, err)
	require.Equal(t, ops.Replayed, out.Disposition)
	require.Equal(t, "ref-k1-1", out.Result.ID)
	require.GreaterOrEqual(t, tries, 2)
	require.NoError(t, <-owner)
	require.Len(t, p.attempts("k1"), 1)
}

func TestRetryReturnsAtOnceWhenTheWaitWouldPassTheDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	finish, owner := holdLease(t, b, newProvider(), "k1")
	defer func() { close(finish); require.NoError(t, <-owner) }()

	// The owner's lease (renewed, a second long) outlasts the deadline.
	ctx, cancel := context.WithTimeout(b.ctx, 300*time.Millisecond)
	defer cancel()
	tries := 0
	_, err := ops.Retry(ctx, nil, func(ctx context.Context) (ops.Reply[receipt], error) {
		tries++
		return ops.DoExternal(ctx, b.store, emailReq("k1"), neverCalled[receipt](t))
	})
	require.NoError(t, ctx.Err(), "Retry returned before the deadline instead of sleeping into it")
	requireClass(t, err, ops.ErrInProgress)
	var inProgress *ops.InProgressError
	require.ErrorAs(t, err, &inProgress)
	require.Greater(t, inProgress.RetryAfter, 300*time.Millisecond)
	require.Equal(t, 1, tries)
}

func TestRetryTriesAgainOnlyWhatARetrySettles(t *testing.T) {
	t.Parallel()
	id := ops.Identity{Tenant: "acme", Tool: toolTicket, Key: "k1"}
	for name, tc := range map[string]struct {
		errs  []error // returned in turn; then success
		tries int
	}{
		"Unavailable":         {errs: []error{&ops.UnavailableError{Err: errors.New("down")}, &ops.UnavailableError{Err: errors.New("down")}}, tries: 3},
		"CommitUnknown":       {errs: []error{&ops.OutcomeUnknownError{Identity: id, Step: ops.StepCommit, Err: errors.New("lost")}}, tries: 2},
		"ReservationUnknown":  {errs: []error{&ops.OutcomeUnknownError{Identity: id, Step: ops.StepReserve, Err: errors.New("lost")}}, tries: 2},
		"InProgress":          {errs: []error{&ops.InProgressError{Identity: id, RetryAfter: time.Millisecond}}, tries: 2},
		"ProviderCallUnknown": {errs: []error{&ops.OutcomeUnknownError{Identity: id, Step: ops.StepCall, Err: errors.New("timeout")}}, tries: 1},
		"Refused":             {errs: []error{&ops.StoreRefusedError{SQLState: "42501", Err: errors.New("denied")}}, tries: 1},
		"Rejected":            {errs: []error{&ops.RejectedError{Identity: id}}, tries: 1},
		"NeedsReconciliation": {errs: []error{&ops.NeedsReconciliationError{Identity: id}}, tries: 1},
		"CallersOwn":          {errs: []error{errors.New("mine")}, tries: 1},
		"Success":             {tries: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tries := 0
			v, err := ops.Retry(t.Context(), &ops.RetryOpts{MinWait: time.Millisecond, MaxWait: 5 * time.Millisecond},
				func(context.Context) (int, error) {
					tries++
					if tries <= len(tc.errs) {
						return 0, tc.errs[tries-1]
					}
					return 42, nil
				})
			require.Equal(t, tc.tries, tries)
			if tc.tries > len(tc.errs) {
				require.NoError(t, err)
				require.Equal(t, 42, v)
			} else {
				require.Same(t, tc.errs[len(tc.errs)-1], err)
			}
		})
	}
}

func TestRetryStopsWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	unavailable := &ops.UnavailableError{Err: errors.New("down")}
	tries := 0
	_, err := ops.Retry(ctx, &ops.RetryOpts{MinWait: time.Millisecond, MaxWait: time.Millisecond}, func(context.Context) (int, error) {
		if tries++; tries == 3 {
			cancel()
		}
		return 0, unavailable
	})
	require.Same(t, unavailable, err, "the last answer, still of its class")
	require.Equal(t, 3, tries)
}
