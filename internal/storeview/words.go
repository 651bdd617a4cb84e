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

// A person who cannot decide a stuck record yet defers it: a note and a
// reminder, no change to the record (opsdesk.decide audits it as
// ActionDefer, with the reminder in its details). A deferred record is
// out of the queue: not stuck, not counted or shown as the oldest, until
// its reminder passes; then it is stuck again, and due. A deferral holds
// for the version of the record it was made on: a record taken over or
// changed since is stuck again at once.

// ActionDefer is the audit trail's action for a deferral.
const ActionDefer = "decide:defer"

// DeferralJoin joins each operations row o with its current deferral d
// (d.until, d.role; NULL when there is none): the last deferral people
// made on the record's version. It probes audit_operation_idx once a row.
const DeferralJoin = ` LEFT JOIN LATERAL (SELECT (a.details->>'snooze_until')::timestamptz AS until, a.role` +
	currentDeferral + `) d ON true`

// DeferralUntilSQL is the reminder time of the deferral standing on the
// operations row o, NULL when none stands (DeferralJoin's d.until as a
// scalar subquery).
const DeferralUntilSQL = `(SELECT (a.details->>'snooze_until')::timestamptz` + currentDeferral + `)`

// currentDeferral selects, from the audit trail, the last deferral people
// made on the operations row o at its current version.
const currentDeferral = `
    FROM opsdesk.audit a
    WHERE a.tenant = o.tenant AND a.operation_id = o.id AND a.action = '` + ActionDefer + `'
      AND a.outcome = 'succeeded' AND a.version_after = o.version
    ORDER BY a.seq DESC LIMIT 1`

// deferredSQL is the condition that DeferralJoin's d holds a reminder not
// yet due; Row.Deferred and Row.Due say the same in Go.
const deferredSQL = "(d.until > now())"

// QueueSQL is the condition that the operations row o, joined with
// DeferralJoin's d, is stuck and waits for a person: not deferred.
func QueueSQL(after string) string {
	return "(" + StuckSQL("o.", after) + " AND NOT coalesce(" + deferredSQL + ", false))"
}

// DeferredSQL is the condition that the operations row o, joined with
// DeferralJoin's d, is stuck but deferred: its reminder is not yet due.
func DeferredSQL(after string) string {
	return "(" + StuckSQL("o.", after) + " AND " + deferredSQL + ")"
}

// queueWhere and deferredWhere are QueueSQL and DeferredSQL for a WHERE
// over the operations row o alone, without DeferralJoin: the deferral is
// a scalar subquery, which PostgreSQL runs only for the rows that pass the
// cheaper stuck condition before it (quals are evaluated cheapest first,
// and AND stops at the first false). A list filters with them, takes its
// page, and joins the deferrals of the page's rows only.
func queueWhere(after string) string {
	return "(" + StuckSQL("o.", after) + " AND NOT coalesce(" + DeferralUntilSQL + " > now(), false))"
}

func deferredWhere(after string) string {
	return "(" + StuckSQL("o.", after) + " AND " + DeferralUntilSQL + " > now())"
}

// Deferred tells whether the row is deferred: stuck, with a reminder not
// yet due.
func (r Row) Deferred() bool { return r.State == StateDeferred }

// Due tells whether the row is stuck again because its reminder passed.
func (r Row) Due() bool {
	return r.State == StateStuck && !r.DeferredUntil.IsZero() && !r.DeferredUntil.After(r.DBTime)
}
