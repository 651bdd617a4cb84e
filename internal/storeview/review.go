package storeview

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/ops"
)

// unfinishedPurgesSQL lists the unfinished runs with what they purged so
// far: a run's totals are its row plus its batches' (migration 00014).
const unfinishedPurgesSQL = `
SELECT r.id, r.role, coalesce(r.display_name, ''), r.started_at, r.reason, coalesce(r.tool, ''), r.before,
    r.purged + coalesce(b.n, 0), r.may_purge, b.last,
    -- Runs started since migration 00023 name their start record by entry.
    coalesce(r.start_seq, (SELECT a.seq FROM opsdesk.audit a WHERE a.tenant = '' AND a.entry = r.start_entry))
FROM opsdesk.purge_runs r
LEFT JOIN LATERAL (SELECT sum(x.purged) AS n, max(x.done_at) AS last FROM opsdesk.purge_batches x WHERE x.run = r.id) b ON true
WHERE r.finished_at IS NULL
ORDER BY r.id`

// UnfinishedPurges lists the purge runs started and never finished. A role
// that may not read purge runs (only admins of every tenant see them) gets
// none and seen false.
func (s *Store) UnfinishedPurges(ctx context.Context) (runs []readmodel.UnfinishedPurge, seen bool, err error) {
	return s.unfinishedPurges(ctx, s.pool)
}

func (s *Store) unfinishedPurges(ctx context.Context, q querier) ([]readmodel.UnfinishedPurge, bool, error) {
	var seen bool
	err := q.QueryRow(ctx, `SELECT has_table_privilege('opsdesk.purge_runs', 'SELECT')
    AND (NOT has_function_privilege('opsdesk.sees_every_tenant()', 'EXECUTE') OR opsdesk.sees_every_tenant())`).Scan(&seen)
	if err != nil {
		return nil, false, fmt.Errorf("read the unfinished purges: %w", err)
	}
	if !seen {
		return nil, false, nil
	}
	rows, err := q.Query(ctx, unfinishedPurgesSQL)
	if err != nil {
		return nil, true, fmt.Errorf("read the unfinished purges: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (readmodel.UnfinishedPurge, error) {
		var u readmodel.UnfinishedPurge
		err := row.Scan(&u.Run, &u.Role, &u.DisplayName, &u.StartedAt, &u.Reason, &u.Tool, &u.Before,
			&u.Purged, &u.MayPurge, &u.LastBatchAt, &u.StartSeq)
		return u, err
	})
	if err != nil {
		return nil, true, fmt.Errorf("read the unfinished purges: %w", err)
	}
	return runs, true, nil
}

// Tools lists the tools of the records the role sees: a loose index scan,
// a probe per tenant and per tool.
func (s *Store) Tools(ctx context.Context) ([]string, error) {
	var every bool
	var at time.Time
	var tenants, tools []string
	if err := s.pool.QueryRow(ctx, storeToolsSQL).Scan(&at, &every, &tenants, &tools); err != nil {
		return nil, fmt.Errorf("list the store's tools: %w", err)
	}
	slices.Sort(tools)
	return tools, nil
}

// visibleSQL says whether the role sees every tenant. (A role that may not
// ask, the tables' owner say, is not scoped by the policies either.)
const visibleSQL = "CASE WHEN has_function_privilege('opsdesk.sees_every_tenant()', 'EXECUTE') THEN opsdesk.sees_every_tenant() ELSE true END"

// storeToolsSQL lists the tools of the records the role sees, without
// reading every record: a loose index scan of the primary key, a probe per
// tenant and per tool. A role that sees some tenants walks those tenants
// only, so other tenants' records cost it nothing.
var storeToolsSQL = storeWalkSQL + `
SELECT now(), (SELECT yes FROM every),
    (SELECT coalesce(array_agg(tenant), '{}') FROM visible),
    (SELECT coalesce(array_agg(DISTINCT tool), '{}') FROM pairs)`

// storePairsSQL lists the (tenant, tool) pairs of the records the role
// sees, by the same walk, as two arrays in step, ordered by tenant and
// tool; the tenants it sees; and the planner's estimate of the
// operations' rows.
var storePairsSQL = storeWalkSQL + `
SELECT now(), (SELECT yes FROM every), (SELECT coalesce(array_agg(tenant), '{}') FROM visible),
    coalesce(array_agg(tenant ORDER BY tenant, tool), '{}'), coalesce(array_agg(tool ORDER BY tenant, tool), '{}'),
    (SELECT reltuples FROM pg_class WHERE oid = 'opsdesk.operations'::regclass)
FROM pairs`

// storeWalkSQL walks the primary key for the tenants the role sees
// (visible) and the tools of each (pairs); every says whether the role
// sees every tenant.
const storeWalkSQL = `
WITH RECURSIVE every AS (SELECT ` + visibleSQL + ` AS yes),
tenants AS (
    (SELECT tenant FROM opsdesk.operations WHERE (SELECT yes FROM every) ORDER BY tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT o.tenant FROM opsdesk.operations o WHERE o.tenant > t.tenant ORDER BY o.tenant LIMIT 1)
    FROM tenants t WHERE t.tenant IS NOT NULL
),
visible AS (
    SELECT tenant FROM tenants WHERE tenant IS NOT NULL
    UNION ALL
    SELECT unnest(opsdesk.visible_tenants()) WHERE NOT (SELECT yes FROM every)
),
pairs AS (
    SELECT v.tenant, f.tool FROM visible v,
        LATERAL (SELECT o.tool FROM opsdesk.operations o WHERE o.tenant = v.tenant ORDER BY o.tool LIMIT 1) f
    UNION ALL
    SELECT p.tenant, n.tool FROM pairs p,
        LATERAL (SELECT o.tool FROM opsdesk.operations o WHERE o.tenant = p.tenant AND o.tool > p.tool
                 ORDER BY o.tool LIMIT 1) n
)`

// reviewSQL reads each tool's figures: $1 the tools, $2 their retention
// in microseconds, $3 the row count each figure stops at, $4 the
// stuck-after interval in microseconds, $5 the tenants the role sees.
// The expired records are the unheld ones and the held ones.
// Completed records are counted tenant by tenant on
// operations_tool_expiry_idx, index-only, until the count reaches $3;
// pending ones on operations_pending_lease_idx, which holds the few pending
// records. Held records are few and have their own index. The records
// with unreviewed conflicts are counted exactly from
// opsdesk.record_conflicts (migration 00022), index-only, without reading
// the records: joining each conflict to its record grew with the
// conflicts (the review took 6.5 times as long at 10M records as at 1M).
// Its untracked rows, records whose conflicts were written by hand without
// counting them, are read from the records.
var reviewSQL = `
SELECT t.tool,
    ` + completedCount("$5::text[]", "t.tool", "$3", "o.expires_at > now() AND o.expires_at <= now() + interval '24 hours'") + `,
    ` + completedCount("$5::text[]", "t.tool", "$3", "o.expires_at > now() AND o.expires_at <= now() + interval '7 days'") + `,
    ` + completedCount("$5::text[]", "t.tool", "$3", "o.expires_at <= now() AND NOT o.held") + `,
    (SELECT count(*) FROM opsdesk.operations o WHERE o.held AND o.tool = t.tool
        AND o.state = 'completed' AND o.expires_at <= now()),
    (SELECT count(*) FROM opsdesk.record_conflicts r WHERE r.tool = t.tool AND r.expires_at <= now()
        AND r.unreviewed AND r.tracked AND r.state = 'completed' AND NOT r.held)
    + (SELECT count(*) FROM opsdesk.record_conflicts r
        JOIN opsdesk.operations o ON o.tenant = r.tenant AND o.tool = r.tool AND o.key = r.key
        WHERE r.unreviewed AND NOT r.tracked AND r.tool = t.tool
            AND o.state = 'completed' AND o.expires_at <= now() AND NOT o.held),
    p.id, p.leased_at, p.lease_expires_at, ` + StuckSQL("p.", "$4 * interval '1 microsecond'") + `,
    (SELECT count(*) FROM (SELECT FROM opsdesk.operations o WHERE o.tool = t.tool
        AND ` + StuckSQL("o.", "t.retention_us * interval '1 microsecond'") + ` LIMIT $3) s)
FROM unnest($1::text[], $2::bigint[]) AS t (tool, retention_us)
LEFT JOIN LATERAL (SELECT o.id, o.state, o.leased_at, o.lease_expires_at FROM opsdesk.operations o
    WHERE o.state = 'pending' AND o.tool = t.tool ORDER BY o.lease_expires_at LIMIT 1) p ON true
ORDER BY t.tool`

// completedCount counts a tool's completed records that meet cond (over
// o), tenant by tenant of the array tenants, up to limit: each tenant's
// records are a range of operations_tool_expiry_idx.
func completedCount(tenants, tool, limit, cond string) string {
	return `(SELECT count(*) FROM (SELECT FROM unnest(` + tenants + `) v (tenant),
        LATERAL (SELECT FROM opsdesk.operations o WHERE o.tenant = v.tenant AND o.tool = ` + tool + `
            AND o.state = 'completed' AND ` + cond + `) o
        LIMIT ` + limit + `) s)`
}

// Review reads the retention review for the catalog's tools and every tool
// of the store, all as of one database time.
func (s *Store) Review(ctx context.Context, catalog map[string]readmodel.ToolPolicy) (r readmodel.Review, err error) {
	err = s.snapshot(ctx, func(q querier) error {
		r, err = s.reviewIn(ctx, q, catalog)
		return err
	})
	return r, err
}

func (s *Store) reviewIn(ctx context.Context, q querier, catalog map[string]readmodel.ToolPolicy) (readmodel.Review, error) {
	var r readmodel.Review
	var every bool
	var tenants, inStore []string
	if err := q.QueryRow(ctx, storeToolsSQL).Scan(&r.DBTime, &every, &tenants, &inStore); err != nil {
		return r, fmt.Errorf("list the store's tools: %w", err)
	}
	r.Scoped = !every
	names := slices.Clone(inStore)
	for name := range catalog {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	tools := make(map[string]*readmodel.ToolReview, len(names))
	retention := make([]int64, len(names))
	r.Tools = make([]readmodel.ToolReview, len(names))
	for i, name := range names {
		t := &r.Tools[i]
		p, known := catalog[name]
		*t = readmodel.ToolReview{Tool: name, InCatalog: known, InStore: slices.Contains(inStore, name),
			Retention: p.Retention, RetryWindow: p.RetryWindow, AfterExpiry: p.AfterExpiry}
		if t.Retention <= 0 {
			t.Retention = ops.DefaultRetention
		}
		if t.RetryWindow <= 0 {
			t.RetryWindow = t.Retention
		}
		if t.AfterExpiry == "" {
			t.AfterExpiry = "reexecute"
		}
		tools[name] = t
		retention[i] = t.Retention.Microseconds()
	}
	rows, err := q.Query(ctx, reviewSQL, names, retention, readmodel.CountCap+1, s.opts.StuckAfter.Microseconds(), tenants)
	if err != nil {
		return r, fmt.Errorf("read the retention figures: %w", err)
	}
	var (
		tool                                  string
		in24h, in7d, unheld, held, conflicted int64
		stuckPast                             int64
		id                                    *int64
		leasedAt, leaseExpiresAt              *time.Time
		stuck                                 *bool
	)
	_, err = pgx.ForEachRow(rows, []any{&tool, &in24h, &in7d, &unheld, &held, &conflicted,
		&id, &leasedAt, &leaseExpiresAt, &stuck, &stuckPast}, func() error {
		t := tools[tool]
		t.Expiring24h, t.Expiring7d, t.Purgeable = readmodel.Count{N: in24h}, readmodel.Count{N: in7d}, readmodel.Count{N: unheld}
		t.Held, t.Conflicted = held, conflicted
		t.StuckPastRetention = readmodel.Count{N: stuckPast}
		if id != nil {
			t.OldestPending = &readmodel.PendingRef{ID: *id, LeasedAt: *leasedAt, LeaseExpiresAt: *leaseExpiresAt, Stuck: *stuck}
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("read the retention figures: %w", err)
	}
	if err := estimateReview(ctx, q, &r); err != nil {
		return r, err
	}
	if r.UnfinishedPurges, _, err = s.unfinishedPurges(ctx, q); err != nil {
		return r, err
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		// The expired records are the unheld and the held ones; a purge
		// takes the unheld ones without unreviewed conflicts.
		t.Expired = t.Purgeable
		t.Expired.N += t.Held
		t.Purgeable.N = max(0, t.Purgeable.N-t.Conflicted)
		t.Warnings = warnings(*t)
	}
	return r, nil
}

// estimateReview replaces the counts that reached the cap: with the
// planner's estimate of the tool's rows when the role sees every tenant,
// else with the lower bound counted.
func estimateReview(ctx context.Context, q querier, r *readmodel.Review) error {
	batch := &pgx.Batch{}
	// Each estimate is an EXPLAIN, which readies its plan for execution:
	// past a few million records the plan's cost crosses jit_above_cost
	// and PostgreSQL builds JIT code for it, milliseconds each, for a plan
	// that never runs (at 10M records the estimates took 28 ms against 7
	// at 1M). The setting lasts as long as this read-only transaction.
	batch.Queue("SET LOCAL jit = off")
	for i := range r.Tools {
		t := &r.Tools[i]
		for _, c := range []struct {
			n    *readmodel.Count
			cond string
		}{
			{&t.Expiring24h, "expires_at > now() AND expires_at <= now() + interval '24 hours'"},
			{&t.Expiring7d, "expires_at > now() AND expires_at <= now() + interval '7 days'"},
			{&t.Purgeable, "expires_at <= now() AND NOT held"},
			{&t.StuckPastRetention, ""},
		} {
			if c.n.N <= readmodel.CountCap {
				continue
			}
			if r.Scoped || c.cond == "" {
				*c.n = readmodel.Count{N: readmodel.CountCap, AtLeast: true} // it counted CountCap+1
				continue
			}
			queuePlanRows(batch, "SELECT FROM opsdesk.operations WHERE state = 'completed' AND tool = $1 AND "+c.cond,
				func(estimate float64) {
					// Never below what was counted: statistics may lag behind.
					*c.n = readmodel.Count{N: max(int64(estimate), readmodel.CountCap+1), Estimated: true}
				}, t.Tool)
		}
	}
	if batch.Len() == 1 {
		return nil
	}
	if err := q.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("estimate the retention figures: %w", err)
	}
	return nil
}

// warnings are what an operator must see in a tool's review.
func warnings(t readmodel.ToolReview) []string {
	var w []string
	if !t.InCatalog {
		w = append(w, fmt.Sprintf("not in the catalog: its retry window and after_expiry are unknown here; "+
			"figures assume the library's default retention (%s)", span(t.Retention)))
	}
	if t.InCatalog && t.Retention < t.RetryWindow {
		gets := "finds no record and runs again"
		if t.AfterExpiry == "reject" {
			gets = "gets ErrExpired instead of its result"
		}
		w = append(w, fmt.Sprintf("retention %s is shorter than the retry window %s: a retry in between %s",
			span(t.Retention), span(t.RetryWindow), gets))
	}
	if n := t.StuckPastRetention; n.N > 0 {
		w = append(w, fmt.Sprintf("%s stuck for longer than the retention %s: their callers have likely given up; reconcile them",
			countText(n, "record", "records"), span(t.Retention)))
	}
	return w
}

// span writes a policy's duration in its largest whole unit: 7d, 36h, 90m.
func span(d time.Duration) string {
	switch {
	case d > 0 && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// countText writes a count with its noun: "1 record", "1000+ records",
// "~52000 records".
func countText(c readmodel.Count, one, many string) string {
	switch {
	case c.AtLeast:
		return fmt.Sprintf("%d+ %s", c.N, many)
	case c.Estimated:
		return fmt.Sprintf("~%d %s", c.N, many)
	case c.N == 1:
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", c.N, many)
}
