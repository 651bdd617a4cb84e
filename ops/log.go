package ops

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// disposition names how a call ended, for logs.
func disposition(d Disposition, err error) string {
	if err == nil {
		return string(d)
	}
	var rej *RejectedError
	switch {
	case errors.As(err, &rej) && rej.Replayed:
		return "replayed_rejection"
	case errors.Is(err, ErrRejected):
		return "rejected"
	case errors.Is(err, ErrInvalidRequest):
		return "invalid"
	case errors.Is(err, ErrUnknownTool), errors.Is(err, ErrWrongEffect):
		return "misconfigured"
	case errors.Is(err, ErrIntentConflict):
		return "conflict"
	case errors.Is(err, ErrInProgress):
		return "in_progress"
	case errors.Is(err, ErrNeedsReconciliation):
		return "needs_reconciliation"
	case errors.Is(err, ErrLostOwnership):
		return "lost_ownership"
	case errors.Is(err, ErrOutcomeUnknown):
		return "outcome_unknown"
	case errors.Is(err, ErrNotApplied):
		return "not_applied"
	case errors.Is(err, ErrNotRecorded):
		return "not_recorded"
	case errors.Is(err, ErrResultNotStored):
		return "replayed_not_stored"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrRefused):
		return "refused"
	}
	return "error"
}

// logCall writes one record per call. It never logs the intent, the result
// or error text: only the identity, the fingerprint prefix and what
// happened.
func (s *Store) logCall(ctx context.Context, c *call, id int64, attempt int, d Disposition, err error) {
	level := slog.LevelInfo
	name := disposition(d, err)
	switch name {
	case "conflict", "needs_reconciliation", "lost_ownership", "outcome_unknown", "not_recorded", "unavailable", "refused", "error", "misconfigured",
		string(createdNotStored):
		level = slog.LevelWarn
	}
	if !s.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("tenant", c.Tenant),
		slog.String("tool", c.Tool),
		slog.String("version", c.Version),
		slog.String("key", c.Key),
		slog.String("disposition", name),
		slog.Duration("latency", time.Since(c.start)),
	}
	if c.fingerprint != (Fingerprint{}) {
		attrs = append(attrs, slog.String("fingerprint", c.fingerprint.Short()))
	}
	if id != 0 {
		attrs = append(attrs, slog.Int64("operation_id", id), slog.Int("attempt", attempt))
	}
	// No error text: messages from validation and from fn can quote the
	// intent. The disposition and, for bad requests, the field say enough.
	var invalid *InvalidRequestError
	if errors.As(err, &invalid) {
		attrs = append(attrs, slog.String("invalid_field", invalid.Field))
	}
	s.logger.LogAttrs(ctx, level, "opsdesk operation", attrs...)
}
