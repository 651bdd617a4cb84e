package reconcile

import (
	"slices"
)

// EveryTenant is the tenant of a grant that sees every tenant.
const EveryTenant = "*"

// Access is what a login role may do in the store: the level of its
// group role and the tenants opsdesk.access maps it to.
type Access struct {
	Role string
	// Level is viewer, reconciler, operator or admin, the highest group
	// role the role is a member of; "" for none. A reconciler reads as a
	// viewer and decides only what the reconciler's allowlist lets a
	// lookup settle.
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
