package desk

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/reconcile"
)

// The reconciler's settings in the store (migration 00027): which tools a
// reconciler's login may decide on which lookup answers, and the pause
// every reconciler obeys. Admins write them through audited functions;
// everyone with people's access reads them.

// ReconcilerState is the store's reconciler settings as read now.
type ReconcilerState struct {
	// Paused, with who paused it (or resumed it last), when and why.
	Paused bool
	Reason string
	By     string
	At     time.Time
	// Allow maps each tool a reconciler may decide to the lookup
	// answers it may decide on ("found", "not_found").
	Allow map[string][]string
}

// ReadReconcilerState reads the allowlist and the pause.
func ReadReconcilerState(ctx context.Context, pool *pgxpool.Pool) (ReconcilerState, error) {
	var s ReconcilerState
	var reason *string
	err := pool.QueryRow(ctx, `SELECT paused, reason, set_by, set_at FROM opsdesk.reconciler_pause`).
		Scan(&s.Paused, &reason, &s.By, &s.At)
	if err != nil {
		return s, fmt.Errorf("read the reconciler's pause: %w", mapError(err))
	}
	s.Reason = deref(reason)
	rows, err := pool.Query(ctx, `SELECT tool, verdicts FROM opsdesk.auto_reconcile ORDER BY tool`)
	if err != nil {
		return s, fmt.Errorf("read the reconciler's allowlist: %w", mapError(err))
	}
	s.Allow = map[string][]string{}
	var tool string
	var verdicts []string
	if _, err := pgx.ForEachRow(rows, []any{&tool, &verdicts}, func() error {
		s.Allow[tool] = append([]string(nil), verdicts...)
		return nil
	}); err != nil {
		return s, fmt.Errorf("read the reconciler's allowlist: %w", mapError(err))
	}
	return s, nil
}

// SetAutoReconcile lets a reconciler decide tool's stuck records on the
// lookup answers verdicts (found, not_found); none takes the tool off the
// allowlist. The connected login must be an admin of every tenant.
func SetAutoReconcile(ctx context.Context, pool *pgxpool.Pool, tool string, verdicts []string, reason, displayName string) (reconcile.Result, error) {
	if verdicts == nil {
		verdicts = []string{}
	}
	return call(ctx, pool, `SELECT (r).* FROM opsdesk.set_auto_reconcile($1, $2, $3, $4) r`,
		tool, verdicts, reason, nullable(displayName))
}

// SetReconcilerPause pauses every reconciler (or resumes them): while
// paused, the database refuses a reconciler's decisions. Pausing needs an
// admin, resuming an admin of every tenant.
func SetReconcilerPause(ctx context.Context, pool *pgxpool.Pool, paused bool, reason, displayName string) (reconcile.Result, error) {
	return call(ctx, pool, `SELECT (r).* FROM opsdesk.set_reconciler_pause($1, $2, $3) r`, paused, reason, nullable(displayName))
}
