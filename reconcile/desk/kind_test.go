package desk_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// TestKindsAreTheDatabasesDecisions holds reconcile.Kinds and
// opsdesk.decide to the same names: each kind, with what it needs, gets
// past the function's name check (to the version check), and the
// function's refusal of an unknown name lists exactly the kinds.
func TestKindsAreTheDatabasesDecisions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-1")
	var names []string
	for _, k := range reconcile.Kinds {
		names = append(names, string(k.Decision))
		p := reconcile.DecideParams{OperationID: id, Decision: k.Decision, ExpectVersion: v + 1, Reason: "checked"}
		if k.NeedsRef {
			p.ResultRef = "ch_1"
		}
		if k.NeedsUntil {
			p.SnoozeUntil = time.Now().Add(time.Hour)
		}
		_, err := desk.Decide(b.ctx, b.operator.Pool, p)
		require.ErrorIs(t, err, reconcile.ErrChanged, "%s: the database knows it, and it needs no more than the kind says", k.Decision)
	}
	_, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: id, Decision: "maybe", ExpectVersion: v, Reason: "checked"})
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	var refused *reconcile.RefusedError
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Message, "("+strings.Join(names, ", ")+")", "the database's decisions are the kinds")
}
