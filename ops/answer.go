package ops

import "errors"

// CallClass is the class of a finished DoTx or DoExternal call: what the
// caller was told, as the metrics hook reports it (the answer label of
// opsdesk_ops_calls_total). Every call has exactly one. Its String is the
// label value.
//
// Created, Rejected and the classes of fn's failures mean that fn ran in
// this call; Replayed and ResultNotStored that an earlier attempt's stored
// outcome was returned and nothing ran. The others say why nothing ran, or
// what the library could not observe.
type CallClass uint8

// The classes. New ones may be added; an implementation of Metrics should
// handle a value it does not know (see CallClasses).
const (
	// ClassCreated: the effect ran in this call and its result is stored
	// (Disposition Created, also when DoExternal stored a marker in place
	// of a result it could not hold: Reply.NotStored).
	ClassCreated CallClass = iota
	// ClassReplayed: an earlier attempt's stored outcome was returned,
	// its result (Disposition Replayed) or its business rejection
	// (*RejectedError with Replayed set). Nothing ran.
	ClassReplayed
	// ClassRejected: fn rejected the operation in this call (Reject) and
	// the rejection is stored.
	ClassRejected
	// ClassInProgress: ErrInProgress.
	ClassInProgress
	// ClassNeedsReconciliation: ErrNeedsReconciliation.
	ClassNeedsReconciliation
	// ClassConflict: ErrIntentConflict.
	ClassConflict
	// ClassInvalidRequest: ErrInvalidRequest, and a request for a tool
	// the store has no policy for (ErrUnknownTool) or with the wrong call
	// (ErrWrongEffect).
	ClassInvalidRequest
	// ClassUnavailable: ErrUnavailable.
	ClassUnavailable
	// ClassOutcomeUnknown: ErrOutcomeUnknown.
	ClassOutcomeUnknown
	// ClassNotRecorded: ErrNotRecorded.
	ClassNotRecorded
	// ClassStoreRefused: ErrStoreRefused.
	ClassStoreRefused
	// ClassLostOwnership: ErrLostOwnership.
	ClassLostOwnership
	// ClassExpired: ErrExpired.
	ClassExpired
	// ClassResultNotStored: ErrResultNotStored, the replay of an effect
	// whose result was not stored.
	ClassResultNotStored
	// ClassError: fn's own error (including NotApplied: the provider
	// declined), a stored result that does not decode into R, or a panic
	// in fn.
	ClassError
	answerCount // keep last
)

var answerNames = [answerCount]string{
	ClassCreated:             "created",
	ClassReplayed:            "replayed",
	ClassRejected:            "rejected",
	ClassInProgress:          "in_progress",
	ClassNeedsReconciliation: "needs_reconciliation",
	ClassConflict:            "conflict",
	ClassInvalidRequest:      "invalid_request",
	ClassUnavailable:         "unavailable",
	ClassOutcomeUnknown:      "outcome_unknown",
	ClassNotRecorded:         "not_recorded",
	ClassStoreRefused:        "refused",
	ClassLostOwnership:       "lost_ownership",
	ClassExpired:             "expired",
	ClassResultNotStored:     "result_not_stored",
	ClassError:               "error",
}

// String is the answer's label value, such as "in_progress".
func (a CallClass) String() string {
	if a < answerCount {
		return answerNames[a]
	}
	return "error"
}

// CallClasses lists every answer, in order of value: an implementation of
// Metrics can create its series up front.
func CallClasses() []CallClass { return enum(answerCount) }

// enum lists the values of an enumeration below count.
func enum[T ~uint8](count T) []T {
	all := make([]T, count)
	for i := range all {
		all[i] = T(i)
	}
	return all
}

// classify is the one place a finished call is classified: its CallClass for
// the metrics hook and the finer name logs use (a replayed rejection, a
// misconfigured tool, a declined provider call, a result stored as a
// marker). d and err are what the call returned; d is createdNotStored
// when DoExternal stored a marker in place of the result.
func classify(d Disposition, err error) (CallClass, string) {
	if err == nil {
		switch d {
		case Created:
			return ClassCreated, string(Created)
		case createdNotStored:
			return ClassCreated, string(createdNotStored)
		case Replayed:
			return ClassReplayed, string(Replayed)
		}
		return ClassError, "error" // fn panicked: the call gave no answer
	}
	var rej *RejectedError
	switch {
	case errors.As(err, &rej) && rej.Replayed:
		return ClassReplayed, "replayed_rejection"
	case errors.Is(err, ErrRejected):
		return ClassRejected, "rejected"
	case errors.Is(err, ErrInvalidRequest):
		return ClassInvalidRequest, "invalid"
	case errors.Is(err, ErrUnknownTool), errors.Is(err, ErrWrongEffect):
		return ClassInvalidRequest, "misconfigured"
	case errors.Is(err, ErrIntentConflict):
		return ClassConflict, "conflict"
	case errors.Is(err, ErrInProgress):
		return ClassInProgress, "in_progress"
	case errors.Is(err, ErrNeedsReconciliation):
		return ClassNeedsReconciliation, "needs_reconciliation"
	case errors.Is(err, ErrLostOwnership):
		return ClassLostOwnership, "lost_ownership"
	case errors.Is(err, ErrOutcomeUnknown):
		return ClassOutcomeUnknown, "outcome_unknown"
	case errors.Is(err, ErrNotApplied):
		return ClassError, "not_applied"
	case errors.Is(err, ErrNotRecorded):
		return ClassNotRecorded, "not_recorded"
	case errors.Is(err, ErrResultNotStored):
		return ClassResultNotStored, "replayed_not_stored"
	case errors.Is(err, ErrUnavailable):
		return ClassUnavailable, "unavailable"
	case errors.Is(err, ErrStoreRefused):
		return ClassStoreRefused, "refused"
	case errors.Is(err, ErrExpired):
		return ClassExpired, "expired"
	}
	return ClassError, "error"
}
