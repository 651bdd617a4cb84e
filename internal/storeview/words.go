package storeview

import "time"

// The store's words for a record that needs a person, defined once: the
// SQL the queries filter and count with beside the Go the screens decide
// with, so that the two cannot drift apart. (The migrations' view_state
// is the database's own copy, for the audit trail's states.)
//
// A pending record holds a lease. Its lease ended when its expiry is not
// after now; a pending record whose lease ended at least the context's
// stuck_after ago is stuck: its owner vanished and nobody completed it.
// With no stuck_after (0), a record whose lease ended is stuck, and a
// decision on one whose lease has not ended needs force.

// StuckSQL is the condition that the operations row alias (such as "o.",
// or "" for none) is stuck; after is SQL for the stuck-after interval,
// such as "$1 * interval '1 microsecond'". The lease column stands alone on
// one side, so the partial index on pending leases serves it. LeaseEnded
// is its lease condition in Go.
func StuckSQL(alias, after string) string {
	return "(" + alias + "state = 'pending' AND " + alias + "lease_expires_at <= now() - " + after + ")"
}

// LiveSQL is the condition that the operations row alias is pending and
// not stuck: its lease has not ended, or ended less than after ago.
func LiveSQL(alias, after string) string {
	return "(" + alias + "state = 'pending' AND " + alias + "lease_expires_at > now() - " + after + ")"
}

// LeaseEnded is StuckSQL's lease condition in Go: a lease that expires at
// expires had ended at least after before now (the database time of the
// read).
func LeaseEnded(expires, now time.Time, after time.Duration) bool {
	return !expires.After(now.Add(-after))
}

// Pending tells whether the row is pending, its lease live or ended: the
// rows whose lease is worth showing and that a person may decide on.
func (r Row) Pending() bool { return r.State == StatePending || r.State == StateStuck }

// LeaseLive tells whether the row's owner still held its lease when the
// row was read: a decision on it needs force, as the database's decide
// says (its lease has not ended, whatever stuck_after is).
func (r Row) LeaseLive() bool { return r.Pending() && !LeaseEnded(r.LeaseExpiresAt, r.DBTime, 0) }
