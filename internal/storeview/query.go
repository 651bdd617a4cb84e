package storeview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/pgtime"
	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// Config tune the store.
type Config struct {
	// StuckAfter is how long past its lease expiry a pending record must be
	// to count as stuck.
	StuckAfter time.Duration
	// StatementTimeout bounds each query (default 5s).
	StatementTimeout time.Duration
}

// Store runs the read queries.
type Store struct {
	pool *pgxpool.Pool
	opts Config
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool, opts Config) *Store {
	if opts.StatementTimeout == 0 {
		opts.StatementTimeout = 5 * time.Second
	}
	return &Store{pool: pool, opts: opts}
}

// ConfigurePool names the console in pg_stat_activity and bounds every
// statement, as the console's connections must.
func ConfigurePool(cfg *pgxpool.Config, statementTimeout time.Duration) {
	cfg.ConnConfig.RuntimeParams["application_name"] = "opsdesk"
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(statementTimeout.Milliseconds(), 10)
	// Check a connection that sat idle for a moment before using it: after
	// a server restart the pool's connections are dead, and the console
	// would otherwise report an outage that is already over. A ping per
	// poll is nothing at the console's rate.
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration > 100*time.Millisecond
	}
}

// builder collects SQL conditions and binds every value as a parameter.
// User input never becomes SQL text.
type builder struct {
	conds []string
	args  []any
}

// arg binds v and returns its placeholder.
func (b *builder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

func (b *builder) where(format string, args ...any) {
	placeholders := make([]any, len(args))
	for i, a := range args {
		placeholders[i] = b.arg(a)
	}
	b.conds = append(b.conds, fmt.Sprintf(format, placeholders...))
}

func (b *builder) sql() string {
	if len(b.conds) == 0 {
		return "TRUE"
	}
	return strings.Join(b.conds, " AND ")
}

// stateCondition is the SQL for one state; stuck is the stuck-after
// interval. The lease column stands alone on one side of each comparison,
// so the partial index on pending leases serves it.
func stateCondition(s readmodel.State, stuck string) string {
	switch s {
	case readmodel.StatePending:
		return LiveSQL("o.", stuck)
	case readmodel.StateStuck:
		return queueWhere(stuck)
	case readmodel.StateDeferred:
		return deferredWhere(stuck)
	case readmodel.StateCompleted:
		return "(o.state = 'completed' AND o.outcome = 'succeeded')"
	case readmodel.StateRejected:
		return "(o.state = 'completed' AND o.outcome = 'rejected')"
	default:
		return "o.state = 'released'"
	}
}

const conflictedSQL = `(o.conflict_count > 0 AND EXISTS (
    SELECT 1 FROM opsdesk.conflicts c
    WHERE c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key AND c.reviewed_at IS NULL))`

// likePattern turns a '*' pattern into a LIKE pattern with '\' escapes.
func likePattern(p string) string {
	p = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p)
	return strings.ReplaceAll(p, "*", "%")
}

// patterns keeps the rows whose column matches one of values: exactly,
// or as a '*' pattern. No values: no condition.
func (b *builder) patterns(column string, values []string) {
	if len(values) == 0 {
		return
	}
	var exact, patterns []string
	for _, v := range values {
		if strings.Contains(v, "*") {
			patterns = append(patterns, likePattern(v))
		} else {
			exact = append(exact, v)
		}
	}
	var alts []string
	if len(exact) > 0 {
		alts = append(alts, b.oneOfSQL(column, exact))
	}
	// One LIKE per pattern: the planner turns a LIKE with a known prefix
	// into an index range, never a LIKE ANY.
	for _, p := range patterns {
		alts = append(alts, column+" LIKE "+b.arg(p))
	}
	b.conds = append(b.conds, "("+strings.Join(alts, " OR ")+")")
}

// oneOf keeps the rows whose column is one of values.
func (b *builder) oneOf(column string, values []string) {
	if len(values) > 0 {
		b.conds = append(b.conds, b.oneOfSQL(column, values))
	}
}

// oneOfSQL compares one value with =, so that the planner knows the column
// is constant and an index that leads with it returns the rows in the
// order of its other columns; several with = ANY.
func (b *builder) oneOfSQL(column string, values []string) string {
	if len(values) == 1 {
		return column + " = " + b.arg(values[0])
	}
	return column + " = ANY(" + b.arg(values) + ")"
}

// apply adds the filter's conditions.
func (b *builder) apply(f readmodel.Filter, stuck string) {
	// state:a,b is either; conflicted is one of the alternatives.
	var alts []string
	for _, s := range f.States {
		alts = append(alts, stateCondition(s, stuck))
	}
	if f.Conflicted {
		alts = append(alts, conflictedSQL)
	}
	if len(alts) > 0 {
		b.conds = append(b.conds, "("+strings.Join(alts, " OR ")+")")
	}
	// One tenant and one tool are each compared with =, so that the
	// planner reads operations_tool_expiry_idx (tenant, tool, expires_at)
	// in order for a retention sort, not every completed record's expiry.
	b.oneOf("o.tenant", f.Tenants)
	b.oneOf("o.tool", f.Tools)
	b.oneOf("o.owner", f.Owners)
	if len(f.IDs) > 0 {
		b.where("o.id = ANY(%s)", f.IDs)
	}
	b.patterns("o.key", f.Keys)
	if f.MinAge > 0 {
		b.where("o.leased_at <= now() - %s * interval '1 microsecond'", f.MinAge.Microseconds())
	}
	if f.MaxAge > 0 {
		b.where("o.leased_at > now() - %s * interval '1 microsecond'", f.MaxAge.Microseconds())
	}
	// Retention applies to completed records (its index is partial on them).
	if f.ExpiresWithin > 0 {
		b.where("o.state = 'completed' AND o.expires_at > now() AND o.expires_at <= now() + %s * interval '1 microsecond'",
			f.ExpiresWithin.Microseconds())
	}
	if f.ExpiresAfter > 0 {
		b.where("o.state = 'completed' AND o.expires_at > now() + %s * interval '1 microsecond'", f.ExpiresAfter.Microseconds())
	}
}

// rowColumns selects a Row; $1 is the stuck-after interval.
// It reads from the operations row o joined with DeferralJoin's d.
var rowColumns = `o.id, o.tenant, o.tool, o.key,
    CASE WHEN ` + DeferredSQL("$1 * interval '1 microsecond'") + ` THEN 'deferred'
         WHEN ` + StuckSQL("o.", "$1 * interval '1 microsecond'") + ` THEN 'stuck'
         WHEN o.state = 'pending' THEN 'pending'
         WHEN o.outcome = 'rejected' THEN 'rejected'
         ELSE o.state END AS view_state,
    cf.unreviewed IS NOT NULL AS conflicted,
    o.conflict_count, coalesce(o.owner, '') AS owner, o.attempt, o.version, o.held,
    o.leased_at, o.lease_expires_at, o.created_at, o.updated_at, o.completed_at, o.expires_at,
    d.until AS deferred_until, coalesce(d.role, '') AS deferred_by, now() AS db_now`

// rowJoins are the joins rowColumns reads besides o: DeferralJoin's d,
// and cf, a row when o has an unreviewed conflict. cf is a lateral probe
// of conflicts_unreviewed_idx for each row (only those with conflicts):
// as an EXISTS the planner hashed every unreviewed conflict of the store
// for a page of 50 rows, a cost that grew with the store (0.8 ms at 1M,
// 3.6 ms at 10M).
const rowJoins = DeferralJoin + conflictedJoin

const conflictedJoin = ` LEFT JOIN LATERAL (SELECT true AS unreviewed FROM opsdesk.conflicts c
    WHERE o.conflict_count > 0 AND c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key AND c.reviewed_at IS NULL
    LIMIT 1) cf ON true`

// pageColumns are the operations columns rowColumns reads.
const pageColumns = `o.id, o.tenant, o.tool, o.key, o.state, o.outcome, o.conflict_count, o.owner, o.attempt,
    o.version, o.held, o.leased_at, o.lease_expires_at, o.created_at, o.updated_at, o.completed_at, o.expires_at`

type rowScan struct {
	ID            int64      `db:"id"`
	Tenant        string     `db:"tenant"`
	Tool          string     `db:"tool"`
	Key           string     `db:"key"`
	State         string     `db:"view_state"`
	Conflicted    bool       `db:"conflicted"`
	ConflictCount int32      `db:"conflict_count"`
	Owner         string     `db:"owner"`
	Attempt       int32      `db:"attempt"`
	Version       int64      `db:"version"`
	Held          bool       `db:"held"`
	LeasedAt      *time.Time `db:"leased_at"`
	// The sorts' times, as stored: a list's cursor sends them back.
	LeaseExpiresAt pgtype.Timestamptz `db:"lease_expires_at"`
	CreatedAt      time.Time          `db:"created_at"`
	UpdatedAt      time.Time          `db:"updated_at"`
	CompletedAt    *time.Time         `db:"completed_at"`
	ExpiresAt      pgtype.Timestamptz `db:"expires_at"`
	DeferredUntil  *time.Time         `db:"deferred_until"`
	DeferredBy     string             `db:"deferred_by"`
	DBNow          time.Time          `db:"db_now"`
}

func (r rowScan) row() readmodel.Row {
	return readmodel.Row{
		ID: r.ID, Tenant: r.Tenant, Tool: r.Tool, Key: r.Key, State: readmodel.State(r.State),
		Conflicted: r.Conflicted, ConflictCount: int(r.ConflictCount), Owner: r.Owner,
		Attempt: int(r.Attempt), Version: r.Version, Held: r.Held,
		LeasedAt: deref(r.LeasedAt), LeaseExpiresAt: pgtime.FromTimestamptz(r.LeaseExpiresAt),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		CompletedAt: deref(r.CompletedAt), ExpiresAt: pgtime.FromTimestamptz(r.ExpiresAt),
		DeferredUntil: deref(r.DeferredUntil), DeferredBy: r.DeferredBy, DBTime: r.DBNow,
	}
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// timeSort is how a sort by a time orders: the records that have the time,
// which a partial index on the time holds in order, then the others,
// newest first.
type timeSort struct {
	state  string // SQL: the stored state of the records with the time
	column string // SQL: the time
}

var timeSorts = map[readmodel.Sort]timeSort{
	readmodel.SortLease:   {"'pending'", "o.lease_expires_at"},
	readmodel.SortExpires: {"'completed'", "o.expires_at"}, // never NULL on completed records
}

// The parts of a list: each adds its conditions (after a cursor) and
// returns its order. The states are written into the SQL, never bound, so
// that the planner matches the partial indexes' predicates in every plan.
func newest(b *builder, after *readmodel.Cursor) string {
	if after != nil {
		b.where("o.id < %s", after.ID)
	}
	return "o.id DESC"
}

func (t timeSort) timed(b *builder, after *readmodel.Cursor) string {
	b.conds = append(b.conds, "o.state = "+t.state)
	if after != nil {
		b.where("("+t.column+", o.id) > (%s, %s)", after.At, after.ID)
	}
	return t.column + ", o.id"
}

func (t timeSort) others(b *builder, after *readmodel.Cursor) string {
	b.conds = append(b.conds, "o.state <> "+t.state)
	return newest(b, after)
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// snapshot runs fn in one read-only repeatable-read transaction, so that
// every figure it reads is true at the same moment, and now() is the same
// throughout.
func (s *Store) snapshot(ctx context.Context, fn func(q querier) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only: nothing to keep
	return fn(tx)
}

// List returns one page of operations. How many match is Total's, a
// query of its own: a count costs more than a page, and the console
// shows the page without waiting for it.
func (s *Store) List(ctx context.Context, q readmodel.Query) (readmodel.Page, error) {
	return s.list(ctx, s.pool, q)
}

// Total counts the records that match f, as List's pages show them:
// exact up to CountCap, then the planner's estimate for a role that sees
// every tenant (whose statistics span every tenant), else a lower bound
// (AtLeast).
func (s *Store) Total(ctx context.Context, f readmodel.Filter) (readmodel.Count, error) {
	return s.total(ctx, s.pool, f)
}

func (s *Store) list(ctx context.Context, conn querier, q readmodel.Query) (readmodel.Page, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	sort := q.Sort
	if sort == "" {
		sort = readmodel.SortNewest
	}
	var scanned []rowScan
	var err error
	if sort == readmodel.SortNewest {
		scanned, err = s.query(ctx, conn, q.Filter, newest, q.After, limit+1)
	} else {
		ts, ok := timeSorts[sort]
		if !ok {
			return readmodel.Page{}, fmt.Errorf("unknown sort %q (sorts: newest, lease, expires)", sort)
		}
		// A cursor without a time continues among the others.
		var after *readmodel.Cursor
		if q.After == nil || !q.After.At.IsZero() {
			scanned, err = s.query(ctx, conn, q.Filter, ts.timed, q.After, limit+1)
		} else {
			after = q.After
		}
		if err == nil && len(scanned) <= limit && !keepsOnly(q.Filter, sort) {
			var rest []rowScan
			rest, err = s.query(ctx, conn, q.Filter, ts.others, after, limit+1-len(scanned))
			scanned = append(scanned, rest...)
		}
	}
	if err != nil {
		return readmodel.Page{}, fmt.Errorf("list operations: %w", err)
	}
	page := readmodel.Page{Rows: make([]readmodel.Row, 0, min(len(scanned), limit))}
	for i, r := range scanned {
		if i == limit {
			last := scanned[limit-1]
			page.Next = &readmodel.Cursor{ID: last.ID, At: cursorTime(sort, last)}
			break
		}
		page.Rows = append(page.Rows, r.row())
	}
	if len(scanned) > 0 {
		page.DBTime = scanned[0].DBNow
	} else if err := conn.QueryRow(ctx, "SELECT now()").Scan(&page.DBTime); err != nil {
		return readmodel.Page{}, fmt.Errorf("read database time: %w", err)
	}
	return page, nil
}

// total counts the records that match f up to CountCap, and estimates a
// larger count: from the planner for a role that sees every tenant (whose
// statistics span every tenant), else it is a lower bound.
func (s *Store) total(ctx context.Context, conn querier, f readmodel.Filter) (readmodel.Count, error) {
	b := &builder{}
	if slices.ContainsFunc(f.States, func(st readmodel.State) bool { return readmodel.Row{State: st}.Pending() }) {
		b.apply(f, b.arg(s.opts.StuckAfter.Microseconds())+" * interval '1 microsecond'")
	} else {
		b.apply(f, "") // no condition reads the stuck-after interval
	}
	from := "FROM opsdesk.operations o WHERE " + b.sql()
	var c readmodel.Count
	var every bool
	err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM (SELECT "+from+" LIMIT "+strconv.Itoa(readmodel.CountCap+1)+") s), "+visibleSQL,
		b.args...).Scan(&c.N, &every)
	switch {
	case err != nil:
		return c, fmt.Errorf("count operations: %w", err)
	case c.N <= readmodel.CountCap:
		return c, nil
	case !every:
		return readmodel.Count{N: readmodel.CountCap, AtLeast: true}, nil // it counted CountCap+1
	}
	batch := &pgx.Batch{}
	queuePlanRows(batch, "SELECT "+from, func(estimate float64) {
		c = readmodel.Count{N: max(int64(estimate), readmodel.CountCap+1), Estimated: true}
	}, b.args...)
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return c, fmt.Errorf("estimate operations: %w", err)
	}
	return c, nil
}

// query reads up to limit rows that match f, in one part of a list.
func (s *Store) query(ctx context.Context, conn querier, f readmodel.Filter,
	part func(*builder, *readmodel.Cursor) string, after *readmodel.Cursor, limit int) ([]rowScan, error) {
	b := &builder{}
	stuck := b.arg(s.opts.StuckAfter.Microseconds()) + " * interval '1 microsecond'"
	b.apply(f, stuck)
	order := part(b, after)
	// The page first, then the deferrals and conflicts of its rows only:
	// joined before the LIMIT, the audit was probed for every row the
	// filter matched before the sort kept a page of them.
	sql := "SELECT " + rowColumns + " FROM (SELECT " + pageColumns + " FROM opsdesk.operations o WHERE " + b.sql() +
		" ORDER BY " + order + " LIMIT " + strconv.Itoa(limit) + ") o" + rowJoins + " ORDER BY " + order
	rows, err := conn.Query(ctx, sql, b.args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[rowScan])
}

// cursorTime is a row's value of the sort's time, as stored; zero for the
// rows without one, which follow newest first. (Row has every time after
// year 9999 as ops.Infinity: a cursor at it would skip the records from
// there to 'infinity'.)
func cursorTime(sort readmodel.Sort, r rowScan) time.Time {
	switch row := r.row(); {
	case sort == readmodel.SortLease && row.Pending():
		return pgtime.Exact(r.LeaseExpiresAt)
	case sort == readmodel.SortExpires && (row.State == readmodel.StateCompleted || row.State == readmodel.StateRejected):
		return pgtime.Exact(r.ExpiresAt)
	}
	return time.Time{}
}

// keepsOnly tells whether a filter keeps only records that have the
// sort's time, so that no others can follow them.
func keepsOnly(f readmodel.Filter, sort readmodel.Sort) bool {
	if sort == readmodel.SortExpires && (f.ExpiresWithin > 0 || f.ExpiresAfter > 0) {
		return true
	}
	if len(f.States) == 0 || f.Conflicted {
		return false
	}
	for _, s := range f.States {
		timed := s == readmodel.StateCompleted || s == readmodel.StateRejected
		if sort == readmodel.SortLease {
			timed = readmodel.Row{State: s}.Pending()
		}
		if !timed {
			return false
		}
	}
	return true
}

// Get returns one record by id.
func (s *Store) Get(ctx context.Context, id int64) (readmodel.Detail, error) {
	return s.detail(ctx, "o.id = $2", id)
}

// GetByIdentity returns one record by its identity; a *PurgedError when
// it was purged and its tombstone lasts.
func (s *Store) GetByIdentity(ctx context.Context, tenant, tool, key string) (readmodel.Detail, error) {
	d, err := s.detail(ctx, "o.tenant = $2 AND o.tool = $3 AND o.key = $4", tenant, tool, key)
	if !errors.Is(err, readmodel.ErrNotFound) {
		return d, err
	}
	var p readmodel.PurgedError
	perr := s.pool.QueryRow(ctx, `SELECT operation_id, purged_at, expires_at, now() FROM opsdesk.tombstones
WHERE tenant = $1 AND tool = $2 AND key = $3 AND expires_at > now()`, tenant, tool, key).
		Scan(&p.OperationID, &p.PurgedAt, &p.TombstoneUntil, &p.DBTime)
	switch {
	case errors.Is(perr, pgx.ErrNoRows):
		// Which part to check: two probes of the primary key's prefix,
		// under the role's policies.
		a := &readmodel.AbsentError{Tenant: tenant, Tool: tool}
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM opsdesk.operations WHERE tenant = $1),
    EXISTS (SELECT FROM opsdesk.operations WHERE tenant = $1 AND tool = $2)`, tenant, tool).Scan(&a.TenantKnown, &a.ToolKnown); err != nil {
			return d, fmt.Errorf("look for the tenant and tool: %w", err)
		}
		return d, a
	case perr != nil:
		return d, fmt.Errorf("read the tombstone: %w", perr)
	}
	return d, &p
}

type detailScan struct {
	rowScan
	ToolVersion    string     `db:"tool_version"`
	Effect         string     `db:"effect"`
	Outcome        string     `db:"outcome"`
	ResultRef      string     `db:"result_ref"`
	HasResult      bool       `db:"has_result"`
	LastConflictAt *time.Time `db:"last_conflict_at"`
}

func (s *Store) detail(ctx context.Context, where string, args ...any) (d readmodel.Detail, err error) {
	err = s.snapshot(ctx, func(q querier) error {
		d, err = s.detailIn(ctx, q, where, args...)
		return err
	})
	return d, err
}

// detailIn reads a record and its conflicts through q (one snapshot).
func (s *Store) detailIn(ctx context.Context, q querier, where string, args ...any) (readmodel.Detail, error) {
	sql := "SELECT " + rowColumns + `, o.tool_version, o.effect, coalesce(o.outcome, '') AS outcome,
    coalesce(o.result_ref, '') AS result_ref, o.state = 'completed' AS has_result, o.last_conflict_at
FROM opsdesk.operations o` + rowJoins + ` WHERE ` + where
	rows, err := q.Query(ctx, sql, append([]any{s.opts.StuckAfter.Microseconds()}, args...)...)
	if err != nil {
		return readmodel.Detail{}, fmt.Errorf("read operation: %w", err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[detailScan])
	if errors.Is(err, pgx.ErrNoRows) {
		return readmodel.Detail{}, readmodel.ErrNotFound
	}
	if err != nil {
		return readmodel.Detail{}, fmt.Errorf("read operation: %w", err)
	}
	out := readmodel.Detail{
		Row: d.row(), ToolVersion: d.ToolVersion,
		Effect: d.Effect, Outcome: d.Outcome, ResultRef: d.ResultRef, HasResult: d.HasResult,
		LastConflictAt: deref(d.LastConflictAt),
	}
	// Fingerprints are keyed tags: people may not read the fingerprints.
	crow, err := q.Query(ctx, `
SELECT c.id, c.attempted_at, c.owner, c.tool_version, coalesce(t.tag, '') AS tag, c.reviewed_at IS NOT NULL AS reviewed
FROM opsdesk.conflicts c LEFT JOIN opsdesk.fingerprint_tags($4) t ON t.conflict_id = c.id
WHERE c.tenant = $1 AND c.tool = $2 AND c.key = $3 ORDER BY c.id`, d.Tenant, d.Tool, d.Key, d.ID)
	if err != nil {
		return readmodel.Detail{}, fmt.Errorf("read conflicts: %w", err)
	}
	out.Conflicts, err = pgx.CollectRows(crow, func(r pgx.CollectableRow) (readmodel.Conflict, error) {
		var c readmodel.Conflict
		err := r.Scan(&c.ID, &c.AttemptedAt, &c.Owner, &c.ToolVersion, &c.FingerprintTag, &c.Reviewed)
		return c, err
	})
	if err != nil {
		return readmodel.Detail{}, fmt.Errorf("read conflicts: %w", err)
	}
	err = q.QueryRow(ctx, `SELECT coalesce(max(tag), '') FROM opsdesk.fingerprint_tags($1) WHERE conflict_id IS NULL`, d.ID).
		Scan(&out.FingerprintTag)
	if err != nil {
		return readmodel.Detail{}, fmt.Errorf("read the fingerprint tag: %w", err)
	}
	drows, err := q.Query(ctx, decisionsSQL, d.Tenant, d.ID)
	if err != nil {
		return readmodel.Detail{}, fmt.Errorf("read decisions: %w", err)
	}
	var r audit.Record
	_, err = pgx.ForEachRow(drows, r.Targets(), func() error {
		dec, err := decisionOf(r)
		out.Decisions = append(out.Decisions, dec)
		return err
	})
	if err != nil {
		return readmodel.Detail{}, fmt.Errorf("read decisions: %w", err)
	}
	return out, nil
}

// decisionOf is a decision as its audit record holds it, the record's
// hash checked: the timeline flags a record changed since it was written.
func decisionOf(r audit.Record) (readmodel.Decision, error) {
	d := readmodel.Decision{AuditSeq: r.Seq, At: r.At, Role: r.Role, DisplayName: deref0(r.DisplayName), Action: r.Action,
		Reason: deref0(r.Reason), Forced: r.Forced, Override: r.Override, HashBroken: !r.HashMatches()}
	if r.Details == nil {
		return d, nil
	}
	var details struct {
		ResultRef   string     `json:"result_ref"`
		SnoozeUntil *time.Time `json:"snooze_until"`
		Reconciler  bool       `json:"reconciler"`
	}
	if err := json.Unmarshal([]byte(*r.Details), &details); err != nil {
		return d, fmt.Errorf("read the details of audit record %d: %w", r.Seq, err)
	}
	d.ResultRef, d.SnoozeUntil, d.Machine = details.ResultRef, deref(details.SnoozeUntil), details.Reconciler
	return d, nil
}

// decisionsSQL reads a record's last 50 decisions that took effect, their
// audit records whole.
var decisionsSQL = `
SELECT ` + audit.RecordColumns + ` FROM (
    SELECT * FROM opsdesk.audit
    WHERE tenant = $1 AND operation_id = $2 AND outcome = 'succeeded'
      AND (action LIKE 'decide:%' OR action = 'conflicts:ack')
    ORDER BY seq DESC LIMIT 50) d
ORDER BY seq`

// Overview counts records per state. Pending, stuck, rejected, released and
// conflicted counts are exact; the succeeded count is the planner's
// estimate once the table is large.
func (s *Store) Overview(ctx context.Context) (o readmodel.Overview, err error) {
	// The console polls here: it seals the audit trail first, so that a
	// decision made anywhere (a CLI command cut short, a session another
	// one held back) gets its place in its chain while people watch. A
	// seal that fails leaves entries queued, which the exporter reports
	// and alerts on; the overview is still shown.
	_, _ = s.Seal(ctx)
	err = s.snapshot(ctx, func(q querier) error {
		o, err = s.overviewIn(ctx, q)
		return err
	})
	return o, err
}

func (s *Store) overviewIn(ctx context.Context, q querier) (readmodel.Overview, error) {
	var o readmodel.Overview
	if err := s.countCapped(ctx, q, &o); err != nil {
		return o, err
	}
	if err := s.countCompleted(ctx, q, &o); err != nil {
		return o, err
	}
	if o.Stuck > 0 {
		page, err := s.list(ctx, q, readmodel.Query{Filter: readmodel.Filter{States: []readmodel.State{readmodel.StateStuck}}, Sort: readmodel.SortLease, Limit: 1})
		if err != nil {
			return o, err
		}
		if len(page.Rows) > 0 {
			o.OldestStuck = &page.Rows[0]
		}
	}
	if err := s.pulseIn(ctx, q, &o); err != nil {
		return o, err
	}
	if o.Deferred > 0 {
		rows, err := q.Query(ctx, nextDueSQL, s.opts.StuckAfter.Microseconds())
		if err != nil {
			return o, fmt.Errorf("read the next deferral due: %w", err)
		}
		next, err := pgx.CollectRows(rows, pgx.RowToStructByName[rowScan])
		if err != nil {
			return o, fmt.Errorf("read the next deferral due: %w", err)
		}
		if len(next) > 0 {
			r := next[0].row()
			o.NextDue = &r
		}
	}
	return o, nil
}

// The overview's capped counts: each stops at CountCap+1 rows ($1), so
// that none grows with the table. $2 is the stuck-after interval in
// microseconds. Each condition leaves the indexed column bare, so a
// partial index returns the rows in an index-only scan.
const (
	rejectedWhere = "state = 'completed' AND outcome = 'rejected'"
	releasedWhere = "state = 'released'"
	expiringWhere = "state = 'completed' AND expires_at > now() AND expires_at <= now() + interval '24 hours'"
	// Records with unreviewed conflicts, counted from the conflicts' side
	// (each conflict names its record): conflicts_unreviewed_idx returns
	// the distinct identities in order.
	conflictedFrom = "(SELECT DISTINCT tenant, tool, key FROM opsdesk.conflicts WHERE reviewed_at IS NULL"
	capped         = "(SELECT count(*) FROM (SELECT FROM opsdesk.operations WHERE %s LIMIT $1) s)"
)

// deferralsFrom is the operations rows o that people deferred, with
// their current deferral d: found from the audit trail's side
// (audit_browse_action_idx), as deferrals are few and the stuck records
// may be many. A reminder is at most a year ahead of its deferral.
var deferralsFrom = `(SELECT DISTINCT a.tenant, a.operation_id FROM opsdesk.audit a
    WHERE a.action = '` + readmodel.ActionDefer + `' AND a.outcome = 'succeeded' AND a.at > now() - interval '1 year'
      AND (a.details->>'snooze_until')::timestamptz > now()) c
  JOIN opsdesk.operations o ON o.tenant = c.tenant AND o.id = c.operation_id` + DeferralJoin

// nextDueSQL reads the deferred record whose reminder comes first; $1 is
// the stuck-after interval.
var nextDueSQL = "SELECT " + rowColumns + " FROM " + deferralsFrom + conflictedJoin + " WHERE " + // deferralsFrom has d
	DeferredSQL("$1 * interval '1 microsecond'") + " ORDER BY d.until, o.id LIMIT 1"

// cappedCountsSQL also says whether the role sees every tenant: table
// statistics span every tenant, so they estimate nothing for a role that
// sees some. (A role that may not ask, the tables' owner say, is not
// scoped by the policies either.)
var cappedCountsSQL = "SELECT now(), " +
	visibleSQL + ", " +
	strings.Join([]string{
		fmt.Sprintf(capped, LiveSQL("", "$2 * interval '1 microsecond'")),
		"(SELECT count(*) FROM (SELECT FROM " + deferralsFrom + " WHERE " +
			DeferredSQL("$2 * interval '1 microsecond'") + " LIMIT $1) s)",
		fmt.Sprintf(capped, rejectedWhere),
		fmt.Sprintf(capped, releasedWhere),
		"(SELECT count(*) FROM " + conflictedFrom + " LIMIT $1) s)",
		fmt.Sprintf(capped, expiringWhere),
	}, ",\n    ")

// countCapped counts each state's records exactly up to CountCap and
// estimates larger counts: from the size of the partial index that holds
// them, or the planner's row estimate.
func (s *Store) countCapped(ctx context.Context, q querier, o *readmodel.Overview) error {
	stuckAfter := s.opts.StuckAfter.Microseconds()
	var every bool
	err := q.QueryRow(ctx, cappedCountsSQL, readmodel.CountCap+1, stuckAfter).
		Scan(&o.DBTime, &every, &o.Pending, &o.Deferred, &o.Rejected, &o.Released, &o.Conflicted, &o.ExpiringSoon)
	if err != nil {
		return fmt.Errorf("count records: %w", err)
	}
	// The stuck records are counted by tool, the pulse's figures, in the
	// same read of the queue.
	if err := s.stuckByTool(ctx, q, o); err != nil {
		return err
	}
	o.Scoped = !every
	o.DeferredAtLeast = o.Deferred > readmodel.CountCap
	batch := &pgx.Batch{}
	// Pending records split into live and stuck. When one side was
	// counted, the other is the partial index's size less it; else the
	// planner splits them, from the statistics
	// operations_pending_lease_stats keeps of this expression (the
	// interval written in: an integer).
	live := estimateBy{sql: "SELECT FROM opsdesk.operations WHERE " + leaseEstimateWhere(false, stuckAfter)}
	stuck := estimateBy{sql: "SELECT FROM opsdesk.operations WHERE " + leaseEstimateWhere(true, stuckAfter)}
	// The index holds the deferred records too; the planner's split of
	// stuck ones counts them in as well.
	if o.Stuck <= readmodel.CountCap {
		live = estimateBy{index: "opsdesk.operations_pending_lease_idx", less: o.Stuck + o.Deferred}
	}
	if o.Pending <= readmodel.CountCap {
		stuck = estimateBy{index: "opsdesk.operations_pending_lease_idx", less: o.Pending + o.Deferred}
	} else {
		stuck.less = o.Deferred
	}
	for _, c := range []struct {
		n         *int64
		estimated *bool
		by        estimateBy
	}{
		{&o.Pending, &o.PendingEstimated, live},
		{&o.Stuck, &o.StuckEstimated, stuck},
		{&o.Rejected, &o.RejectedEstimated, estimateBy{index: "opsdesk.operations_rejected_idx"}},
		{&o.Released, &o.ReleasedEstimated, estimateBy{index: "opsdesk.operations_released_idx"}},
		{&o.Conflicted, &o.ConflictedEstimated, estimateBy{sql: "SELECT FROM " + conflictedFrom + ") s"}},
		{&o.ExpiringSoon, &o.ExpiringEstimated, estimateBy{sql: "SELECT FROM opsdesk.operations WHERE " + expiringWhere}},
	} {
		if *c.n <= readmodel.CountCap {
			continue
		}
		if o.Scoped {
			*c.estimated = true // CountCap+1, the lower bound counted
			continue
		}
		// Never below what was counted: statistics may lag behind.
		set := func(estimate float64) {
			*c.n, *c.estimated = max(int64(estimate), readmodel.CountCap+1), true
		}
		// The estimates go in one round trip.
		if c.by.index != "" {
			batch.Queue(`SELECT reltuples FROM pg_class WHERE oid = $1::regclass`, c.by.index).QueryRow(func(r pgx.Row) error {
				var estimate float64
				err := r.Scan(&estimate)
				set(estimate - float64(c.by.less))
				return err
			})
			continue
		}
		less := float64(c.by.less)
		queuePlanRows(batch, c.by.sql, func(estimate float64) { set(estimate - less) })
	}
	if batch.Len() == 0 {
		return nil
	}
	if err := q.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("estimate records: %w", err)
	}
	return nil
}

// leaseEstimateWhere is the condition the planner estimates live
// (stuck false) or stuck pending records by, stuckAfter in microseconds:
// the expression operations_pending_lease_stats keeps statistics of,
// with the interval written in (an integer), so that the planner uses
// them.
func leaseEstimateWhere(stuck bool, stuckAfter int64) string {
	op := "> "
	if stuck {
		op = "<= "
	}
	return "(CASE WHEN state = 'pending' THEN lease_expires_at END) " + op + "now() - " +
		strconv.FormatInt(stuckAfter, 10) + " * interval '1 microsecond'"
}

// estimateBy is how a count above the cap is estimated: an index's size
// (its reltuples) or the planner's estimate of a query's rows, less a
// count.
type estimateBy struct {
	index string
	less  int64
	sql   string
}

// queuePlanRows queues the planner's estimate of the rows a query returns
// on batch, handing it to set when the batch runs.
func queuePlanRows(batch *pgx.Batch, sql string, set func(float64), args ...any) {
	batch.Queue("EXPLAIN (FORMAT JSON) "+sql, args...).QueryRow(func(r pgx.Row) error {
		var plan []byte
		if err := r.Scan(&plan); err != nil {
			return err
		}
		estimate, err := planRows(plan)
		set(estimate)
		return err
	})
}

// planRows reads the planner's estimate of the rows a query returns from
// its EXPLAIN (FORMAT JSON).
func planRows(plan []byte) (float64, error) {
	var out []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &out); err != nil || len(out) == 0 {
		return 0, fmt.Errorf("read the planner's estimate: %v", err)
	}
	return out[0].Plan.Rows, nil
}

// exactCountLimit is the table size up to which completed records are
// counted exactly.
const exactCountLimit = 100_000

// countCompleted counts succeeded records exactly on small tables and
// estimates them from the planner's statistics on large ones.
func (s *Store) countCompleted(ctx context.Context, q querier, o *readmodel.Overview) error {
	var estimate float64
	err := q.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'opsdesk.operations'::regclass`).Scan(&estimate)
	if err != nil {
		return fmt.Errorf("estimate records: %w", err)
	}
	if o.Scoped && estimate >= exactCountLimit {
		// Statistics span every tenant: count up to the cap instead.
		err := q.QueryRow(ctx, `SELECT count(*) FROM (SELECT FROM opsdesk.operations
WHERE state = 'completed' AND outcome = 'succeeded' LIMIT $1) s`, readmodel.CountCap+1).Scan(&o.Completed)
		if err != nil {
			return fmt.Errorf("count completed: %w", err)
		}
		o.CompletedEstimated = o.Completed > readmodel.CountCap
		return nil
	}
	if estimate < exactCountLimit {
		err := q.QueryRow(ctx, `SELECT count(*) FROM opsdesk.operations WHERE state = 'completed' AND outcome = 'succeeded'`).Scan(&o.Completed)
		if err != nil {
			return fmt.Errorf("count completed: %w", err)
		}
		return nil
	}
	o.CompletedEstimated = true
	o.Completed = max(0, int64(estimate)-o.Pending-o.Stuck-o.Rejected-o.Released)
	return nil
}

// Info describes the connection: where, as whom, and the schema version.
func (s *Store) Info(ctx context.Context) (readmodel.Info, error) {
	var i readmodel.Info
	err := s.pool.QueryRow(ctx, `SELECT current_database(), session_user, current_setting('server_version'), now()`).
		Scan(&i.Database, &i.Role, &i.Version, &i.DBTime)
	if err != nil {
		return i, fmt.Errorf("read server info: %w", err)
	}
	cfg := s.pool.Config().ConnConfig
	i.Server = cfg.Host + ":" + strconv.Itoa(int(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		i.Server = "socket " + cfg.Host
	}
	i.Schema, err = db.CheckSchema(ctx, s.pool)
	return i, err
}
