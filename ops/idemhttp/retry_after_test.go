package idemhttp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetryAfterIsWhatRemains: an in-progress answer's Retry-After is what
// remains of the handler's typical duration after the running attempt's
// time so far, capped by its lease, at least a second; the lease's
// remainder while no duration is known.
func TestRetryAfterIsWhatRemains(t *testing.T) {
	t.Parallel()
	s := time.Second
	for _, tc := range []struct {
		typical, lease, running, want time.Duration
	}{
		{3 * s, 30 * s, 0, 3 * s},
		{3 * s, 30 * s, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{3 * s, 30 * s, 10 * s, s}, // past its typical duration: soon
		{3 * s, 2 * s, 0, 2 * s},   // the lease ends first
		{3 * s, 200 * time.Millisecond, 0, s},
		{0, 30 * s, 10 * s, 30 * s}, // nothing known: the lease
	} {
		typ := &typical{configured: tc.typical}
		require.Equal(t, tc.want, typ.retryAfter(tc.lease, tc.running), "%+v", tc)
	}
	observed := &typical{}
	observed.observe(4 * s)
	require.Equal(t, 3*s, observed.retryAfter(30*s, s), "an observed duration counts as a configured one")
}
