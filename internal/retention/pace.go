package retention

import (
	"fmt"
	"math"
	"time"
)

// Pace is how a purge spaces its batches for the library's sake. The zero
// value is Paced, the default: retention is routine work done while
// services run.
type Pace struct {
	fixed bool
	yield float64
}

// Paced paces a purge by its own batch latency: after a batch that took k
// times as long per record as the fastest batch so far (its baseline), it
// pauses k-1 times as long as the batch took, so that it works a k-th of
// the time. On an idle server its batches run at the baseline and it does
// not pause; where they run three times slower, the server being busy
// with other work (the library's, say), it works a third of the time and
// leaves the rest to that work. It works at least a fifth of the time
// (MaxPacedYield), so that a purge on a very busy server still ends.
// Measured under the library's traffic in docs/benchmarks.md (issue 13,
// section 7).
var Paced = Pace{}

// FixedYield pauses yield times as long as each batch took, after it,
// whatever the server's load: at 1 the purge works at most half the time.
// FixedYield(0) purges at full speed (a maintenance window). yield must
// be in [0, MaxYield].
func FixedYield(yield float64) Pace { return Pace{fixed: true, yield: yield} }

// MaxYield bounds FixedYield: a purge that works a hundredth of the time.
const MaxYield = 100

// MaxPacedYield bounds Paced's pause, as a multiple of the batch's time.
const MaxPacedYield = 4

// String says what the pace does, as a person would ask for it.
func (p Pace) String() string {
	switch {
	case !p.fixed:
		return "paced by batch latency"
	case p.yield == 0:
		return "full speed"
	}
	return fmt.Sprintf("yield %g", p.yield)
}

// check refuses a yield a purge cannot wait: negative, not a number,
// infinite or above MaxYield.
func (p Pace) check() error {
	if p.fixed && !(p.yield >= 0 && p.yield <= MaxYield) { // NaN fails both
		return fmt.Errorf("yield %g: give a number from 0 (full speed) to %d", p.yield, MaxYield)
	}
	return nil
}

// pacer is one batch loop's pace: it hears each batch's time and size and
// says how long to pause after it. It keeps no clock of its own, so the
// pace is a function of the measurements it is given.
type pacer struct {
	pace Pace
	// fastest is the least time per record of the loop's batches so far,
	// in nanoseconds: the baseline (0: none yet).
	fastest float64
}

// pause is how long to wait after a batch of records that took took, and
// the batch's slowdown: its time per record over the baseline (1 for the
// fastest so far; 0 for a fixed pace, which keeps no baseline).
func (p *pacer) pause(took time.Duration, records int64) (wait time.Duration, slowdown float64) {
	if took <= 0 || records <= 0 {
		return 0, 0
	}
	if p.pace.fixed {
		return scale(took, p.pace.yield), 0
	}
	perRecord := float64(took) / float64(records)
	if p.fastest == 0 || perRecord < p.fastest {
		p.fastest = perRecord
	}
	slowdown = perRecord / p.fastest
	return scale(took, min(slowdown-1, MaxPacedYield)), slowdown
}

// scale is d times f, rounded to the nanosecond, for f in [0, MaxYield].
func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(math.Round(float64(d) * f))
}
