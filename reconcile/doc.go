// Package reconcile is what people's decisions on operations whose outcome
// nobody observed are made of: the decisions (confirm completed, confirm
// not executed (release), mark failed, defer) and their parameters, the
// lookup evidence and the provider lookups that gather it (Ask), the
// answers (Result, *RefusedError), reveals, and a conflict's two requests
// with the fields that differ (DiffRequests, RequestLines).
//
// It needs no database driver, so the console uses it without pgx; the
// calls of the database's functions that apply the decisions are
// reconcile/desk's.
package reconcile
