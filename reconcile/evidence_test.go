package reconcile_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/reconcile"
)

func TestLookupContradicts(t *testing.T) {
	t.Parallel()
	found := reconcile.Evidence{Lookup: reconcile.LookupFound, Ref: "CH-1118"}
	foundNoRef := reconcile.Evidence{Lookup: reconcile.LookupFound}
	notFound := reconcile.Evidence{Lookup: reconcile.LookupNotFound}
	for _, tc := range []struct {
		e    reconcile.Evidence
		d    reconcile.Decision
		ref  string
		want bool
	}{
		{found, reconcile.Completed, "CH-1118", false},
		{found, reconcile.Completed, "CH-MANUAL", true},
		{found, reconcile.Completed, " CH-1118", true}, // exactly the provider's, or another
		{found, reconcile.NotExecuted, "", true},
		{found, reconcile.Failed, "", true},
		{found, reconcile.Defer, "", false},
		{foundNoRef, reconcile.Completed, "CH-MANUAL", false}, // nothing to contradict
		{notFound, reconcile.Completed, "CH-1", true},
		{notFound, reconcile.NotExecuted, "", false},
		{reconcile.Evidence{}, reconcile.Completed, "CH-1", false},
		{reconcile.NoLookupEvidence("charge-card"), reconcile.NotExecuted, "", false},
	} {
		require.Equal(t, tc.want, tc.e.Contradicts(tc.d, tc.ref), "%+v %s %q", tc.e, tc.d, tc.ref)
		require.Equal(t, tc.want && tc.d == reconcile.Completed && tc.e.Lookup == reconcile.LookupFound,
			tc.e.RefContradicts(tc.d, tc.ref), "%+v %s %q", tc.e, tc.d, tc.ref)
	}
	require.Equal(t, "no evidence gathered: the catalog has no lookup for charge-card", reconcile.NoLookupEvidence("charge-card").Summary)
}

func TestKindsDescribeEachDecisionOnce(t *testing.T) {
	t.Parallel()
	seen := map[reconcile.Decision]bool{}
	for i, k := range reconcile.Kinds {
		require.False(t, seen[k.Decision], "%s twice", k.Decision)
		seen[k.Decision] = true
		require.Equal(t, k.Decision, reconcile.Decisions[i])
		require.NotEmpty(t, k.Words.Name, k.Decision)
		require.NotEmpty(t, k.Words.Gist, k.Decision)
		require.NotEmpty(t, k.Words.Help, k.Decision)
		require.NotEmpty(t, k.Words.Done, k.Decision)
		require.Equal(t, k.Words.Group == "", k.Words.Each == "", "%s: a bulk proposal has both wordings", k.Decision)
		got, ok := reconcile.KindOf(k.Decision)
		require.True(t, ok)
		require.Equal(t, k.Decision, got.Decision)
	}
	require.Len(t, reconcile.Decisions, len(reconcile.Kinds))
	_, ok := reconcile.KindOf("maybe")
	require.False(t, ok)
	require.LessOrEqual(t, len(reconcile.Kinds), 9, "the console chooses a decision with one digit key")
}
