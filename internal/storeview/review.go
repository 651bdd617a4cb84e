package storeview

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/ops"
)

// ToolPolicy is a tool's retention: as its service recorded it (ops.New),
// else as the catalog gives it.
type ToolPolicy struct {
	// Retention is how long a completed record is kept (0: the library's
	// default, ops.DefaultRetention).
	Retention time.Duration
	// RetryWindow is the longest a caller may retry or recover an
	// operation (0: the retention).
	RetryWindow time.Duration
	// AfterExpiry is what a late retry gets once the record was purged:
	// "reexecute" (the default) or "reject".
	AfterExpiry string
}

// Count is a figure of the review. Up to CountCap it is exact; above it,
// it is the planner's estimate (Estimated) for a role that sees every
// tenant, or a lower bound (AtLeast: N or more) for one that sees some: a
// count that grew with the table would slow the review down with it. A
// purge's dry run counts exactly.
type Count struct {
	N         int64 `json:"n"`
	Estimated bool  `json:"estimated,omitempty"`
	AtLeast   bool  `json:"at_least,omitempty"`
}

// add adds an exact count.
func (c Count) add(n int64) Count {
	c.N += n
	return c
}

// PendingRef is a tool's pending record whose lease expired first.
type PendingRef struct {
	ID             int64     `json:"id"`
	LeasedAt       time.Time `json:"leased_at"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// Stuck: the lease expired more than the context's stuck_after ago.
	Stuck bool `json:"stuck"`
}

// ToolReview is one tool's retention: its policy and what it means for the
// records in the store now.
type ToolReview struct {
	Tool      string `json:"tool"`
	InCatalog bool   `json:"in_catalog"`
	InStore   bool   `json:"in_store"`
	// The policy in force: the recorded one, else the catalog's, with the
	// defaults filled in. InCatalog: one of the two gives it.
	Retention   time.Duration `json:"retention"`
	RetryWindow time.Duration `json:"retry_window"`
	AfterExpiry string        `json:"after_expiry"`
	// Completed records whose retention ends within 24 hours and within 7
	// days (the second includes the first).
	Expiring24h Count `json:"expiring_24h"`
	Expiring7d  Count `json:"expiring_7d"`
	// Expired counts completed records whose retention has ended; Purgeable
	// those of them a purge deletes now: not held, without unreviewed
	// conflicts. Held and Conflicted (exact: they are few) are the expired
	// records each keeps.
	Expired    Count `json:"expired"`
	Purgeable  Count `json:"purgeable"`
	Held       int64 `json:"held"`
	Conflicted int64 `json:"conflicted"`
	// OldestPending is the pending record whose lease expired first.
	OldestPending *PendingRef `json:"oldest_pending,omitempty"`
	// StuckPastRetention counts pending records whose lease expired longer
	// than the retention ago.
	StuckPastRetention Count `json:"stuck_past_retention"`
	// Warnings are what an operator must see before purging.
	Warnings []string `json:"warnings"`
}

// Review is the retention review: every tool of the store and of the
// catalog, by name.
type Review struct {
	DBTime time.Time    `json:"db_time"`
	Tools  []ToolReview `json:"tools"`
	// Scoped: the role sees some tenants only, and the figures are theirs.
	Scoped bool `json:"scoped"`
	// UnfinishedPurges are purge runs started and never finished, each a
	// warning. Only admins of every tenant see purge runs: for other
	// roles it is empty.
	UnfinishedPurges []UnfinishedPurge `json:"unfinished_purges"`
}

// Warnings counts the warnings of every tool and the unfinished purges.
func (r Review) Warnings() int {
	n := len(r.UnfinishedPurges)
	for _, t := range r.Tools {
		n += len(t.Warnings)
	}
	return n
}

// UnfinishedPurge is a purge run started and never finished: its start
// record is in the audit trail, its result record is not, and it may have
// purged records already. Its role finishes it by purging again with the
// same tool, which resumes it.
type UnfinishedPurge struct {
	Run int64 `json:"run"`
	// Role started the run (the authenticated role); DisplayName is the
	// name it claimed.
	Role        string    `json:"role"`
	DisplayName string    `json:"display_name,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	Reason      string    `json:"reason"`
	// Tool is the run's tool ("": every tool), Before its cut-off.
	Tool   string    `json:"tool,omitempty"`
	Before time.Time `json:"before"`
	// Purged counts the records it purged so far; MayPurge is the most it
	// may purge (its dry runs' promise; nil for a run started before
	// promises were recorded, which must be resumed before it purges more).
	Purged   int64  `json:"purged"`
	MayPurge *int64 `json:"may_purge,omitempty"`
	// LastBatchAt is when its last batch committed (nil: none recorded
	// since it started or was resumed): a recent one is a purge under way.
	LastBatchAt *time.Time `json:"last_batch_at,omitempty"`
	// StartSeq is its start record on the "" chain (nil: started before
	// start records, migration 00017, or not sealed yet).
	StartSeq *int64 `json:"start_seq,omitempty"`
}

// Warning says what the run is and how to finish it, in one line. Its
// role, name and reason are stored text: clean it before printing.
func (u UnfinishedPurge) Warning() string {
	who := u.Role
	if u.DisplayName != "" {
		who += " (" + u.DisplayName + ")"
	}
	what, flag := "every tool", ""
	if u.Tool != "" {
		what, flag = "tool "+u.Tool, " --tool "+u.Tool
	}
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
	text := fmt.Sprintf("purge run %d (%s) unfinished: started %s by %s, reason %q; %d purged so far",
		u.Run, what, stamp(u.StartedAt), who, u.Reason, u.Purged)
	if u.MayPurge != nil {
		text += fmt.Sprintf(" of at most %d", *u.MayPurge)
	}
	if u.LastBatchAt != nil {
		text += ", last batch " + stamp(*u.LastBatchAt)
	}
	if u.StartSeq != nil {
		text += fmt.Sprintf("; start record #%d, no result record yet", *u.StartSeq)
	} else {
		text += "; no start record (started before purges were audited up front)"
	}
	return text + fmt.Sprintf(". %s finishes it: opsdesk retention purge%s --yes", u.Role, flag)
}

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
func (s *Store) UnfinishedPurges(ctx context.Context) (runs []UnfinishedPurge, seen bool, err error) {
	return s.unfinishedPurges(ctx, s.pool)
}

func (s *Store) unfinishedPurges(ctx context.Context, q querier) ([]UnfinishedPurge, bool, error) {
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
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (UnfinishedPurge, error) {
		var u UnfinishedPurge
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
func (s *Store) Review(ctx context.Context, catalog map[string]ToolPolicy) (r Review, err error) {
	err = s.snapshot(ctx, func(q querier) error {
		r, err = s.reviewIn(ctx, q, catalog)
		return err
	})
	return r, err
}

func (s *Store) reviewIn(ctx context.Context, q querier, catalog map[string]ToolPolicy) (Review, error) {
	var r Review
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
	tools := make(map[string]*ToolReview, len(names))
	retention := make([]int64, len(names))
	r.Tools = make([]ToolReview, len(names))
	for i, name := range names {
		t := &r.Tools[i]
		p, known := catalog[name]
		*t = ToolReview{Tool: name, InCatalog: known, InStore: slices.Contains(inStore, name),
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
	rows, err := q.Query(ctx, reviewSQL, names, retention, CountCap+1, s.opts.StuckAfter.Microseconds(), tenants)
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
		t.Expiring24h, t.Expiring7d, t.Purgeable = Count{N: in24h}, Count{N: in7d}, Count{N: unheld}
		t.Held, t.Conflicted = held, conflicted
		t.StuckPastRetention = Count{N: stuckPast}
		if id != nil {
			t.OldestPending = &PendingRef{ID: *id, LeasedAt: *leasedAt, LeaseExpiresAt: *leaseExpiresAt, Stuck: *stuck}
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
		t.Expired = t.Purgeable.add(t.Held)
		t.Purgeable.N = max(0, t.Purgeable.N-t.Conflicted)
		t.Warnings = warnings(*t)
	}
	return r, nil
}

// estimateReview replaces the counts that reached the cap: with the
// planner's estimate of the tool's rows when the role sees every tenant,
// else with the lower bound counted.
func estimateReview(ctx context.Context, q querier, r *Review) error {
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
			n    *Count
			cond string
		}{
			{&t.Expiring24h, "expires_at > now() AND expires_at <= now() + interval '24 hours'"},
			{&t.Expiring7d, "expires_at > now() AND expires_at <= now() + interval '7 days'"},
			{&t.Purgeable, "expires_at <= now() AND NOT held"},
			{&t.StuckPastRetention, ""},
		} {
			if c.n.N <= CountCap {
				continue
			}
			if r.Scoped || c.cond == "" {
				*c.n = Count{N: CountCap, AtLeast: true} // it counted CountCap+1
				continue
			}
			queuePlanRows(batch, "SELECT FROM opsdesk.operations WHERE state = 'completed' AND tool = $1 AND "+c.cond,
				func(estimate float64) {
					// Never below what was counted: statistics may lag behind.
					*c.n = Count{N: max(int64(estimate), CountCap+1), Estimated: true}
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
func warnings(t ToolReview) []string {
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
func countText(c Count, one, many string) string {
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
