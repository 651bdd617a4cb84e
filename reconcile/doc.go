// Package reconcile carries people's decisions on operations whose outcome
// nobody observed: confirm completed, confirm not executed (release), mark
// failed, defer; the acknowledgement of conflicting attempts; the reveal of
// a stored result, or of a conflict's two requests with the fields that
// differ (RevealConflict, DiffRequests).
//
// The database decides. Each call runs one SECURITY DEFINER function of the
// opsdesk schema in its own short transaction, connected as the person's
// own login role: the function checks that role's membership, the record's
// state and the version the person saw, applies the decision and appends
// the audit record together. A refusal changes nothing, is audited too, and
// comes back as a *RefusedError naming the audit record.
package reconcile
