package storeview

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/pgtime"
	"github.com/opsdesk/opsdesk/internal/readmodel"
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
// made, newest first: a backward walk of audit_browse_idx that keeps the
// decisions. The day bounds it, so that a trail of other actions (reveals,
// say) is never read whole for want of decisions.
var recentDecisionsSQL = "SELECT " + audit.RecordColumns + ", now() FROM opsdesk.audit a" +
	" WHERE a.at > now() - interval '1 day' AND a.action LIKE 'decide:%' AND a.outcome = 'succeeded'" +
	" ORDER BY a.at DESC, a.tenant DESC, a.seq DESC LIMIT " + strconv.Itoa(readmodel.RecentCap)

// pulseIn reads the overview's stuck records by tool and recent
// decisions into o, whose Stuck is already counted.
func (s *Store) pulseIn(ctx context.Context, q querier, o *readmodel.Overview) error {
	o.StuckByTool = []readmodel.ToolStuck{}
	if o.Stuck > 0 {
		rows, err := q.Query(ctx, stuckByToolSQL, readmodel.CountCap+1, s.opts.StuckAfter.Microseconds())
		if err != nil {
			return fmt.Errorf("count stuck records by tool: %w", err)
		}
		var t readmodel.ToolStuck
		var oldest pgtype.Timestamptz
		var read int64
		_, err = pgx.ForEachRow(rows, []any{&t.Tool, &t.Stuck, &oldest, &read}, func() error {
			t.Oldest = pgtime.FromTimestamptz(oldest)
			o.StuckByTool = append(o.StuckByTool, t)
			return nil
		})
		if err != nil {
			return fmt.Errorf("count stuck records by tool: %w", err)
		}
		o.StuckByToolCut = read > readmodel.CountCap
	}
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
