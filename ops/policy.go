package ops

import (
	"fmt"
	"time"
)

// Defaults for a Policy's zero fields.
const (
	DefaultLease     = 30 * time.Second
	DefaultRetention = 7 * 24 * time.Hour
)

// The longest lease and retention a Policy may have: the store's state
// machine refuses a lease that ends later than MaxLease after the database
// clock, or an expiry later than MaxRetention after it, from any service
// (schema 24), so that no record holds a time no reader can show.
const (
	// MaxLease is 24 hours: a process that dies holds its record until
	// its lease ends, so a longer lease is only a longer wait.
	MaxLease = 24 * time.Hour
	// MaxRetention is 100 years of 365.25 days (876,600 hours).
	MaxRetention = 876_600 * time.Hour
)

// Policy is how one tool's operations are run and kept.
type Policy struct {
	// Effect is required.
	Effect Effect
	// Lease is how long an external attempt owns its record without
	// renewing it (default DefaultLease, 100ms to MaxLease). The library
	// renews it while the provider call runs; a record whose lease expired
	// is "stuck".
	Lease time.Duration
	// Retention is how long a completed record is kept after completion
	// (default DefaultRetention, at most MaxRetention).
	Retention time.Duration
	// RetryWindow is the longest a caller may retry or recover an
	// operation (default: the retention, at most MaxRetention). The
	// console warns of a retention shorter than it, and a purge's
	// tombstone lasts it. It is recorded in the store with the rest of
	// the policy; the library itself does not use it.
	RetryWindow time.Duration
	// AfterExpiry is what a retry gets once the record was purged: new
	// work (Reexecute, the default) or ErrExpired (RejectAfterExpiry),
	// for as long as the purge's tombstone lasts.
	AfterExpiry AfterExpiry
}

// AfterExpiry is a tool's behaviour towards a retry whose record was
// purged.
type AfterExpiry string

// After-expiry behaviours.
const (
	// Reexecute treats a retry after the purge as new work.
	Reexecute AfterExpiry = "reexecute"
	// RejectAfterExpiry answers a retry after the purge with ErrExpired:
	// for effects a late duplicate must never repeat.
	RejectAfterExpiry AfterExpiry = "reject"
)

func (p Policy) withDefaults(tool string) (Policy, error) {
	if !p.Effect.Valid() {
		return p, fmt.Errorf("tool %q: effect %q is not one of %q, %q, %q",
			tool, p.Effect, EffectLocal, EffectIdempotentProvider, EffectUnknownOutcome)
	}
	if p.Lease == 0 {
		p.Lease = DefaultLease
	}
	if p.Lease < 100*time.Millisecond {
		return p, fmt.Errorf("tool %q: lease %v is shorter than the minimum of 100ms", tool, p.Lease)
	}
	if p.Lease > MaxLease {
		return p, fmt.Errorf("tool %q: lease %v is longer than the maximum of %v", tool, p.Lease, MaxLease)
	}
	if p.Retention == 0 {
		p.Retention = DefaultRetention
	}
	if p.Retention < 0 {
		return p, fmt.Errorf("tool %q: retention %v is negative", tool, p.Retention)
	}
	if p.Retention > MaxRetention {
		return p, fmt.Errorf("tool %q: retention %v is longer than the maximum of %v (100 years)", tool, p.Retention, MaxRetention)
	}
	if p.RetryWindow == 0 {
		p.RetryWindow = p.Retention
	}
	if p.RetryWindow < 0 {
		return p, fmt.Errorf("tool %q: retry window %v is negative", tool, p.RetryWindow)
	}
	if p.RetryWindow > MaxRetention {
		return p, fmt.Errorf("tool %q: retry window %v is longer than the maximum of %v (100 years)", tool, p.RetryWindow, MaxRetention)
	}
	switch p.AfterExpiry {
	case "":
		p.AfterExpiry = Reexecute
	case Reexecute, RejectAfterExpiry:
	default:
		return p, fmt.Errorf("tool %q: after expiry %q is not one of %q, %q", tool, p.AfterExpiry, Reexecute, RejectAfterExpiry)
	}
	return p, nil
}
