package storeview

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/pgtime"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// The overview's pulse: where the stuck records are, and what people
// decided lately. Both are read in the overview's snapshot, so that they
// agree with its counts at its database time.

// stuckByToolSQL groups the CountCap+1 ($1) records stuck longest (the
// stuck tile's queue: deferred records are not stuck) by tool, the tool
// whose lease expired first first; $2 is the stuck-after interval in
// microseconds. The last column is how many it read.
var stuckByToolSQL = `SELECT s.tool, count(*), min(s.lease_expires_at), sum(count(*)) OVER ()
FROM (SELECT o.tool, o.lease_expires_at FROM opsdesk.operations o` + DeferralJoin + `
      WHERE ` + QueueSQL("$2 * interval '1 microsecond'") + ` ORDER BY o.lease_expires_at LIMIT $1) s
GROUP BY s.tool ORDER BY min(s.lease_expires_at), s.tool`

// recentDecisionsSQL reads the past day's last decisions that were
// made, newest first: for each kind of decision a backward walk of
// audit_browse_idx's twin by action (audit_browse_action_idx), so that
// neither the trail's other actions (reveals, say) nor, for a role that
// sees one tenant, the others' audit rows are read beyond the day's
// decisions of that kind.
var recentDecisionsSQL = func() string {
	order := " ORDER BY at DESC, tenant DESC, seq DESC LIMIT " + strconv.Itoa(readmodel.RecentCap)
	var kinds []string
	for _, k := range reconcile.Kinds {
		kinds = append(kinds, "(SELECT "+audit.RecordColumns+", now() FROM opsdesk.audit"+
			" WHERE action = 'decide:"+string(k.Decision)+"' AND outcome = 'succeeded' AND at > now() - interval '1 day'"+order+")")
	}
	return strings.Join(kinds, "\nUNION ALL\n") + order
}()

// stuckByTool counts the stuck records into o, by tool: Stuck is how
// many it read (CountCap+1 at most: countCapped estimates beyond).
func (s *Store) stuckByTool(ctx context.Context, q querier, o *readmodel.Overview) error {
	rows, err := q.Query(ctx, stuckByToolSQL, readmodel.CountCap+1, s.opts.StuckAfter.Microseconds())
	if err != nil {
		return fmt.Errorf("count stuck records: %w", err)
	}
	o.StuckByTool = []readmodel.ToolStuck{}
	var t readmodel.ToolStuck
	var oldest pgtype.Timestamptz
	var read int64
	_, err = pgx.ForEachRow(rows, []any{&t.Tool, &t.Stuck, &oldest, &read}, func() error {
		t.Oldest = pgtime.FromTimestamptz(oldest)
		o.StuckByTool = append(o.StuckByTool, t)
		return nil
	})
	if err != nil {
		return fmt.Errorf("count stuck records: %w", err)
	}
	o.Stuck, o.StuckByToolCut = read, read > readmodel.CountCap
	return nil
}

// pulseIn reads the overview's recent decisions into o.
func (s *Store) pulseIn(ctx context.Context, q querier, o *readmodel.Overview) error {
	rows, err := q.Query(ctx, recentDecisionsSQL)
	if err != nil {
		return fmt.Errorf("read the recent decisions: %w", err)
	}
	var r audit.Record
	var now time.Time
	o.RecentDecisions = []readmodel.AuditRow{}
	_, err = pgx.ForEachRow(rows, append(r.Targets(), &now), func() error {
		o.RecentDecisions = append(o.RecentDecisions, auditRowOf(r, now))
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the recent decisions: %w", err)
	}
	return nil
}
