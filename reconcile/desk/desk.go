package desk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/reconcile"
)

// Desk is one person's place to decide: their own connection, the tool
// catalog and the name they go by. The console and the commands use it.
type Desk struct {
	Pool  *pgxpool.Pool
	Tools map[string]reconcile.Tool
	// DisplayName is the name the person claims (configuration); the audit
	// keeps it beside the authenticated role.
	DisplayName string
	// Client runs lookups (default http.DefaultClient).
	Client *http.Client
}

// Capabilities asks the database what the connected role may do.
func (d *Desk) Capabilities(ctx context.Context) (reconcile.Capabilities, error) {
	var c reconcile.Capabilities
	err := d.Pool.QueryRow(ctx, `
SELECT session_user, pg_has_role(session_user, 'opsdesk_operator', 'MEMBER'),
    pg_has_role(session_user, 'opsdesk_admin', 'MEMBER'),
    pg_has_role(session_user, 'opsdesk_admin', 'MEMBER') AND opsdesk.sees_every_tenant()`).
		Scan(&c.Role, &c.Decide, &c.Grant, &c.Purge)
	if err != nil {
		return c, fmt.Errorf("read the role's capabilities: %w", err)
	}
	return c, nil
}

// Runbook is the tool's runbook, if the catalog has one.
func (d *Desk) Runbook(tool string) string { return d.Tools[tool].Runbook }

// HasLookup tells whether the catalog gives tool an outcome lookup.
func (d *Desk) HasLookup(tool string) bool { return d.Tools[tool].Lookup != nil }

// Ask runs the tool's lookup for an identity; ok is false when the tool
// has none.
func (d *Desk) Ask(ctx context.Context, tenant, tool, key string) (a reconcile.Answer, ok bool) {
	spec := d.Tools[tool].Lookup
	if spec == nil {
		return reconcile.Answer{}, false
	}
	client := d.Client
	if client == nil {
		client = http.DefaultClient
	}
	return reconcile.Ask(ctx, client, *spec, tenant, tool, key), true
}

// Decide applies p with the person's display name and, when p names no
// retention, the tool's.
func (d *Desk) Decide(ctx context.Context, tool string, p reconcile.DecideParams) (reconcile.Result, error) {
	p.DisplayName = d.DisplayName
	if p.Retention == 0 {
		p.Retention = d.Tools[tool].Retention
	}
	return Decide(ctx, d.Pool, p)
}

// StartBatch records a run about to decide, planned from filter, and
// returns its batch id (see StartBatch).
func (d *Desk) StartBatch(ctx context.Context, filter string) (string, error) {
	return StartBatch(ctx, d.Pool, filter, d.DisplayName)
}

// SealResults seals the trail and gives results their sequence numbers
// (see SealResults).
func (d *Desk) SealResults(ctx context.Context, results []*reconcile.Result) error {
	return SealResults(ctx, d.Pool, results)
}

// AckConflicts acknowledges record id's unreviewed conflicts among seen.
func (d *Desk) AckConflicts(ctx context.Context, id int64, seen []int64, reason string) (reconcile.Result, error) {
	return AckConflicts(ctx, d.Pool, id, seen, reason, d.DisplayName)
}

// Reveal returns record id's stored intent or result, audited first.
func (d *Desk) Reveal(ctx context.Context, id int64, field reconcile.Field, reason string) (json.RawMessage, reconcile.Result, error) {
	return Reveal(ctx, d.Pool, id, field, reason, d.DisplayName)
}

// RevealTo writes record id's stored intent or result to w, a slice at
// a time, audited first (see RevealTo).
func (d *Desk) RevealTo(ctx context.Context, id int64, field reconcile.Field, reason string, w io.Writer) (reconcile.Result, error) {
	return RevealTo(ctx, d.Pool, id, field, reason, d.DisplayName, w)
}

// RevealStart returns the start of record id's stored intent or result
// (at most maxBytes of its text) and its size, audited first.
func (d *Desk) RevealStart(ctx context.Context, id int64, field reconcile.Field, reason string, maxBytes int) (reconcile.Revealed, reconcile.Result, error) {
	return RevealStart(ctx, d.Pool, id, field, reason, d.DisplayName, maxBytes)
}
