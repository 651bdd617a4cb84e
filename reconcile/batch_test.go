package reconcile_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/reconcile"
)

// TestCutBatchFilter: what a run records of any filter start_batch's
// rules would refuse whole is one it accepts (reconcile.CheckBatchFilter), cut on a
// character and marked, its control characters as spaces.
func TestCutBatchFilter(t *testing.T) {
	t.Parallel()
	require.Equal(t, "state:stuck", reconcile.CutBatchFilter("state:stuck"))
	require.Equal(t, "key:a b c", reconcile.CutBatchFilter("key:a\tb\x00c"))
	require.Equal(t, "key:a?b", reconcile.CutBatchFilter("key:a\xffb"))
	for _, long := range []string{strings.Repeat("x", 32<<20), strings.Repeat("é", 600), strings.Repeat("😀", 300) + "\n"} {
		got := reconcile.CutBatchFilter(long)
		require.LessOrEqual(t, len(got), reconcile.MaxBatchFilterBytes)
		require.True(t, utf8.ValidString(got))
		require.True(t, strings.HasSuffix(got, "…"))
		require.NoError(t, reconcile.CheckBatchFilter(got))
	}
	require.Error(t, reconcile.CheckBatchFilter(reconcile.CutBatchFilter(" \t ")), "blank stays blank: refused")
}
