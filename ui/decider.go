package ui

import (
	"context"

	"github.com/opsdesk/opsdesk/reconcile"
)

// Decider is the write API the console needs: one person's decisions,
// acknowledgements and reveals, each applied by a database function that
// checks the person's role and audits the attempt. *desk.Desk
// satisfies it; tests use a small fake. The console never decides what a
// role may do: it only stops offering what Capabilities says the
// database would refuse.
type Decider interface {
	// Capabilities asks the database what the connected role may do.
	Capabilities(ctx context.Context) (reconcile.Capabilities, error)
	// Runbook is the tool's runbook from the catalog ("" when none).
	Runbook(tool string) string
	// Ask runs the tool's outcome lookup; ok is false when the tool has
	// none. It never fails: an answer without a verdict says why.
	Ask(ctx context.Context, tenant, tool, key string) (reconcile.Answer, bool)
	// Decide applies one decision; a refusal is a *reconcile.RefusedError.
	Decide(ctx context.Context, tool string, p reconcile.DecideParams) (reconcile.Result, error)
	// AckConflicts acknowledges a record's unreviewed conflicting attempts
	// among seen, those the operator was shown.
	AckConflicts(ctx context.Context, id int64, seen []int64, reason string) (reconcile.Result, error)
	// RevealStart returns the start of a record's stored intent or
	// result (at most maxBytes of its text) and its size, once its audit
	// record has committed.
	RevealStart(ctx context.Context, id int64, field reconcile.Field, reason string, maxBytes int) (reconcile.Revealed, reconcile.Result, error)
	// RevealConflict returns a conflicting attempt's request and the
	// record's original one, and what differs, once its audit record has
	// committed.
	RevealConflict(ctx context.Context, conflictID int64, reason string) (reconcile.ConflictReveal, reconcile.Result, error)
}

// capsMsg answers the capabilities request made once connected.
type capsMsg struct {
	seq  int
	caps reconcile.Capabilities
	err  error
}

// roleLabel names what the role may do, for the status bar.
func roleLabel(c reconcile.Capabilities) string {
	switch {
	case c.Grant:
		return "admin"
	case c.Decide:
		return "operator"
	}
	return "viewer"
}
