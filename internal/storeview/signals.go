package storeview

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Signals are the store's figures for alerting (opsdesk exporter): the
// overview's counts and the retention review's expired records, by tool
// (or by tenant and tool), with the console's definitions, caps and
// estimates.
type Signals struct {
	DBTime time.Time `json:"db_time"`
	// Scoped: the role sees some tenants only. Counts above the cap are
	// then lower bounds: the planner's statistics span every tenant, and
	// an estimate from them would tell of the others.
	Scoped bool          `json:"scoped"`
	Tools  []ToolSignals `json:"tools"`
	// Read says which parts were read. Signals reads them in order, and a
	// read cut short (its context done) leaves the later ones out: their
	// figures are zero and must not be shown.
	Read SignalParts `json:"read"`
}

// SignalParts are the parts of Signals, read in this order.
type SignalParts uint8

// The parts of Signals.
const (
	// SignalStuck is Stuck, Deferred, DeferredDue and OldestStuck: what
	// pages someone, read first.
	SignalStuck SignalParts = 1 << iota
	// SignalCounts is Pending, Rejected, Released, Conflicted and Expired.
	// Until SignalEstimates is read too, a count above the cap is a lower
	// bound (AtLeast).
	SignalCounts
	// SignalEstimates is Completed, and the estimates of the counts above
	// the cap for a role that sees every tenant.
	SignalEstimates
)

// SignalsOpts narrows Signals.
type SignalsOpts struct {
	// ByTenant splits each tool's figures by tenant.
	ByTenant bool
}

// ToolSignals are one tool's figures (one tenant's, with ByTenant). Each
// Count is exact up to CountCap; above it, an estimate (Estimated) or a
// lower bound (AtLeast), as in the overview and the review.
type ToolSignals struct {
	Tenant string `json:"tenant,omitempty"` // set with ByTenant
	Tool   string `json:"tool"`
	// Pending records with a live lease, and stuck ones: pending past the
	// stuck-after interval and not deferred. Deferred are stuck records a
	// person deferred (see DeferralUntilSQL) whose snooze time has not
	// come; DeferredDue are those whose snooze time has passed: they are
	// stuck again, and counted in Stuck too.
	Pending     Count `json:"pending"`
	Stuck       Count `json:"stuck"`
	Deferred    Count `json:"deferred"`
	DeferredDue Count `json:"deferred_due"`
	Completed   Count `json:"completed"` // succeeded
	Rejected    Count `json:"rejected"`
	Released    Count `json:"released"`
	// Conflicted counts the records with unreviewed conflicts (the
	// overview's conflicted tile).
	Conflicted Count `json:"conflicted"`
	// Expired counts completed records whose retention has ended, held or
	// not (the review's Expired).
	Expired Count `json:"expired"`
	// OldestStuck is the lease expiry of the stuck record, not deferred,
	// whose lease expired first (zero: none stuck); the overview reads it
	// as "oldest lease expired".
	OldestStuck time.Time `json:"oldest_stuck"`
}

// DeferralUntilSQL is the snooze time of the deferral standing on the
// operation o, NULL when none stands: the snooze time of the last
// decide:defer that took effect on the record at its current version. A
// deferral changes nothing in the record, so it stands until the record
// changes: a takeover or a decision ends it (both bump the version), and
// a record that is stuck again after a takeover is new trouble. It reads
// the record's decisions on audit_operation_idx, as the detail view does.
const DeferralUntilSQL = `(SELECT (a.details->>'snooze_until')::timestamptz FROM opsdesk.audit a
        WHERE a.tenant = o.tenant AND a.operation_id = o.id AND a.action = 'decide:defer'
            AND a.outcome = 'succeeded' AND a.version_after = o.version
        ORDER BY a.seq DESC LIMIT 1)`

// Signals reads every tool's figures that the role sees, in one snapshot.
// When ctx ends before the read does, it returns the parts read so far
// (Read) with the error.
func (s *Store) Signals(ctx context.Context, opts SignalsOpts) (Signals, error) {
	var sig Signals
	err := s.snapshot(ctx, func(q querier) error { return s.signalsIn(ctx, q, opts, &sig) })
	return sig, err
}

// signalsStuckSQL reads the stuck part, tool by tool: $1 the stuck-after
// interval in microseconds, $2 the tools, $3 how many of each tool's stuck
// records to read, the longest stuck first (a range of
// operations_pending_lease_idx), each checked for a deferral; %s groups
// them (by tenant, or not: ”). A group's oldest is exact unless its
// tool's records were cut short (sampled reached the limit).
const signalsStuckSQL = `
SELECT g.tool, s.tenant, s.stuck, s.deferred, s.due, s.oldest, s.sampled
FROM unnest($2::text[], $3::bigint[]) AS g (tool, lim)
CROSS JOIN LATERAL (
    SELECT %s AS tenant,
        count(*) FILTER (WHERE d.until IS NULL OR d.until <= now()) AS stuck,
        count(*) FILTER (WHERE d.until > now()) AS deferred,
        count(*) FILTER (WHERE d.until <= now()) AS due,
        min(o.lease_expires_at) FILTER (WHERE d.until IS NULL OR d.until <= now()) AS oldest,
        (sum(count(*)) OVER ())::bigint AS sampled
    FROM (SELECT o.tenant, o.id, o.version, o.lease_expires_at FROM opsdesk.operations o
          WHERE %s AND o.tool = g.tool ORDER BY o.lease_expires_at LIMIT g.lim) o,
        LATERAL (SELECT ` + DeferralUntilSQL + ` AS until) d
    GROUP BY 1) s`

// signalsOldestSQL reads the oldest stuck record, not deferred, of each
// group ($2, $3: tenants and tools in step; %[1]s the stuck condition
// over $1, %[2]s the group's) whose tool had more stuck records than
// signalsStuckSQL read.
const signalsOldestSQL = `
SELECT old.lease_expires_at
FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS g (tenant, tool, n)
LEFT JOIN LATERAL (SELECT o.lease_expires_at FROM opsdesk.operations o
    WHERE %[1]s AND %[2]s AND coalesce(` + DeferralUntilSQL + ` <= now(), true)
    ORDER BY o.lease_expires_at LIMIT 1) old ON true
ORDER BY g.n`

// groupWhere is the condition that keeps a group's records: alias is the
// operations' alias ("" for none), byTenant adds the tenant.
func groupWhere(alias string, byTenant bool) string {
	if alias != "" {
		alias += "."
	}
	if byTenant {
		return alias + "tenant = g.tenant AND " + alias + "tool = g.tool"
	}
	return alias + "tool = g.tool"
}

// signalsCountsSQL reads the counts part with the overview's capped
// counts, the review's expired count, and the same parameters as
// signalsStuckSQL; $5 holds the tenants the role sees.
func signalsCountsSQL(byTenant bool) string {
	group := groupWhere("", byTenant)
	tenants := "$5::text[]"
	if byTenant {
		tenants = "ARRAY[g.tenant]"
	}
	return "SELECT " +
		fmt.Sprintf(capped, fmt.Sprintf(pendingWhere, "$2")+" AND "+group) + ", " +
		fmt.Sprintf(capped, rejectedWhere+" AND "+group) + ", " +
		fmt.Sprintf(capped, releasedWhere+" AND "+group) + ", " +
		"(SELECT count(*) FROM " + conflictedFrom + " AND " + group + " LIMIT $1) s), " +
		completedCount(tenants, "g.tool", "$1", "o."+expiredWhere) + `
FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS g (tenant, tool, n)
ORDER BY g.n`
}

// expiredWhere is the review's expired condition on a completed record:
// its retention has ended.
const expiredWhere = "expires_at <= now()"

// succeededWhere is the overview's completed count's condition.
const succeededWhere = "state = 'completed' AND outcome = 'succeeded'"

func (s *Store) signalsIn(ctx context.Context, q querier, opts SignalsOpts, sig *Signals) error {
	var every bool
	var visible, tenants, tools []string
	if err := q.QueryRow(ctx, storePairsSQL).Scan(&sig.DBTime, &every, &visible, &tenants, &tools); err != nil {
		return fmt.Errorf("list the store's tools: %w", err)
	}
	sig.Scoped = !every
	if !opts.ByTenant {
		slices.Sort(tools)
		tools = slices.Compact(tools)
		tenants = make([]string, len(tools))
	}
	sig.Tools = make([]ToolSignals, len(tools))
	for i := range tools {
		sig.Tools[i] = ToolSignals{Tool: tools[i]}
		if opts.ByTenant {
			sig.Tools[i].Tenant = tenants[i]
		}
	}
	if len(tools) == 0 {
		sig.Read = SignalStuck | SignalCounts | SignalEstimates
		return nil
	}
	est := &estimates{scoped: sig.Scoped, byTenant: opts.ByTenant, batch: &pgx.Batch{}}

	if err := s.signalsStuck(ctx, q, sig, est, tenants, tools); err != nil {
		return err
	}
	sig.Read |= SignalStuck

	stuckAfter := s.opts.StuckAfter.Microseconds()
	args := []any{CountCap + 1, stuckAfter, tenants, tools}
	if !opts.ByTenant {
		args = append(args, visible)
	}
	rows, err := q.Query(ctx, signalsCountsSQL(opts.ByTenant), args...)
	if err != nil {
		return fmt.Errorf("count records: %w", err)
	}
	i := 0
	var pending, rejected, released, conflicted, expired int64
	_, err = pgx.ForEachRow(rows, []any{&pending, &rejected, &released, &conflicted, &expired}, func() error {
		t := &sig.Tools[i]
		i++
		for _, c := range []struct {
			count *Count
			n     int64
			where string
		}{
			{&t.Pending, pending, leaseEstimateWhere(false, stuckAfter)},
			{&t.Rejected, rejected, rejectedWhere},
			{&t.Released, released, releasedWhere},
			{&t.Conflicted, conflicted, ""},
			{&t.Expired, expired, "state = 'completed' AND " + expiredWhere},
		} {
			*c.count = Count{N: c.n}
			if c.n > CountCap {
				*c.count = Count{N: CountCap, AtLeast: true} // it counted CountCap+1
				est.add(t, c.count, c.where, 0, CountCap+1)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count records: %w", err)
	}
	sig.Read |= SignalCounts

	if err := s.countSucceeded(ctx, q, sig, est, visible, tenants, tools); err != nil {
		return err
	}
	if err := est.run(ctx, q); err != nil {
		return err
	}
	sig.Read |= SignalEstimates
	return nil
}

// signalsStuck reads the stuck part. It reads each tool's stuck records
// once, the longest stuck first, up to CountCap+1 a group; a tool that
// has more makes its groups' figures lower bounds, and its groups' oldest
// records are then looked up one by one.
func (s *Store) signalsStuck(ctx context.Context, q querier, sig *Signals, est *estimates, tenants, tools []string) error {
	stuckAfter := s.opts.StuckAfter.Microseconds()
	byTool := map[string][]int{} // a tool's groups
	var names []string
	for i, t := range sig.Tools {
		if len(byTool[t.Tool]) == 0 {
			names = append(names, t.Tool)
		}
		byTool[t.Tool] = append(byTool[t.Tool], i)
	}
	limits := make([]int64, len(names))
	for i, name := range names {
		limits[i] = int64(CountCap+1) * int64(len(byTool[name]))
	}
	tenant := "''"
	if est.byTenant {
		tenant = "o.tenant"
	}
	stuck := fmt.Sprintf(stuckWhere, "$1")
	rows, err := q.Query(ctx, fmt.Sprintf(signalsStuckSQL, tenant, stuck), stuckAfter, names, limits)
	if err != nil {
		return fmt.Errorf("count stuck records: %w", err)
	}
	group := make(map[[2]string]int, len(sig.Tools))
	for i, t := range sig.Tools {
		group[[2]string{t.Tenant, t.Tool}] = i
	}
	cut := map[string]bool{} // the tools read in part
	var tool, tenantName string
	var stuckN, deferred, due, sampled int64
	var oldest *time.Time
	_, err = pgx.ForEachRow(rows, []any{&tool, &tenantName, &stuckN, &deferred, &due, &oldest, &sampled}, func() error {
		if sampled >= limits[slices.Index(names, tool)] {
			cut[tool] = true
		}
		i, ok := group[[2]string{tenantName, tool}]
		if !ok {
			return nil // a tenant's first records, after the list of groups was read
		}
		t := &sig.Tools[i]
		t.Stuck, t.Deferred, t.DeferredDue = Count{N: stuckN}, Count{N: deferred}, Count{N: due}
		if oldest != nil {
			t.OldestStuck = *oldest
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count stuck records: %w", err)
	}
	var lookup []int // groups whose oldest the cut read may have missed
	for i := range sig.Tools {
		t := &sig.Tools[i]
		if !cut[t.Tool] {
			continue
		}
		t.Stuck.AtLeast, t.Deferred.AtLeast, t.DeferredDue.AtLeast = true, true, true
		est.add(t, &t.Stuck, leaseEstimateWhere(true, stuckAfter), -t.Deferred.N, t.Stuck.N)
		if t.OldestStuck.IsZero() {
			lookup = append(lookup, i)
		}
	}
	if len(lookup) == 0 {
		return nil
	}
	gTenants, gTools := make([]string, len(lookup)), make([]string, len(lookup))
	for j, i := range lookup {
		gTenants[j], gTools[j] = tenants[i], tools[i]
	}
	rows, err = q.Query(ctx, fmt.Sprintf(signalsOldestSQL, stuck, groupWhere("o", est.byTenant)), stuckAfter, gTenants, gTools)
	if err != nil {
		return fmt.Errorf("find the oldest stuck records: %w", err)
	}
	j := 0
	_, err = pgx.ForEachRow(rows, []any{&oldest}, func() error {
		if oldest != nil {
			sig.Tools[lookup[j]].OldestStuck = *oldest
		}
		j++
		return nil
	})
	if err != nil {
		return fmt.Errorf("find the oldest stuck records: %w", err)
	}
	return nil
}

// countSucceeded counts each group's succeeded records as the overview
// counts them: exactly on a small table; on a large one the planner's
// estimate for a role that sees every tenant, else exactly up to the cap.
func (s *Store) countSucceeded(ctx context.Context, q querier, sig *Signals, est *estimates, visible, tenants, tools []string) error {
	size, err := tableSize(ctx, q)
	if err != nil {
		return err
	}
	switch {
	case size < exactCountLimit:
		group := "tool"
		if est.byTenant {
			group = "tenant, tool"
		}
		rows, err := q.Query(ctx, "SELECT "+group+", count(*) FROM opsdesk.operations WHERE "+succeededWhere+" GROUP BY "+group)
		if err != nil {
			return fmt.Errorf("count completed: %w", err)
		}
		counts := map[[2]string]int64{}
		var tenant, tool string
		var n int64
		scan := []any{&tool, &n}
		if est.byTenant {
			scan = []any{&tenant, &tool, &n}
		}
		if _, err := pgx.ForEachRow(rows, scan, func() error { counts[[2]string{tenant, tool}] = n; return nil }); err != nil {
			return fmt.Errorf("count completed: %w", err)
		}
		for i := range sig.Tools {
			t := &sig.Tools[i]
			t.Completed = Count{N: counts[[2]string{t.Tenant, t.Tool}]}
		}
	case sig.Scoped:
		// Statistics span every tenant: count up to the cap instead, each
		// tenant's completed records a range of operations_tool_expiry_idx.
		tenantsOf, args := "$4::text[]", []any{CountCap + 1, tenants, tools, visible}
		if est.byTenant {
			tenantsOf, args = "ARRAY[g.tenant]", args[:3]
		}
		rows, err := q.Query(ctx, "SELECT "+completedCount(tenantsOf, "g.tool", "$1", "o.outcome = 'succeeded'")+`
FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS g (tenant, tool, n) ORDER BY g.n`, args...)
		if err != nil {
			return fmt.Errorf("count completed: %w", err)
		}
		i := 0
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&n}, func() error {
			t := &sig.Tools[i]
			i++
			t.Completed = Count{N: n}
			if n > CountCap {
				t.Completed = Count{N: CountCap, AtLeast: true}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("count completed: %w", err)
		}
	default:
		for i := range sig.Tools {
			t := &sig.Tools[i]
			t.Completed = Count{N: 0, Estimated: true}
			est.add(t, &t.Completed, succeededWhere, 0, 0)
		}
	}
	return nil
}

// tableSize is the planner's estimate of the operations' rows.
func tableSize(ctx context.Context, q querier) (float64, error) {
	var size float64
	err := q.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'opsdesk.operations'::regclass`).Scan(&size)
	if err != nil {
		return 0, fmt.Errorf("estimate records: %w", err)
	}
	return size, nil
}

// estimates collects the counts of Signals to estimate with the
// planner, in one round trip.
type estimates struct {
	scoped, byTenant bool
	batch            *pgx.Batch
}

// add queues the estimate of a group's count of the records that meet
// where ("": the records with unreviewed conflicts), plus less (a
// correction, ≤ 0), and never below floor (what was counted: statistics
// may lag behind). A role that sees some tenants keeps the lower bound.
func (e *estimates) add(t *ToolSignals, c *Count, where string, less, floor int64) {
	if e.scoped {
		return
	}
	sql := "SELECT FROM opsdesk.operations WHERE " + where + " AND tool = $1"
	if where == "" {
		sql = "SELECT FROM " + conflictedFrom + " AND tool = $1"
	}
	args := []any{t.Tool}
	if e.byTenant {
		sql += " AND tenant = $2"
		args = append(args, t.Tenant)
	}
	if where == "" {
		sql += ") s"
	}
	queuePlanRows(e.batch, sql, func(estimate float64) {
		*c = Count{N: max(int64(estimate)+less, floor), Estimated: true}
	}, args...)
}

// run reads the queued estimates.
func (e *estimates) run(ctx context.Context, q querier) error {
	if e.batch.Len() == 0 {
		return nil
	}
	if err := q.SendBatch(ctx, e.batch).Close(); err != nil {
		return fmt.Errorf("estimate records: %w", err)
	}
	return nil
}

// ChainHead is an audit chain's head: the seq of its last record, as
// audit_heads holds it.
type ChainHead struct {
	// Tenant is the chain's tenant; "" is the chain of events outside any
	// tenant.
	Tenant string `json:"tenant"`
	Seq    int64  `json:"seq"`
}

// AuditHeads reads the head of every audit chain the role may see.
func (s *Store) AuditHeads(ctx context.Context) ([]ChainHead, error) {
	rows, err := s.pool.Query(ctx, `SELECT tenant, seq FROM opsdesk.audit_heads ORDER BY tenant`)
	if err != nil {
		return nil, fmt.Errorf("read the audit chains' heads: %w", err)
	}
	heads, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ChainHead])
	if err != nil {
		return nil, fmt.Errorf("read the audit chains' heads: %w", err)
	}
	return heads, nil
}

// UnfinishedPurgeCount counts the purge runs UnfinishedPurges lists, for
// any role that sees every tenant, a viewer too (migration 00018); seen is
// false for a role that sees some tenants only.
func (s *Store) UnfinishedPurgeCount(ctx context.Context) (n int64, seen bool, err error) {
	var count *int64
	if err := s.pool.QueryRow(ctx, `SELECT opsdesk.unfinished_purge_runs()`).Scan(&count); err != nil {
		return 0, false, fmt.Errorf("count the unfinished purges: %w", err)
	}
	if count == nil {
		return 0, false, nil
	}
	return *count, true, nil
}

// Ping checks that the store answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("reach the store: %w", err)
	}
	return nil
}
