package storeview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/readmodel"
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
	// SignalCounts is every figure but Completed, read in one statement.
	// Until SignalEstimates is read too, a count above the cap is a lower
	// bound (AtLeast).
	SignalCounts SignalParts = 1 << iota
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
	Pending     readmodel.Count `json:"pending"`
	Stuck       readmodel.Count `json:"stuck"`
	Deferred    readmodel.Count `json:"deferred"`
	DeferredDue readmodel.Count `json:"deferred_due"`
	Completed   readmodel.Count `json:"completed"` // succeeded
	Rejected    readmodel.Count `json:"rejected"`
	Released    readmodel.Count `json:"released"`
	// Conflicted counts the records with unreviewed conflicts (the
	// overview's conflicted tile).
	Conflicted readmodel.Count `json:"conflicted"`
	// Expired counts completed records whose retention has ended, held or
	// not (the review's Expired).
	Expired readmodel.Count `json:"expired"`
	// OldestStuck is the lease expiry of the stuck record, not deferred,
	// whose lease expired first (zero: none stuck); the overview reads it
	// as "oldest lease expired".
	OldestStuck time.Time `json:"oldest_stuck"`
}

// Signals reads every tool's figures that the role sees, in three round
// trips: the store's tools, the counts (two statements in one pipeline),
// and the planner's estimates of those above the cap. When ctx ends before
// the read does, it returns the parts read so far (Read) with the error.
//
// The reads are statements of their own, not a snapshot: a transaction
// would cost two more round trips, which a loaded server makes the larger
// part of a scrape, and a record that changes state between two
// statements a few milliseconds apart moves a count by one for one scrape.
func (s *Store) Signals(ctx context.Context, opts SignalsOpts) (Signals, error) {
	var sig Signals
	err := s.signals(ctx, opts, &sig)
	return sig, err
}

// signalsStuckSQL reads the stuck records, tool by tool: $1 the
// stuck-after interval in microseconds, $2 the tools, $3 how many of each
// tool's stuck records to read, the longest stuck first (a range of
// operations_pending_lease_idx), each checked for a deferral; %[1]s
// groups them (o.tenant, or an empty string), %[2]s is the stuck
// condition. A group's oldest is exact unless its walk was cut short
// (cut).
const signalsStuckSQL = `
SELECT g.tool, s.tenant, s.stuck, s.deferred, s.due, s.oldest, s.sampled >= g.lim AS cut
FROM unnest($2::text[], $3::bigint[]) AS g (tool, lim)
CROSS JOIN LATERAL (
    SELECT %[1]s AS tenant,` + stuckCounts + `
    FROM (SELECT o.tenant, o.id, o.version, o.lease_expires_at FROM opsdesk.operations o
          WHERE %[2]s AND o.tool = g.tool ORDER BY o.lease_expires_at LIMIT g.lim) o,
        LATERAL (SELECT ` + DeferralUntilSQL + ` AS until) d
    GROUP BY 1) s`

// signalsStuckByGroupSQL is signalsStuckSQL a group at a time ($2 the
// groups' tools, $4 their tenants), a range of
// operations_pending_tenant_idx each; %[2]s is the stuck condition.
const signalsStuckByGroupSQL = `
SELECT g.tool, g.tenant, s.stuck, s.deferred, s.due, s.oldest, s.sampled >= g.lim AS cut
FROM unnest($2::text[], $3::bigint[], $4::text[]) AS g (tool, lim, tenant)
CROSS JOIN LATERAL (
    SELECT` + stuckCounts + `
    FROM (SELECT o.tenant, o.id, o.version, o.lease_expires_at FROM opsdesk.operations o
          WHERE %[2]s AND o.tenant = g.tenant AND o.tool = g.tool ORDER BY o.lease_expires_at LIMIT g.lim) o,
        LATERAL (SELECT ` + DeferralUntilSQL + ` AS until) d) s`

// stuckCounts are a walk's figures of its stuck records o, each with its
// deferral d.
const stuckCounts = `
        count(*) FILTER (WHERE d.until IS NULL OR d.until <= now()) AS stuck,
        count(*) FILTER (WHERE d.until > now()) AS deferred,
        count(*) FILTER (WHERE d.until <= now()) AS due,
        min(o.lease_expires_at) FILTER (WHERE d.until IS NULL OR d.until <= now()) AS oldest,
        sum(count(*)) OVER () AS sampled`

// walkedBy is how Signals walks the pending records: for a role that
// sees every tenant, a tool at a time in operations_pending_lease_idx's
// lease order; for a role that sees some tenants, a group (tenant and
// tool) at a time, a range of operations_pending_tenant_idx each. A
// one-tenant viewer's walk of a tool read every tenant's records of it
// and kept its own (at 10M records 8,889 of 8,979 live ones read for
// nothing, once a tool: its scrape grew 2.5x from 1M, issue 20 §3).
type walkedBy bool

const (
	walkByTool  walkedBy = false
	walkByGroup walkedBy = true
)

// of is the walk that reads the group of tenant and tool.
func (w walkedBy) of(tenant, tool string) [2]string {
	if w == walkByGroup {
		return [2]string{tenant, tool}
	}
	return [2]string{"", tool}
}

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

// rejectedFar is how far a role that sees some tenants counts a group's
// rejected records, to count its succeeded ones from the indexes alone
// (completedCapped): ten times the cap.
const rejectedFar = "10 * $1"

// completedHow is how signalsCountsSQL counts succeeded records.
type completedHow int

const (
	completedExact     completedHow = iota // a small table: every completed record less the rejected ones
	completedCapped                        // a role that sees some tenants: up to the cap
	completedEstimated                     // the planner's, later: NULL
)

// signalsCountsSQL reads the other counts, a group at a time: the
// overview's capped counts, the review's expired count and the succeeded
// count as how says. $1 is the row count each stops at, $2 the stuck-after
// interval in microseconds, $3 and $4 the groups' tenants and tools in
// step, and walking by tool $5 and $6 the tools and how many live records
// of each to read (as signalsStuckSQL's); by tool, $7 holds the tenants
// the role sees.
//
// Walking by tool, the live records are read as the stuck ones are, one
// walk a tool over the live end of operations_pending_lease_idx, counted
// by tenant: a count a group walked that range once for each group,
// every live record of every tool each time, a hundred walks at 20
// tenants and 5 tools and each as long as the live records are many. A
// group whose tool's walk stopped short (it read the limit) and that it
// saw fewer than the cap of is counted alone, as before.
func signalsCountsSQL(byTenant bool, walk walkedBy, how completedHow) string {
	group := groupWhere("", byTenant)
	tenants := "$7::text[]"
	walked := "(SELECT sum(l.n) FROM live l WHERE l.tool = g.tool)"
	if byTenant {
		tenants = "ARRAY[g.tenant]"
		walked = "(SELECT sum(l.n) FROM live l WHERE l.tool = g.tool AND l.tenant = g.tenant)"
	}
	liveWhere := LiveSQL("", "$2 * interval '1 microsecond'")
	// A tool's unreviewed conflicts: a range of conflicts_unreviewed_idx
	// (tenant, tool, key) for each tenant, where the tool alone was a scan
	// of the table for each tool (2.0 against 0.7 ms a tool at 10M
	// records and 4,891 conflicts).
	conflictsOf := group
	if !byTenant {
		conflictsOf += " AND tenant = ANY(" + tenants + ")"
	}
	// By group, a group's live records are a range of
	// operations_pending_tenant_idx: counted alone, up to the cap.
	live := fmt.Sprintf(capped, liveWhere+" AND "+group)
	with := ""
	if walk == walkByTool {
		live = "CASE WHEN NOT EXISTS (SELECT FROM live l WHERE l.tool = g.tool AND l.cut) OR coalesce(" + walked + ", 0) > $1 - 1\n" +
			"        THEN coalesce(" + walked + ", 0)::bigint\n" +
			"        ELSE " + live + " END"
		with = `WITH live AS (
    SELECT w.tool, s.tenant, s.n, s.sampled >= w.lim AS cut
    FROM unnest($5::text[], $6::bigint[]) AS w (tool, lim)
    CROSS JOIN LATERAL (
        SELECT o.tenant, count(*) AS n, sum(count(*)) OVER () AS sampled
        FROM (SELECT o.tenant FROM opsdesk.operations o
              WHERE ` + LiveSQL("o.", "$2 * interval '1 microsecond'") + ` AND o.tool = w.tool LIMIT w.lim) o
        GROUP BY 1) s)
`
	}
	completed := "NULL::bigint"
	switch how {
	case completedExact:
		// Both index-only (operations_tool_expiry_idx, and
		// operations_rejected_tool_idx), and both small: the table is.
		completed = completedCount(tenants, "g.tool", "NULL", "true") +
			" - (SELECT count(*) FROM opsdesk.operations WHERE " + rejectedWhere + " AND " + group + ")"
	case completedCapped:
		// Up to the cap: the completed records less the rejected ones,
		// both index-only, when the rejected ones were counted exactly
		// (the completed ones counted up to the cap plus them); else the
		// succeeded ones themselves, whose outcome only the heap holds
		// (a bitmap of every completed record of the tool, then a heap
		// page for each, per group: most of a one-tenant viewer's scrape).
		// The rejected ones are counted further for it (rejectedFar):
		// index-only, they are cheap, and a group whose rejected records
		// passed the cap (a tenant's tool at 10M records has about 1,000)
		// would otherwise take the heap path (4.9 ms of a one-tenant
		// viewer's 18.5 at 10M, issue 20 §3).
		completed = "CASE WHEN rejf.n < " + rejectedFar + " THEN " + completedCount(tenants, "g.tool", "$1 + rejf.n", "true") + " - rejf.n\n" +
			"        ELSE " + completedCount(tenants, "g.tool", "$1", "o.outcome = 'succeeded'") + " END"
	}
	rejected := "CROSS JOIN LATERAL (SELECT " + fmt.Sprintf(capped, rejectedWhere+" AND "+group) + " AS n) rej"
	if how == completedCapped {
		// One count serves both: the rejected figure is capped in Go.
		rejected = "CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT FROM opsdesk.operations WHERE " + rejectedWhere +
			" AND " + group + " LIMIT " + rejectedFar + ") s) rejf\nCROSS JOIN LATERAL (SELECT least(rejf.n, $1) AS n) rej"
	}
	return with + `SELECT ` + strings.Join([]string{
		live,
		"rej.n",
		fmt.Sprintf(capped, releasedWhere+" AND "+group),
		"(SELECT count(*) FROM " + conflictedFrom + " AND " + conflictsOf + " LIMIT $1) s)",
		completedCount(tenants, "g.tool", "$1", "o."+expiredWhere),
		completed,
	}, ",\n    ") + `
FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS g (tenant, tool, n)
` + rejected + `
ORDER BY g.n`
}

// expiredWhere is the review's expired condition on a completed record:
// its retention has ended.
const expiredWhere = "expires_at <= now()"

// succeededWhere is the overview's completed count's condition.
const succeededWhere = "state = 'completed' AND outcome = 'succeeded'"

func (s *Store) signals(ctx context.Context, opts SignalsOpts, sig *Signals) error {
	var every bool
	var size float64
	var visible, tenants, tools []string
	if err := s.pool.QueryRow(ctx, storePairsSQL).Scan(&sig.DBTime, &every, &visible, &tenants, &tools, &size); err != nil {
		return fmt.Errorf("list the store's tools: %w", err)
	}
	sig.Scoped = !every
	// A role that sees some tenants counts tenant by tenant, each group a
	// range of a (tool, tenant) index, and adds the groups up by tool
	// (foldTenants): a tool's records over its visible tenants were a walk
	// of every tenant's entries that skipped the others', so a one-tenant
	// viewer's read grew with the whole store (53 ms at 10M records
	// against 16 by tenant, issue 20 §3).
	byTenant := opts.ByTenant || sig.Scoped
	if !byTenant {
		slices.Sort(tools)
		tools = slices.Compact(tools)
		tenants = make([]string, len(tools))
	}
	sig.Tools = make([]ToolSignals, len(tools))
	for i := range tools {
		sig.Tools[i] = ToolSignals{Tenant: tenants[i], Tool: tools[i]}
	}
	if len(tools) == 0 {
		sig.Read = SignalCounts | SignalEstimates
		return nil
	}
	stuckAfter := s.opts.StuckAfter.Microseconds()
	how := completedEstimated
	switch {
	case size < exactCountLimit:
		how = completedExact
	case sig.Scoped:
		how = completedCapped
	}

	// The walks, and how many pending records each reads: CountCap+1 a
	// group. walkTenants are the walks' tenants, by group.
	walk := walkedBy(sig.Scoped)
	var names, walkTenants []string
	var lims []int64
	at := map[[2]string]int{}
	for _, t := range sig.Tools {
		w := walk.of(t.Tenant, t.Tool)
		i, ok := at[w]
		if !ok {
			i = len(names)
			at[w] = i
			names, walkTenants, lims = append(names, t.Tool), append(walkTenants, t.Tenant), append(lims, 0)
		}
		lims[i] += readmodel.CountCap + 1
	}
	tenantOf := "''::text"
	if byTenant {
		tenantOf = "o.tenant"
	}
	group := make(map[[2]string]int, len(sig.Tools))
	for i, t := range sig.Tools {
		group[[2]string{t.Tenant, t.Tool}] = i
	}
	cut := map[[2]string]bool{} // the walks read in part
	stuckSQL, stuckArgs := signalsStuckSQL, []any{stuckAfter, names, lims}
	if walk == walkByGroup {
		stuckSQL, stuckArgs = signalsStuckByGroupSQL, append(stuckArgs, walkTenants)
	}
	batch := &pgx.Batch{}
	batch.Queue(fmt.Sprintf(stuckSQL, tenantOf, StuckSQL("", "$1 * interval '1 microsecond'")), stuckArgs...).
		Query(func(rows pgx.Rows) error {
			var tool, tenant string
			var stuck, deferred, due int64
			var oldest *time.Time
			var cutShort bool
			_, err := pgx.ForEachRow(rows, []any{&tool, &tenant, &stuck, &deferred, &due, &oldest, &cutShort}, func() error {
				cut[walk.of(tenant, tool)] = cut[walk.of(tenant, tool)] || cutShort
				i, ok := group[[2]string{tenant, tool}]
				if !ok {
					return nil // a tenant's first records, after the walk
				}
				t := &sig.Tools[i]
				t.Stuck, t.Deferred, t.DeferredDue = readmodel.Count{N: stuck}, readmodel.Count{N: deferred}, readmodel.Count{N: due}
				if oldest != nil {
					t.OldestStuck = *oldest
				}
				return nil
			})
			return err
		})
	args := []any{readmodel.CountCap + 1, stuckAfter, tenants, tools}
	if walk == walkByTool {
		args = append(args, names, lims)
	}
	if !byTenant {
		args = append(args, visible)
	}
	batch.Queue(signalsCountsSQL(byTenant, walk, how), args...).Query(func(rows pgx.Rows) error {
		i := 0
		var pending, rejected, released, conflicted, expired int64
		var completed *int64
		_, err := pgx.ForEachRow(rows, []any{&pending, &rejected, &released, &conflicted, &expired, &completed}, func() error {
			t := &sig.Tools[i]
			i++
			for _, c := range []struct {
				count *readmodel.Count
				n     int64
			}{{&t.Pending, pending}, {&t.Rejected, rejected}, {&t.Released, released}, {&t.Conflicted, conflicted}, {&t.Expired, expired}} {
				*c.count = readmodel.Count{N: c.n}
				if c.n > readmodel.CountCap {
					*c.count = readmodel.Count{N: readmodel.CountCap, AtLeast: true} // it counted CountCap+1
				}
			}
			switch {
			case completed == nil:
				t.Completed = readmodel.Count{Estimated: true} // the planner's, below
			case how == completedCapped && *completed > readmodel.CountCap:
				t.Completed = readmodel.Count{N: readmodel.CountCap, AtLeast: true}
			default:
				t.Completed = readmodel.Count{N: *completed}
			}
			return nil
		})
		return err
	})
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("count records: %w", err)
	}
	var cutGroups []int
	for i := range sig.Tools {
		if t := &sig.Tools[i]; cut[walk.of(t.Tenant, t.Tool)] {
			t.Stuck.AtLeast, t.Deferred.AtLeast, t.DeferredDue.AtLeast = true, true, true
			cutGroups = append(cutGroups, i)
		}
	}
	if err := s.oldestOfCut(ctx, sig, cutGroups, byTenant); err != nil {
		return err
	}
	if byTenant && !opts.ByTenant {
		sig.Tools = foldTenants(sig.Tools) // nothing is estimated for a scoped role
	}
	sig.Read |= SignalCounts

	est := &estimates{scoped: sig.Scoped, byTenant: byTenant, batch: &pgx.Batch{}}
	for i := range sig.Tools {
		t := &sig.Tools[i]
		for _, c := range []struct {
			count       *readmodel.Count
			where       string
			less, floor int64
		}{
			{&t.Stuck, leaseEstimateWhere(true, stuckAfter), -t.Deferred.N, t.Stuck.N},
			{&t.Pending, leaseEstimateWhere(false, stuckAfter), 0, readmodel.CountCap + 1},
			{&t.Rejected, rejectedWhere, 0, readmodel.CountCap + 1},
			{&t.Released, releasedWhere, 0, readmodel.CountCap + 1},
			{&t.Conflicted, "", 0, readmodel.CountCap + 1},
			{&t.Expired, "state = 'completed' AND " + expiredWhere, 0, readmodel.CountCap + 1},
			{&t.Completed, succeededWhere, 0, 0},
		} {
			if c.count.AtLeast || c.count.Estimated {
				est.add(t, c.count, c.where, c.less, c.floor)
			}
		}
	}
	if err := est.run(ctx, s.pool); err != nil {
		return err
	}
	sig.Read |= SignalEstimates
	return nil
}

// foldTenants adds a role's groups up by tool: a tool's count is the sum
// of its tenants', exact when each of theirs was (each is exact up to
// CountCap) and a lower bound (AtLeast) when one of them was; its oldest
// stuck record is the oldest of theirs. The tools come out in name order, as Signals gives them.
func foldTenants(groups []ToolSignals) []ToolSignals {
	var tools []ToolSignals
	at := map[string]int{}
	for _, g := range groups {
		i, ok := at[g.Tool]
		if !ok {
			i = len(tools)
			at[g.Tool] = i
			tools = append(tools, ToolSignals{Tool: g.Tool})
		}
		t := &tools[i]
		for _, c := range []struct{ sum, add *readmodel.Count }{
			{&t.Pending, &g.Pending}, {&t.Stuck, &g.Stuck}, {&t.Deferred, &g.Deferred}, {&t.DeferredDue, &g.DeferredDue},
			{&t.Completed, &g.Completed}, {&t.Rejected, &g.Rejected}, {&t.Released, &g.Released},
			{&t.Conflicted, &g.Conflicted}, {&t.Expired, &g.Expired},
		} {
			*c.sum = readmodel.Count{N: c.sum.N + c.add.N, AtLeast: c.sum.AtLeast || c.add.AtLeast, Estimated: c.sum.Estimated || c.add.Estimated}
		}
		if !g.OldestStuck.IsZero() && (t.OldestStuck.IsZero() || g.OldestStuck.Before(t.OldestStuck)) {
			t.OldestStuck = g.OldestStuck
		}
	}
	slices.SortFunc(tools, func(a, b ToolSignals) int { return strings.Compare(a.Tool, b.Tool) })
	return tools
}

// oldestOfCut finds the oldest stuck record of the groups whose tool had
// more stuck records than signalsSQL read, when that read did not reach
// it.
func (s *Store) oldestOfCut(ctx context.Context, sig *Signals, groups []int, byTenant bool) error {
	var tenants, tools []string
	var lookup []int
	for _, i := range groups {
		if t := sig.Tools[i]; t.OldestStuck.IsZero() {
			tenants, tools, lookup = append(tenants, t.Tenant), append(tools, t.Tool), append(lookup, i)
		}
	}
	if len(lookup) == 0 {
		return nil
	}
	sql := fmt.Sprintf(signalsOldestSQL, StuckSQL("", "$1 * interval '1 microsecond'"), groupWhere("o", byTenant))
	rows, err := s.pool.Query(ctx, sql, s.opts.StuckAfter.Microseconds(), tenants, tools)
	if err != nil {
		return fmt.Errorf("find the oldest stuck records: %w", err)
	}
	j := 0
	var oldest *time.Time
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

// estimates collects the counts of Signals to estimate with the
// planner, in one round trip. By tenant, a group's estimate is its tool's
// estimate times the tenant's share of the table, each the planner's:
// what the planner computes itself for tenant = x AND tool = y AND the
// condition, as it takes the columns to be independent (no extended
// statistics join tenant and tool). That is one EXPLAIN per tool and
// condition and one per tenant, where one per group made the estimates
// of a scrape with tenant labels two hundred statements (20 tenants, 5
// tools) and half of its time.
type estimates struct {
	scoped, byTenant bool
	batch            *pgx.Batch
	// shared are the groups' counts that wait, by tenant, for their
	// tool's estimate and their tenant's share.
	shared []sharedEstimate
}

// sharedEstimate is a group's count of the records that meet where,
// estimated from its tool's and its tenant's estimates.
type sharedEstimate struct {
	tenant, tool, where string
	count               *readmodel.Count
	less, floor         int64
}

// add queues the estimate of a group's count of the records that meet
// where ("": the records with unreviewed conflicts), plus less (a
// correction, ≤ 0), and never below floor (what was counted: statistics
// may lag behind). A role that sees some tenants keeps the lower bound.
func (e *estimates) add(t *ToolSignals, c *readmodel.Count, where string, less, floor int64) {
	if e.scoped {
		return
	}
	if e.byTenant && where != "" {
		e.shared = append(e.shared, sharedEstimate{tenant: t.Tenant, tool: t.Tool, where: where, count: c, less: less, floor: floor})
		return
	}
	sql := "SELECT FROM opsdesk.operations WHERE " + where + " AND tool = $1"
	if where == "" {
		// Conflicts are another table's rows: the tenant's share of the
		// operations says nothing of them.
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
		*c = estimated(estimate, less, floor)
	}, args...)
}

// estimated is an estimate plus less, never below floor.
func estimated(estimate float64, less, floor int64) readmodel.Count {
	return readmodel.Count{N: max(int64(estimate)+less, floor), Estimated: true}
}

// run reads the queued estimates.
func (e *estimates) run(ctx context.Context, q querier) error {
	var all float64
	tools := map[[2]string]*float64{} // by condition and tool
	tenants := map[string]*float64{}
	if len(e.shared) > 0 {
		queuePlanRows(e.batch, "SELECT FROM opsdesk.operations", func(v float64) { all = v })
	}
	for _, g := range e.shared {
		if k := [2]string{g.where, g.tool}; tools[k] == nil {
			tools[k] = e.queue("SELECT FROM opsdesk.operations WHERE "+g.where+" AND tool = $1", g.tool)
		}
		if tenants[g.tenant] == nil {
			tenants[g.tenant] = e.queue("SELECT FROM opsdesk.operations WHERE tenant = $1", g.tenant)
		}
	}
	if e.batch.Len() == 0 {
		return nil
	}
	if err := q.SendBatch(ctx, e.batch).Close(); err != nil {
		return fmt.Errorf("estimate records: %w", err)
	}
	for _, g := range e.shared {
		share := 0.0
		if all > 0 {
			share = min(1, *tenants[g.tenant]/all)
		}
		*g.count = estimated(*tools[[2]string{g.where, g.tool}]*share, g.less, g.floor)
	}
	return nil
}

// queue queues the planner's estimate of the rows sql returns, and says
// where it will be once the batch ran.
func (e *estimates) queue(sql string, arg string) *float64 {
	v := new(float64)
	queuePlanRows(e.batch, sql, func(estimate float64) { *v = estimate }, arg)
	return v
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

// Trail is what a poll reports of the audit trail: the sealed chains'
// heads, and the entries still queued for sealing.
type Trail struct {
	Heads  []ChainHead
	Queued auditreport.Queued
}

// Trail reads the chains' heads and what waits to be sealed.
func (s *Store) Trail(ctx context.Context) (Trail, error) {
	var t Trail
	var err error
	if t.Heads, err = s.AuditHeads(ctx); err != nil {
		return t, err
	}
	t.Queued, err = audit.ReadQueued(ctx, s.pool)
	return t, err
}

// Seal seals what has committed into the audit chains, as its own
// statement, and says how many entries it sealed. The console and the
// exporter seal each time they poll, before they read: a decision made
// anywhere (a command cut short before it sealed, or one whose chain
// another session held) then gets its place in its chain, and a deferral
// its effect on the counts, while people watch. A replica cannot seal
// (read-only): it seals nothing there, and the primary's pollers do.
func (s *Store) Seal(ctx context.Context) (int, error) {
	seal, err := audit.Seal(ctx, s.pool, "", 0)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgerrcode.ReadOnlySQLTransaction {
		return 0, nil
	}
	return seal.Sealed, err
}

// UnfinishedPurgeCount counts the purge runs UnfinishedPurges lists, for
// any role that sees every tenant, a viewer too (migration 00021); seen is
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

// ReconcilerPaused tells whether an admin paused every reconciler
// (opsdesk reconciler pause, migration 00027).
func (s *Store) ReconcilerPaused(ctx context.Context) (bool, error) {
	var paused bool
	if err := s.pool.QueryRow(ctx, `SELECT paused FROM opsdesk.reconciler_pause`).Scan(&paused); err != nil {
		return false, fmt.Errorf("read the reconciler's pause: %w", err)
	}
	return paused, nil
}

// Ping checks that the store answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("reach the store: %w", err)
	}
	return nil
}
