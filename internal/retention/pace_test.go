package retention

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The pacer's pauses are a function of the batch times it is told: these
// steps give them, as a purge loop would measure them, and check each
// pause and slowdown exactly.
func TestPacedPausesAsMuchAsTheBatchesSlowDown(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	p := &pacer{pace: Paced}
	for i, s := range []struct {
		took     time.Duration
		records  int64
		wait     time.Duration
		slowdown float64
	}{
		{30 * ms, 1000, 0, 1},        // the first batch is the baseline
		{30 * ms, 1000, 0, 1},        // an idle server: no pause
		{60 * ms, 1000, 60 * ms, 2},  // twice as slow: it works half the time
		{90 * ms, 1000, 180 * ms, 3}, // three times: a third
		{15 * ms, 500, 0, 1},         // a smaller batch at the baseline's speed
		{20 * ms, 1000, 0, 1},        // a faster batch lowers the baseline
		{40 * ms, 1000, 40 * ms, 2},  // against the new baseline
		{5 * ms, 100, 7500 * time.Microsecond, 2.5},
		{1000 * ms, 1000, 4000 * ms, 50}, // at least a fifth of the time: MaxPacedYield
		{0, 1000, 0, 0},                  // nothing measured: no pause, no change
		{-ms, 1000, 0, 0},
		{30 * ms, 0, 0, 0},
		{20 * ms, 1000, 0, 1}, // the baseline is still 20 µs a record
	} {
		wait, slowdown := p.pause(s.took, s.records)
		require.Equal(t, s.wait, wait, "step %d", i)
		require.InDelta(t, s.slowdown, slowdown, 1e-9, "step %d", i)
	}
}

func TestFixedYieldPausesAMultipleOfEachBatch(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, s := range []struct {
		yield float64
		took  time.Duration
		wait  time.Duration
	}{
		{0, 30 * ms, 0},
		{0.5, 30 * ms, 15 * ms},
		{1, 30 * ms, 30 * ms},
		{MaxYield, 30 * ms, 3000 * ms},
	} {
		p := &pacer{pace: FixedYield(s.yield)}
		for range 3 { // no baseline: the same pause every time
			wait, slowdown := p.pause(s.took, 1000)
			require.Equal(t, s.wait, wait, s.yield)
			require.Zero(t, slowdown)
		}
	}
}

// A yield the purge cannot wait is refused before anything starts, with
// what to give instead.
func TestPaceRefusesAYieldItCannotWait(t *testing.T) {
	t.Parallel()
	for _, y := range []float64{-1, -1e-9, MaxYield + 1e-9, 1e308, math.NaN(), math.Inf(1), math.Inf(-1)} {
		err := FixedYield(y).check()
		require.Error(t, err, y)
		require.Contains(t, err.Error(), "give a number from 0 (full speed) to 100", y)
	}
	for _, y := range []float64{0, math.Copysign(0, -1), 0.25, 1, MaxYield} {
		require.NoError(t, FixedYield(y).check(), y)
	}
	require.NoError(t, Paced.check())
	require.Equal(t, "paced by batch latency", Paced.String())
	require.Equal(t, "full speed", FixedYield(0).String())
	require.Equal(t, "yield 1.5", FixedYield(1.5).String())
}
