package opsmcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsdesk/opsdesk/ops"
)

// The classes of a ToolError. Those the library answers share the names of
// ops' answers (ops.Answer, the metrics' answer label).
const (
	ClassKeyMissing          = "key_missing"
	ClassKeyInvalid          = "key_invalid"
	ClassTenantInvalid       = "tenant_invalid"
	ClassInvalidRequest      = "invalid_request"
	ClassConflict            = "conflict"
	ClassInProgress          = "in_progress"
	ClassNeedsReconciliation = "needs_reconciliation"
	ClassOutcomeUnknown      = "outcome_unknown"
	ClassNotRecorded         = "not_recorded"
	ClassRejected            = "rejected"
	ClassNotApplied          = "not_applied"
	ClassUnavailable         = "unavailable"
	ClassRefused             = "refused"
	ClassLostOwnership       = "lost_ownership"
	ClassExpired             = "expired"
	ClassResultNotStored     = "result_not_stored"
	ClassError               = "error"
)

// ToolError is the structured content of every tool error this package
// answers instead of the tool's result: what an agent needs to decide its
// next step.
type ToolError struct {
	// Class is one of the Class constants.
	Class string `json:"class"`
	// RetryWithSameKey says whether calling again with the same key and
	// arguments is safe and may get another answer.
	RetryWithSameKey bool `json:"retry_with_same_key"`
	// RetryAfterSeconds, when set, is when such a retry is worth making.
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
	// NeedsPerson says the outcome is for an operator to settle: no retry
	// will run the tool again until one has decided.
	NeedsPerson bool `json:"needs_person,omitempty"`
	// Message explains it in words, for the model.
	Message string `json:"message"`
	// Rejection is the business rejection the tool stored (ClassRejected).
	Rejection json.RawMessage `json:"rejection,omitempty"`
	// OperationID is the record's id, when there is one.
	OperationID int64 `json:"operation_id,omitempty"`
}

// result is the tool error as the MCP result the client gets.
func (e *ToolError) result(key string) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: true, StructuredContent: e, Content: []mcp.Content{&mcp.TextContent{Text: e.text()}}}
	if key != "" {
		res.Meta = mcp.Meta{KeyMeta: key}
	}
	return res
}

func (e *ToolError) text() string {
	s := e.Class + ": " + e.Message
	switch {
	case e.RetryWithSameKey && e.RetryAfterSeconds > 0:
		s += fmt.Sprintf(" (retry with the same key after %gs)", e.RetryAfterSeconds)
	case e.RetryWithSameKey:
		s += " (retry with the same key)"
	case e.NeedsPerson:
		s += " (do not retry: an operator must decide)"
	default:
		s += " (do not retry with the same key)"
	}
	if len(e.Rejection) > 0 {
		s += ": " + string(e.Rejection)
	}
	return s
}

// seconds is a count of milliseconds in seconds.
func seconds(ms int64) float64 { return float64(ms) / 1000 }

// toolError is the answer to an ops error. effect is the tool's: it says
// what a retry of an unknown outcome gets.
func toolError(err error, effect ops.Effect) *ToolError {
	takeover := effect == ops.EffectIdempotentProvider
	var (
		conflict   *ops.IntentConflictError
		inProgress *ops.InProgressError
		needs      *ops.NeedsReconciliationError
		rejected   *ops.RejectedError
		unknown    *ops.OutcomeUnknownError
		invalid    *ops.InvalidRequestError
	)
	switch {
	case errors.As(err, &conflict):
		return &ToolError{Class: ClassConflict, OperationID: conflict.OperationID, Message: "this key was first used with " +
			"other arguments, and the tool ran (or runs) with those: a changed intent needs a new key; this attempt was recorded"}
	case errors.As(err, &inProgress):
		ms := int64(math.Ceil(float64(inProgress.RetryAfter.Microseconds()) / 1000))
		return &ToolError{Class: ClassInProgress, RetryWithSameKey: true, RetryAfterSeconds: seconds(max(ms, 1)),
			OperationID: inProgress.OperationID, Message: "an earlier call with this key is still running"}
	case errors.As(err, &needs):
		return &ToolError{Class: ClassNeedsReconciliation, NeedsPerson: true, OperationID: needs.OperationID,
			Message: "an earlier call with this key may or may not have taken effect; it is kept for an operator to reconcile"}
	case errors.As(err, &rejected):
		return &ToolError{Class: ClassRejected, Rejection: rejected.Payload, OperationID: rejected.OperationID,
			Message: "the tool refused this request, and a retry gets the same answer"}
	case errors.As(err, &unknown) && unknown.Step == ops.StepCall:
		if takeover {
			return &ToolError{Class: ClassOutcomeUnknown, RetryWithSameKey: true, OperationID: unknown.OperationID,
				Message: "whether the call took effect is unknown; the provider deduplicates by key, so a retry is safe"}
		}
		return &ToolError{Class: ClassOutcomeUnknown, NeedsPerson: true, OperationID: unknown.OperationID,
			Message: "whether the call took effect is unknown; it is kept for an operator to reconcile"}
	case errors.As(err, &unknown):
		return &ToolError{Class: ClassOutcomeUnknown, RetryWithSameKey: true, RetryAfterSeconds: 1, OperationID: unknown.OperationID,
			Message: "the store's answer was lost; a retry with the same key replays, runs or waits, as the record says"}
	case errors.Is(err, ops.ErrNotRecorded):
		return &ToolError{Class: ClassNotRecorded, RetryWithSameKey: takeover, NeedsPerson: !takeover,
			Message: "the call finished but its outcome could not be recorded"}
	case errors.Is(err, ops.ErrLostOwnership):
		return &ToolError{Class: ClassLostOwnership, RetryWithSameKey: true,
			Message: "another attempt or an operator settled this key meanwhile; a retry gets what the record says"}
	case errors.Is(err, ops.ErrNotApplied):
		return &ToolError{Class: ClassNotApplied, RetryWithSameKey: true, Message: "the provider declined before acting: " + err.Error()}
	case errors.Is(err, ops.ErrUnavailable):
		return &ToolError{Class: ClassUnavailable, RetryWithSameKey: true, RetryAfterSeconds: 1,
			Message: "the operation store could not be reached; nothing ran"}
	case errors.Is(err, ops.ErrExpired):
		return &ToolError{Class: ClassExpired, Message: "this key's record was purged and the tool refuses late retries; nothing ran"}
	case errors.Is(err, ops.ErrResultNotStored):
		return &ToolError{Class: ClassResultNotStored, Message: "the call took effect, but its result was too large to keep: do not run it again"}
	case errors.As(err, &invalid):
		return &ToolError{Class: ClassInvalidRequest, Message: invalid.Field + " " + invalid.Problem + "; nothing ran"}
	case errors.Is(err, ops.ErrNotDecrypted):
		return &ToolError{Class: ClassError, Message: "the stored result cannot be decrypted (its key is gone); nothing ran"}
	case errors.Is(err, ops.ErrStoreRefused):
		return &ToolError{Class: ClassRefused, Message: "the operation store refused the call (the server's configuration); nothing ran"}
	}
	return nil
}
