package ops

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// recordPoliciesTimeout bounds New's recording of the tools' policies.
const recordPoliciesTimeout = 5 * time.Second

const recordPolicySQL = `SELECT opsdesk.record_tool_policy($1, $2, $3, $4, $5, $6)`

// RecordPolicies records this store's tool policies in the operation
// store (schema 25), where the console, the exporter and opsdesk doctor
// read them: the service's declaration is the one source of each tool's
// effect, lease, retention, retry window and after-expiry behaviour. New
// calls it; a service whose store was unreachable when it started may call
// it again. A policy recorded by another login for the same tool is
// replaced (the last writer wins) and kept as the previous one, which
// doctor reports.
func (s *Store) RecordPolicies(ctx context.Context) error {
	if len(s.tools) == 0 {
		return nil
	}
	names := make([]string, 0, len(s.tools))
	for name := range s.tools {
		names = append(names, name)
	}
	slices.Sort(names) // one order for every service: no deadlock between two
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return policyError("", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	b := &pgx.Batch{}
	for _, name := range names {
		p := s.tools[name]
		b.Queue(recordPolicySQL, name, string(p.Effect), p.Lease.Microseconds(), p.Retention.Microseconds(),
			p.RetryWindow.Microseconds(), string(p.AfterExpiry))
	}
	br := tx.SendBatch(ctx, b)
	for _, name := range names {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return policyError(name, err)
		}
	}
	if err := br.Close(); err != nil {
		return policyError("", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return policyError("", err)
	}
	return nil
}

// policyError classifies a failure of RecordPolicies: ErrStoreRefused when the
// store refused a policy (a value out of its bounds, a role not granted
// opsdesk_service, a schema older than 25), ErrUnavailable otherwise.
func policyError(tool string, err error) error {
	if tool == "" {
		return fmt.Errorf("record tool policies: %w", notWritten(err))
	}
	return fmt.Errorf("record tool %q's policy: %w", tool, notWritten(err))
}
