package readmodel

import "time"

// LeaseEnded is StuckSQL's lease condition in Go: a lease that expires at
// expires had ended at least after before now (the database time of the
// read).
func LeaseEnded(expires, now time.Time, after time.Duration) bool {
	return !expires.After(now.Add(-after))
}

// ActionDefer is the audit trail's action for a deferral.
const ActionDefer = "decide:defer"

// Pending tells whether the row is pending, its lease live or ended
// (stuck or deferred): the rows whose lease is worth showing and that a
// person may decide on.
func (r Row) Pending() bool {
	return r.State == StatePending || r.State == StateStuck || r.State == StateDeferred
}

// LeaseLive tells whether the row's owner still held its lease when the
// row was read: a decision on it needs force, as the database's decide
// says (its lease has not ended, whatever stuck_after is).
func (r Row) LeaseLive() bool { return r.Pending() && !LeaseEnded(r.LeaseExpiresAt, r.DBTime, 0) }

// Deferred tells whether the row is deferred: stuck, with a reminder not
// yet due.
func (r Row) Deferred() bool { return r.State == StateDeferred }

// Due tells whether the row is stuck again because its reminder passed.
func (r Row) Due() bool {
	return r.State == StateStuck && !r.DeferredUntil.IsZero() && !r.DeferredUntil.After(r.DBTime)
}
