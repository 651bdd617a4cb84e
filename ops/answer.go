package ops

import "errors"

// Answer is the class of a finished DoTx or DoExternal call: what the
// caller was told, as the metrics hook reports it (the answer label of
// opsdesk_ops_calls_total). Every call has exactly one. Its String is the
// label value.
//
// Created, Rejected and the classes of fn's failures mean that fn ran in
// this call; Replayed and ResultNotStored that an earlier attempt's stored
// outcome was returned and nothing ran. The others say why nothing ran, or
// what the library could not observe.
type Answer uint8

// The answers. New ones may be added; an implementation of Metrics should
// handle a value it does not know (see Answers).
const (
	// AnswerCreated: the effect ran in this call and its result is stored
	// (Disposition Created, also when DoExternal stored a marker in place
	// of a result it could not hold: Outcome.NotStored).
	AnswerCreated Answer = iota
	// AnswerReplayed: an earlier attempt's stored outcome was returned,
	// its result (Disposition Replayed) or its business rejection
	// (*RejectedError with Replayed set). Nothing ran.
	AnswerReplayed
	// AnswerRejected: fn rejected the operation in this call (Reject) and
	// the rejection is stored.
	AnswerRejected
	// AnswerInProgress: ErrInProgress.
	AnswerInProgress
	// AnswerNeedsReconciliation: ErrNeedsReconciliation.
	AnswerNeedsReconciliation
	// AnswerConflict: ErrIntentConflict.
	AnswerConflict
	// AnswerInvalidRequest: ErrInvalidRequest, and a request for a tool
	// the store has no policy for (ErrUnknownTool) or with the wrong call
	// (ErrWrongEffect).
	AnswerInvalidRequest
	// AnswerUnavailable: ErrUnavailable.
	AnswerUnavailable
	// AnswerOutcomeUnknown: ErrOutcomeUnknown.
	AnswerOutcomeUnknown
	// AnswerNotRecorded: ErrNotRecorded.
	AnswerNotRecorded
	// AnswerRefused: ErrRefused.
	AnswerRefused
	// AnswerLostOwnership: ErrLostOwnership.
	AnswerLostOwnership
	// AnswerExpired: ErrExpired.
	AnswerExpired
	// AnswerResultNotStored: ErrResultNotStored, the replay of an effect
	// whose result was not stored.
	AnswerResultNotStored
	// AnswerError: fn's own error (including NotApplied: the provider
	// declined), a stored result that does not decode into R, or a panic
	// in fn.
	AnswerError
	answerCount // keep last
)

var answerNames = [answerCount]string{
	AnswerCreated:             "created",
	AnswerReplayed:            "replayed",
	AnswerRejected:            "rejected",
	AnswerInProgress:          "in_progress",
	AnswerNeedsReconciliation: "needs_reconciliation",
	AnswerConflict:            "conflict",
	AnswerInvalidRequest:      "invalid_request",
	AnswerUnavailable:         "unavailable",
	AnswerOutcomeUnknown:      "outcome_unknown",
	AnswerNotRecorded:         "not_recorded",
	AnswerRefused:             "refused",
	AnswerLostOwnership:       "lost_ownership",
	AnswerExpired:             "expired",
	AnswerResultNotStored:     "result_not_stored",
	AnswerError:               "error",
}

// String is the answer's label value, such as "in_progress".
func (a Answer) String() string {
	if a < answerCount {
		return answerNames[a]
	}
	return "error"
}

// Answers lists every answer, in order of value: an implementation of
// Metrics can create its series up front.
func Answers() []Answer { return enum(answerCount) }

// enum lists the values of an enumeration below count.
func enum[T ~uint8](count T) []T {
	all := make([]T, count)
	for i := range all {
		all[i] = T(i)
	}
	return all
}

// classify is the one place a finished call is classified: its Answer for
// the metrics hook and the finer name logs use (a replayed rejection, a
// misconfigured tool, a declined provider call, a result stored as a
// marker). d and err are what the call returned; d is createdNotStored
// when DoExternal stored a marker in place of the result.
func classify(d Disposition, err error) (Answer, string) {
	if err == nil {
		switch d {
		case Created:
			return AnswerCreated, string(Created)
		case createdNotStored:
			return AnswerCreated, string(createdNotStored)
		case Replayed:
			return AnswerReplayed, string(Replayed)
		}
		return AnswerError, "error" // fn panicked: the call gave no answer
	}
	var rej *RejectedError
	switch {
	case errors.As(err, &rej) && rej.Replayed:
		return AnswerReplayed, "replayed_rejection"
	case errors.Is(err, ErrRejected):
		return AnswerRejected, "rejected"
	case errors.Is(err, ErrInvalidRequest):
		return AnswerInvalidRequest, "invalid"
	case errors.Is(err, ErrUnknownTool), errors.Is(err, ErrWrongEffect):
		return AnswerInvalidRequest, "misconfigured"
	case errors.Is(err, ErrIntentConflict):
		return AnswerConflict, "conflict"
	case errors.Is(err, ErrInProgress):
		return AnswerInProgress, "in_progress"
	case errors.Is(err, ErrNeedsReconciliation):
		return AnswerNeedsReconciliation, "needs_reconciliation"
	case errors.Is(err, ErrLostOwnership):
		return AnswerLostOwnership, "lost_ownership"
	case errors.Is(err, ErrOutcomeUnknown):
		return AnswerOutcomeUnknown, "outcome_unknown"
	case errors.Is(err, ErrNotApplied):
		return AnswerError, "not_applied"
	case errors.Is(err, ErrNotRecorded):
		return AnswerNotRecorded, "not_recorded"
	case errors.Is(err, ErrResultNotStored):
		return AnswerResultNotStored, "replayed_not_stored"
	case errors.Is(err, ErrUnavailable):
		return AnswerUnavailable, "unavailable"
	case errors.Is(err, ErrRefused):
		return AnswerRefused, "refused"
	case errors.Is(err, ErrExpired):
		return AnswerExpired, "expired"
	}
	return AnswerError, "error"
}
