package reconcile

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EveryTenant is the tenant of a grant that sees every tenant.
const EveryTenant = "*"

// Access is what a login role may do in the store: the level of its
// group role and the tenants opsdesk.access maps it to.
type Access struct {
	Role string
	// Level is viewer, operator or admin, the highest group role the role
	// is a member of; "" for none.
	Level string
	// Tenants are the tenants it sees, sorted; EveryTenant among them is
	// every tenant.
	Tenants []string
	// FromAudit: the connected role may not read opsdesk.access (only
	// opsdesk_owner, the tables' owner and superusers may; an admin may
	// not), so Tenants are the tenants the audit trail's succeeded
	// access:grant records gave the role since its last access:revoke.
	// opsdesk.grant_access writes the table and the record in one
	// transaction, so the two agree unless someone who may bypass the
	// functions (see the README's known limits) wrote the table directly.
	FromAudit bool
}

// Every tells whether the role sees every tenant.
func (a Access) Every() bool { return slices.Contains(a.Tenants, EveryTenant) }

// Equal tells whether a and b give the same level and tenants.
func (a Access) Equal(b Access) bool { return a.Level == b.Level && slices.Equal(a.Tenants, b.Tenants) }

// RoleAccess reads role's access as the connected role sees it: its
// level from the catalog, its tenants from opsdesk.access when the
// connected role may read it, else from the audit chain of events
// outside any tenant, which an admin of every tenant (the only one who
// may grant) reads.
func RoleAccess(ctx context.Context, pool *pgxpool.Pool, role string) (Access, error) {
	a := Access{Role: role}
	var readable bool
	err := pool.QueryRow(ctx, `
SELECT coalesce((SELECT CASE WHEN pg_has_role(r.oid, 'opsdesk_admin', 'MEMBER') THEN 'admin'
                             WHEN pg_has_role(r.oid, 'opsdesk_operator', 'MEMBER') THEN 'operator'
                             WHEN pg_has_role(r.oid, 'opsdesk_viewer', 'MEMBER') THEN 'viewer' END
                 FROM pg_catalog.pg_roles r WHERE r.rolname = $1), ''),
       pg_catalog.has_table_privilege('opsdesk.access', 'SELECT')`, role).Scan(&a.Level, &readable)
	if err != nil {
		return a, fmt.Errorf("read the access of %s: %w", role, err)
	}
	query := `SELECT coalesce(array_agg(tenant ORDER BY tenant), '{}') FROM opsdesk.access WHERE role = $1`
	if !readable {
		a.FromAudit = true
		query = `
WITH grants AS (
    SELECT action, details->>'tenant' AS tenant, at FROM opsdesk.audit
    WHERE tenant = '' AND action IN ('access:grant', 'access:revoke') AND outcome = 'succeeded'
      AND details->>'role' = $1
)
SELECT coalesce(array_agg(DISTINCT g.tenant ORDER BY g.tenant), '{}') FROM grants g
WHERE g.action = 'access:grant'
  AND g.at > coalesce((SELECT max(at) FROM grants WHERE action = 'access:revoke'), '-infinity')`
	}
	if err := pool.QueryRow(ctx, query, role).Scan(&a.Tenants); err != nil {
		return a, fmt.Errorf("read the tenants of %s: %w", role, mapError(err))
	}
	return a, nil
}
