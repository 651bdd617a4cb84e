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
		answer Answer
		log    string
	}{
		{Created, nil, AnswerCreated, "created"},
		{createdNotStored, nil, AnswerCreated, "created_not_stored"},
		{Replayed, nil, AnswerReplayed, "replayed"},
		{"", nil, AnswerError, "error"}, // fn panicked
		{"", &RejectedError{Replayed: true}, AnswerReplayed, "replayed_rejection"},
		{"", &RejectedError{}, AnswerRejected, "rejected"},
		{"", &InvalidRequestError{Field: "intent"}, AnswerInvalidRequest, "invalid"},
		{"", fmt.Errorf("tool %q: %w", "x", ErrUnknownTool), AnswerInvalidRequest, "misconfigured"},
		{"", fmt.Errorf("tool %q: %w", "x", ErrWrongEffect), AnswerInvalidRequest, "misconfigured"},
		{"", &IntentConflictError{}, AnswerConflict, "conflict"},
		{"", &InProgressError{}, AnswerInProgress, "in_progress"},
		{"", &NeedsReconciliationError{}, AnswerNeedsReconciliation, "needs_reconciliation"},
		{"", &LostOwnershipError{}, AnswerLostOwnership, "lost_ownership"},
		{"", fmt.Errorf("%w (this attempt was %w)", &LostOwnershipError{}, NotApplied(provider)), AnswerLostOwnership, "lost_ownership"},
		{"", &OutcomeUnknownError{Step: StepCall, Err: fmt.Errorf("%w", ErrLeaseLost)}, AnswerOutcomeUnknown, "outcome_unknown"},
		{"", NotApplied(provider), AnswerError, "not_applied"},
		{"", &NotRecordedError{Err: provider}, AnswerNotRecorded, "not_recorded"},
		{"", &ResultNotStoredError{}, AnswerResultNotStored, "replayed_not_stored"},
		{"", fmt.Errorf("begin transaction: %w", &UnavailableError{Err: provider}), AnswerUnavailable, "unavailable"},
		{"", &RefusedError{SQLState: "42501", Err: provider}, AnswerRefused, "refused"},
		{"", &ExpiredError{}, AnswerExpired, "expired"},
		{"", provider, AnswerError, "error"},
	}
	seen := map[Answer]bool{}
	for _, c := range cases {
		answer, log := classify(c.d, c.err)
		require.Equal(t, c.answer, answer, "%q %v", c.d, c.err)
		require.Equal(t, c.log, log, "%q %v", c.d, c.err)
		seen[answer] = true
	}
	require.Len(t, seen, len(Answers()), "every answer has a case")

	// The contract of docs (metrics.md): these values, no other.
	var names []string
	for _, a := range Answers() {
		names = append(names, a.String())
	}
	require.ElementsMatch(t, []string{"created", "replayed", "rejected", "in_progress", "needs_reconciliation", "conflict",
		"invalid_request", "unavailable", "outcome_unknown", "not_recorded", "refused", "lost_ownership", "expired",
		"result_not_stored", "error"}, names)
	require.Equal(t, []string{"reserve", "call", "complete"}, []string{PhaseReserve.String(), PhaseCall.String(), PhaseComplete.String()})
}
