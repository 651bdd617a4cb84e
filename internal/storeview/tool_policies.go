package storeview

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordedPolicy is a tool's policy as its service recorded it in the
// store when it started (ops.New, schema 25).
type RecordedPolicy struct {
	Tool        string
	Effect      string
	Lease       time.Duration
	Retention   time.Duration
	RetryWindow time.Duration
	AfterExpiry string
	// RecordedBy is the login that recorded it, and RecordedAt when.
	RecordedBy string
	RecordedAt time.Time
	// Previous is the different policy this one replaced, at ChangedAt:
	// two services disagree, or a deploy changed the policy. Nil when the
	// policy never changed.
	Previous  *RecordedPolicy
	ChangedAt time.Time
}

const toolPoliciesSQL = `
SELECT tool, effect, lease_us, retention_us, retry_window_us, after_expiry, recorded_by, recorded_at,
       previous, changed_at
FROM opsdesk.tool_policies ORDER BY tool`

// toolPolicyRow is a row of toolPoliciesSQL.
type toolPolicyRow struct {
	Tool          string
	Effect        string
	LeaseUS       int64
	RetentionUS   int64
	RetryWindowUS int64
	AfterExpiry   string
	RecordedBy    string
	RecordedAt    time.Time
	Previous      []byte
	ChangedAt     *time.Time
}

// ToolPolicies reads every recorded tool policy, by tool.
func (s *Store) ToolPolicies(ctx context.Context) (map[string]RecordedPolicy, error) {
	rows, _ := s.pool.Query(ctx, toolPoliciesSQL)
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[toolPolicyRow])
	if err != nil {
		return nil, fmt.Errorf("read the recorded tool policies: %w", err)
	}
	out := make(map[string]RecordedPolicy, len(list))
	for _, r := range list {
		p := RecordedPolicy{Tool: r.Tool, Effect: r.Effect, Lease: us(r.LeaseUS), Retention: us(r.RetentionUS),
			RetryWindow: us(r.RetryWindowUS), AfterExpiry: r.AfterExpiry, RecordedBy: r.RecordedBy, RecordedAt: r.RecordedAt}
		if r.Previous != nil {
			var prev previousPolicy
			if err := json.Unmarshal(r.Previous, &prev); err != nil {
				return nil, fmt.Errorf("read tool %q's previous policy: %w", r.Tool, err)
			}
			p.Previous = &RecordedPolicy{Tool: r.Tool, Effect: prev.Effect, Lease: us(prev.LeaseUS),
				Retention: us(prev.RetentionUS), RetryWindow: us(prev.RetryWindowUS), AfterExpiry: prev.AfterExpiry,
				RecordedBy: prev.RecordedBy, RecordedAt: prev.RecordedAt}
		}
		if r.ChangedAt != nil {
			p.ChangedAt = *r.ChangedAt
		}
		out[r.Tool] = p
	}
	return out, nil
}

// us is a count of microseconds as a duration; the store bounds it to 100
// years, well within a time.Duration.
func us(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// previousPolicy is the shape of tool_policies.previous.
type previousPolicy struct {
	Effect        string    `json:"effect"`
	LeaseUS       int64     `json:"lease_us"`
	RetentionUS   int64     `json:"retention_us"`
	RetryWindowUS int64     `json:"retry_window_us"`
	AfterExpiry   string    `json:"after_expiry"`
	RecordedBy    string    `json:"recorded_by"`
	RecordedAt    time.Time `json:"recorded_at"`
}
