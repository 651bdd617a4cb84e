package storeview

import "github.com/opsdesk/opsdesk/internal/readmodel"

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

// A person who cannot decide a stuck record yet defers it: a note and a
// reminder, no change to the record (opsdesk.decide audits it as
// ActionDefer, with the reminder in its details). A deferred record is
// out of the queue: not stuck, not counted or shown as the oldest, until
// its reminder passes; then it is stuck again, and due. A deferral holds
// for the version of the record it was made on: a record taken over or
// changed since is stuck again at once.

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
    WHERE a.tenant = o.tenant AND a.operation_id = o.id AND a.action = '` + readmodel.ActionDefer + `'
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
