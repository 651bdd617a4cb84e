package ops

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// logCall reports a finished call: to the metrics hook, and as one log
// record. It never logs the intent, the result or error text: only the
// identity, the fingerprint prefix and what happened.
func (s *Store) logCall(ctx context.Context, c *call, id int64, attempt int, d Disposition, err error) {
	answer, name := classify(d, err)
	if s.metrics != nil {
		s.observeCall(c, answer, err)
	}
	level := slog.LevelInfo
	switch name {
	case "conflict", "needs_reconciliation", "lost_ownership", "outcome_unknown", "not_recorded", "unavailable", "refused", "error", "misconfigured",
		"expired", string(createdNotStored):
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
