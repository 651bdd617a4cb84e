package storeview

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// Past bulk runs and reconciler passes: each is a row of opsdesk.batches
// (start_batch, migration 00029: who, when, the filter), and its
// decisions are the audit records whose details.batch is its id, read
// through audit_batch_idx. Row-level security decides which runs (the
// table's policy) and which of their records (the audit's) the role sees.
// A page costs its runs' records, not every decision ever made.

// batchesSQL pages the runs, newest start first; $1/$2 are the cursor
// (NULL for the first page), $3 the limit.
const batchesSQL = `
SELECT b.id::text AS id, b.started_at, b.role AS started_by, b.display_name AS started_by_name, b.filter,
    s.first_at, s.last_at, coalesce(s.roles, '{}') AS roles, s.names, coalesce(s.tenants, '{}') AS tenants, s.tools,
    s.records, s.operations, now() AS db_now
FROM opsdesk.batches b
CROSS JOIN LATERAL (
    SELECT min(a.at) AS first_at, max(a.at) AS last_at,
        array_agg(DISTINCT a.role) AS roles,
        coalesce(array_agg(DISTINCT a.display_name) FILTER (WHERE a.display_name IS NOT NULL), '{}') AS names,
        -- A refusal without rights to the record is on no tenant's chain;
        -- its details name the record's tenant.
        array_agg(DISTINCT coalesce(a.details->>'tenant', a.tenant)) AS tenants,
        coalesce(array_agg(DISTINCT a.tool) FILTER (WHERE a.tool IS NOT NULL), '{}') AS tools,
        count(*) AS records, count(DISTINCT a.operation_id) AS operations
    FROM opsdesk.audit a
    WHERE opsdesk.batch_of(a.details) = opsdesk.uuid_text(b.id) AND a.action LIKE 'decide:%') s
WHERE $1::timestamptz IS NULL OR (b.started_at, b.id) < ($1::timestamptz, $2::uuid)
ORDER BY b.started_at DESC, b.id DESC
LIMIT $3`

// batchGroupsSQL counts the decisions of the runs $1 by lookup verdict
// and decision. Skipped are refusals because the record changed since the
// lookup, as the bulk run tells them apart.
const batchGroupsSQL = `
SELECT a.details->>'batch' AS id, coalesce(a.details->>'lookup', '') AS lookup, substr(a.action, 8) AS decision,
    count(*) FILTER (WHERE a.outcome = 'succeeded') AS decided,
    count(*) FILTER (WHERE a.outcome <> 'succeeded' AND skip) AS skipped,
    count(*) FILTER (WHERE a.outcome <> 'succeeded' AND NOT skip) AS failed
FROM opsdesk.audit a,
    LATERAL (SELECT coalesce(a.details->>'refusal' IN ('changed', 'not_pending', 'lease_live'), false) AS skip) s
WHERE opsdesk.batch_of(a.details) = ANY($1::text[]) AND a.action LIKE 'decide:%'
GROUP BY 1, 2, 3`

type batchScan struct {
	ID            string     `db:"id"`
	StartedAt     time.Time  `db:"started_at"`
	StartedBy     string     `db:"started_by"`
	StartedByName *string    `db:"started_by_name"`
	Filter        *string    `db:"filter"`
	FirstAt       *time.Time `db:"first_at"`
	LastAt        *time.Time `db:"last_at"`
	Roles         []string   `db:"roles"`
	Names         []string   `db:"names"`
	Tenants       []string   `db:"tenants"`
	Tools         []string   `db:"tools"`
	Records       int64      `db:"records"`
	Operations    int64      `db:"operations"`
	DBNow         time.Time  `db:"db_now"`
}

type batchGroupScan struct {
	ID       string `db:"id"`
	Lookup   string `db:"lookup"`
	Decision string `db:"decision"`
	Decided  int64  `db:"decided"`
	Skipped  int64  `db:"skipped"`
	Failed   int64  `db:"failed"`
}

// AuditBatches returns one page of past bulk runs, newest first, each
// with its groups' counts, in one snapshot.
func (s *Store) AuditBatches(ctx context.Context, q readmodel.BatchQuery) (page readmodel.BatchPage, err error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	var at *time.Time
	var after *string
	if c := q.After; c != nil {
		at, after = &c.StartedAt, &c.ID
	}
	err = s.snapshot(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, batchesSQL, at, after, limit+1)
		if err != nil {
			return err
		}
		scanned, err := pgx.CollectRows(rows, pgx.RowToStructByName[batchScan])
		if err != nil {
			return err
		}
		if len(scanned) > limit {
			scanned = scanned[:limit]
			next := readmodel.BatchCursor{StartedAt: scanned[limit-1].StartedAt, ID: scanned[limit-1].ID}
			page.Next = &next
		}
		page.Batches = make([]readmodel.Batch, 0, len(scanned))
		ids := make([]string, len(scanned))
		for i, b := range scanned {
			ids[i] = b.ID
			for _, l := range [][]string{b.Roles, b.Names, b.Tenants, b.Tools} {
				slices.Sort(l)
			}
			var span time.Duration
			if b.FirstAt != nil && b.LastAt != nil {
				span = b.LastAt.Sub(*b.FirstAt)
			}
			page.Batches = append(page.Batches, readmodel.Batch{
				ID: b.ID, StartedAt: b.StartedAt, StartedBy: b.StartedBy, StartedByName: b.StartedByName, Filter: b.Filter,
				FirstAt: b.FirstAt, LastAt: b.LastAt, Span: span,
				Roles: b.Roles, DisplayNames: b.Names, Tenants: b.Tenants, Tools: b.Tools,
				Records: int(b.Records), Operations: int(b.Operations), Groups: []readmodel.BatchGroup{},
			})
		}
		if len(scanned) == 0 {
			return tx.QueryRow(ctx, "SELECT now()").Scan(&page.DBTime)
		}
		page.DBTime = scanned[0].DBNow
		rows, err = tx.Query(ctx, batchGroupsSQL, ids)
		if err != nil {
			return err
		}
		groups, err := pgx.CollectRows(rows, pgx.RowToStructByName[batchGroupScan])
		if err != nil {
			return err
		}
		for _, g := range groups {
			i := slices.Index(ids, g.ID)
			if i < 0 {
				continue
			}
			page.Batches[i].Groups = append(page.Batches[i].Groups, readmodel.BatchGroup{Lookup: g.Lookup, Decision: g.Decision,
				Decided: int(g.Decided), Skipped: int(g.Skipped), Failed: int(g.Failed)})
		}
		for _, b := range page.Batches {
			slices.SortFunc(b.Groups, func(x, y readmodel.BatchGroup) int {
				return cmp.Or(cmp.Compare(x.Lookup, y.Lookup), cmp.Compare(x.Decision, y.Decision))
			})
		}
		return nil
	})
	if err != nil {
		return readmodel.BatchPage{}, fmt.Errorf("list bulk runs: %w", err)
	}
	return page, nil
}
