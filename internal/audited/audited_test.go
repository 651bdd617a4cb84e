package audited

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefusalsMatchTheirCode: a refusal's code is the error errors.Is
// finds, whatever wraps it; a code this build does not know matches none.
func TestRefusalsMatchTheirCode(t *testing.T) {
	t.Parallel()
	for code, want := range codes {
		err := fmt.Errorf("wrapped: %w", Result{Outcome: Denied, Code: code, Tenant: "acme", Entry: 3}.Err())
		require.ErrorIs(t, err, want, code)
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Contains(t, err.Error(), "acme entry 3 (queued", code)
	}
	err := Result{Outcome: FailedOut, Code: "from_the_future", Tenant: "", Seq: 9}.Err()
	for _, known := range codes {
		require.NotErrorIs(t, err, known)
	}
	require.Contains(t, err.Error(), "audit record #9")
	require.NoError(t, Result{Outcome: Succeeded}.Err())
}

// TestTenantNameQuotesWhatWouldReadAlike: the ” chain, and names with
// spaces or invisible characters, cannot be mistaken for another chain.
func TestTenantNameQuotesWhatWouldReadAlike(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "''", "acme": "acme", "ac me": `"ac me"`, "acme\u200b": `"acme\u200b"`, "a\xffb": `"a\xffb"`} {
		require.Equal(t, want, TenantName(in), "%q", in)
	}
}
