// Package desk applies people's decisions through the database: decide,
// acknowledge conflicts, reveal a stored value or a conflict's requests,
// grant access, and read a role's access and capabilities. Desk is one
// person's place to decide, the console's Decider.
//
// The database decides. Each call runs one SECURITY DEFINER function of the
// opsdesk schema in its own short transaction, connected as the person's
// own login role: the function checks that role's membership, the record's
// state and the version the person saw, applies the decision and appends
// the audit record together. A refusal changes nothing, is audited too, and
// comes back as a *reconcile.RefusedError naming the audit record.
package desk
