package ops

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClassify: every error class a call can return has its answer, and
// the answers are exactly the label values the metrics contract names.
func TestClassify(t *testing.T) {
	t.Parallel()
	provider := errors.New("provider: declined")
	cases := []struct {
		d      Disposition
		err    error
		answer CallClass
		log    string
	}{
		{Created, nil, ClassCreated, "created"},
		{createdNotStored, nil, ClassCreated, "created_not_stored"},
		{Replayed, nil, ClassReplayed, "replayed"},
		{"", nil, ClassError, "error"}, // fn panicked
		{"", &RejectedError{Replayed: true}, ClassReplayed, "replayed_rejection"},
		{"", &RejectedError{}, ClassRejected, "rejected"},
		{"", &InvalidRequestError{Field: "intent"}, ClassInvalidRequest, "invalid"},
		{"", fmt.Errorf("tool %q: %w", "x", ErrUnknownTool), ClassInvalidRequest, "misconfigured"},
		{"", fmt.Errorf("tool %q: %w", "x", ErrWrongEffect), ClassInvalidRequest, "misconfigured"},
		{"", &IntentConflictError{}, ClassConflict, "conflict"},
		{"", &InProgressError{}, ClassInProgress, "in_progress"},
		{"", &NeedsReconciliationError{}, ClassNeedsReconciliation, "needs_reconciliation"},
		{"", &LostOwnershipError{}, ClassLostOwnership, "lost_ownership"},
		{"", fmt.Errorf("%w (this attempt was %w)", &LostOwnershipError{}, NotApplied(provider)), ClassLostOwnership, "lost_ownership"},
		{"", &OutcomeUnknownError{Step: StepCall, Err: fmt.Errorf("%w", ErrLeaseLost)}, ClassOutcomeUnknown, "outcome_unknown"},
		{"", NotApplied(provider), ClassError, "not_applied"},
		{"", &NotRecordedError{Err: provider}, ClassNotRecorded, "not_recorded"},
		{"", &ResultNotStoredError{}, ClassResultNotStored, "replayed_not_stored"},
		{"", fmt.Errorf("begin transaction: %w", &UnavailableError{Err: provider}), ClassUnavailable, "unavailable"},
		{"", &StoreRefusedError{SQLState: "42501", Err: provider}, ClassStoreRefused, "refused"},
		{"", &ExpiredError{}, ClassExpired, "expired"},
		{"", provider, ClassError, "error"},
	}
	seen := map[CallClass]bool{}
	for _, c := range cases {
		answer, log := classify(c.d, c.err)
		require.Equal(t, c.answer, answer, "%q %v", c.d, c.err)
		require.Equal(t, c.log, log, "%q %v", c.d, c.err)
		seen[answer] = true
	}
	require.Len(t, seen, len(CallClasses()), "every answer has a case")

	// The contract of docs (metrics.md): these values, no other.
	var names []string
	for _, a := range CallClasses() {
		names = append(names, a.String())
	}
	require.ElementsMatch(t, []string{"created", "replayed", "rejected", "in_progress", "needs_reconciliation", "conflict",
		"invalid_request", "unavailable", "outcome_unknown", "not_recorded", "refused", "lost_ownership", "expired",
		"result_not_stored", "error"}, names)
	require.Equal(t, []string{"reserve", "call", "complete"}, []string{StageReserve.String(), StageCall.String(), StageComplete.String()})
}
